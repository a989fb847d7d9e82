"""The capability probes of benchmarks/learnability.py: what they ask, and that they stay off the
client tasks' questions."""

from __future__ import annotations

import re

import pytest


@pytest.fixture(scope="module")
def learnability(benchmark_module):
    return benchmark_module("learnability")


def test_option_copy_probe_asks_for_the_label_of_the_named_option(learnability) -> None:
    samples = learnability.option_probe("public", 200, seed=0)
    assert samples == learnability.option_probe("public", 200, seed=0)
    assert samples != learnability.option_probe("test", 200, seed=0)
    for s in samples:
        assert s["images"] == [] and "<image>" not in s["prompt"]
        asked = re.search(r"Which option is (\w+)\?", s["prompt"]).group(1)
        options = dict(re.findall(r"^(\w)\. (\w+)$", s["prompt"], flags=re.M))
        assert list(options) == s["choices"] and 2 <= len(options) <= 5
        assert len(set(options.values())) == len(options)
        assert options[s["answer"]] == asked
    assert {s["choices"][0] for s in samples} == {"A", "1"}  # both label styles
    answers = [s["choices"].index(s["answer"]) for s in samples]
    assert len(set(answers)) == 5  # the gold sits at every position


def test_probes_ask_no_client_question(learnability) -> None:
    from drake.registry import get_benchmark
    from drake.synth.catalog import generate_sample

    tasks = [t for c in get_benchmark("drake-synth").clients for t in c.tasks]
    prompts = " ".join(generate_sample(t, "train", i, 0)["prompt"] for t in tasks
                       for i in range(3))
    assert "Which option is" not in prompts
    assert "The circle is" not in prompts and "The star is" not in prompts
    assert not re.search(r"Is the \w+ \w+ at the", prompts)
    assert set(learnability.PROBES) == {"probe-colour-lookup", "probe-where-lookup",
                                        "probe-option-copy", "probe-text-two-hop"}


def test_where_probe_asks_whether_the_named_object_sits_at_a_position(learnability) -> None:
    import json

    from drake.synth.scene import POSITIONS, Scene

    samples = learnability.where_probe("public", 120, seed=0)
    assert samples == learnability.where_probe("public", 120, seed=0)
    asked_positions = set()
    for s in samples:
        colour, shape, position = re.fullmatch(
            r"<image>\nIs the (\w+) (\w+) at the ([\w ]+)\?\nChoice list:\[Yes, No\]\. "
            r"Your answer is:", s["prompt"]).groups()
        (scene,) = [Scene.from_summary(x) for x in json.loads(s["meta"])["scenes"]]
        (obj,) = [o for o in scene.objects if (o.colour, o.shape) == (colour, shape)]
        assert s["choices"] == ["Yes", "No"]
        assert (s["answer"] == "Yes") == (POSITIONS[obj.cell()] == position)
        asked_positions.add(position)
    assert asked_positions == set(POSITIONS)
    assert 40 <= sum(s["answer"] == "Yes" for s in samples) <= 80


def test_two_hop_probe_answers_with_the_label_of_the_asked_shapes_colour(learnability) -> None:
    samples = learnability.two_hop_probe("public", 300, seed=0)
    assert samples == learnability.two_hop_probe("public", 300, seed=0)
    assert samples != learnability.two_hop_probe("test", 300, seed=0)
    other_fact_offered = 0
    for s in samples:
        assert s["images"] == [] and "<image>" not in s["prompt"]
        facts = dict(re.findall(r"^The (\w+) is (\w+)\.$", s["prompt"], flags=re.M))
        asked = re.search(r"What colour is the (\w+)\?", s["prompt"]).group(1)
        options = dict(re.findall(r"^([A-E])\. (\w+)$", s["prompt"], flags=re.M))
        assert 2 <= len(facts) <= 4 and asked in facts
        assert len(set(facts.values())) == len(facts)  # one shape per colour
        assert list(options) == s["choices"] and 2 <= len(options) <= 4
        assert len(set(options.values())) == len(options)
        assert options[s["answer"]] == facts[asked]
        distractors = set(options.values()) - {facts[asked]}
        other_fact_offered += bool(distractors & set(facts.values()))
    assert len({s["choices"].index(s["answer"]) for s in samples}) == 4  # gold at every position
    # some distractors are another shape's colour: naming any colour of the facts fails
    assert other_fact_offered > 0


def test_knob_overrides_replace_only_the_knobs_given(learnability) -> None:
    import argparse

    from drake.synth.knobs import DEFAULT_KNOBS

    default = DEFAULT_KNOBS["synth-quality-pair"]
    none = argparse.Namespace(closeness=None, objects=None, degradation=None, count=None)
    assert learnability.knobs_for("synth-quality-pair", none) == default
    harder = argparse.Namespace(closeness=None, objects=None, degradation=1.0, count=None)
    got = learnability.knobs_for("synth-quality-pair", harder)
    assert got.degradation == 1.0 and default.degradation != 1.0
    assert (got.objects, got.closeness, got.count) == (default.objects, default.closeness,
                                                       default.count)
    both = argparse.Namespace(closeness=0.0, objects=[1, 2], degradation=None, count=None)
    got = learnability.knobs_for("synth-quality-pair", both)
    assert (got.closeness, got.objects, got.degradation) == (0.0, (1, 2), default.degradation)
    counts = argparse.Namespace(closeness=None, objects=None, degradation=None, count=[1, 5])
    got = learnability.knobs_for("synth-count-choice", counts)
    assert got.count == (1, 5) != DEFAULT_KNOBS["synth-count-choice"].count
    assert got.objects == DEFAULT_KNOBS["synth-count-choice"].objects


def test_by_groups_samples_by_their_meta(learnability) -> None:
    import json

    samples = [{"meta": json.dumps(meta)} for meta in (
        {"changed": ["colour", "fill"]}, {"changed": ["colour"]}, {"changed": ["colour"]},
        {"modification": "make the red star blue"}, {"modification": "move the star"})]
    assert learnability.group_of(samples[0], "changed", 0) == "colour+fill"
    assert learnability.group_of(samples[3], "modification", 1) == "make"
    assert learnability.group_of(samples[3], "family", 0) == "None"
    got = learnability.by_group(samples[:3], [True, True, False], "changed", 0)
    assert got == {"colour": [50.0, 2], "colour+fill": [100.0, 1]}
    got = learnability.by_group(samples[3:], [False, True], "modification", 1)
    assert got == {"make": [0.0, 1], "move": [100.0, 1]}
