"""tap-synth: the twins of TAP's eight datasets keep their real tasks' modalities, kinds and
answer formats, are right about their own scenes, stay inside the tiny tokenizer's vocabulary,
and build into TAP's 30-client layouts."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from drake.build import build
from drake.registry import get_benchmark
from drake.synth import SYNTH_TASKS, generate_sample
from drake.synth.catalog import vocabulary
from drake.synth.extra import CLS_CLASSES
from drake.synth.scene import POSITIONS
from drake.synth.tap import COARSE_CLASSES, TOPIC_CLASSES
from drake.synth.text import tokenize
from partitioners import TAP_LAYOUTS

TAP = {t.id: t for t in SYNTH_TASKS.values() if t.group == "tap"}
N = 40


def _samples(task: str) -> list[dict]:
    return [generate_sample(task, "train", i, seed=1) for i in range(N)]


def test_one_twin_per_tap_dataset():
    real = {t for pattern in TAP_LAYOUTS["flava"] for t, _, _ in pattern}
    assert {t.twin_of for t in TAP.values()} == real
    spec = get_benchmark("tap-synth", size="tiny")
    assert [t.id for t in spec.tasks] == list(TAP)
    assert {t.id: t.metrics for t in spec.tasks} == {
        "tap-synth-objects": ("accuracy",), "tap-synth-coarse": ("accuracy",),
        "tap-synth-item": ("mse",), "tap-synth-scene": ("mse",),
        "tap-synth-topic": ("accuracy",), "tap-synth-quiz": ("bertscore", "meteor"),
        "tap-synth-vqa": ("bertscore", "meteor"), "tap-synth-describe": ("bertscore", "meteor")}


@pytest.mark.parametrize("task", list(TAP))
def test_every_word_is_in_the_tiny_vocabulary(task):
    words = set(vocabulary())
    for s in _samples(task):
        unknown = [w for w in tokenize(s["prompt"] + " " + s["answer"]) if w not in words]
        assert not unknown, f"{s['id']}: {unknown}"


def test_classification_twins_are_balanced_by_index_and_name_their_class():
    for task, classes in (("tap-synth-objects", CLS_CLASSES),
                          ("tap-synth-coarse", COARSE_CLASSES)):
        for i in (0, 5, len(classes) + 5):
            s = generate_sample(task, "test", i, seed=2)
            assert s["prompt"] == "<image>" and len(s["images"]) == 1
            assert s["label"] == i % len(classes) and s["answer"] == classes[s["label"]]
            (shape,) = json.loads(s["meta"])["scenes"][0]["objects"]
            colour, *_, kind = s["answer"].split(" ")
            assert f" {colour} " in shape and f"{kind}@" in shape


def test_reconstruction_twins_are_a_picture_and_its_stored_target():
    import numpy as np

    for task in ("tap-synth-item", "tap-synth-scene"):
        for s in _samples(task)[:10]:
            assert (s["prompt"], s["answer"], s["answer_type"], len(s["images"])) == \
                ("<image>", "", "image", 2)
            source, target = (np.asarray(im) for im in s["images"])
            assert np.array_equal(source, target)  # TAP reconstructs its input
    assert all(s["domain"] == "plain" for s in _samples("tap-synth-item"))
    # every background, noise included, is drawn the same for the input and the target
    assert len({s["domain"] for s in _samples("tap-synth-scene")}) > 1


def test_topic_class_is_the_colour_of_the_one_large_shape():
    for s in _samples("tap-synth-topic"):
        assert not s["images"] and "<image>" not in s["prompt"]
        large = [o for o in json.loads(s["meta"])["described"] if o.startswith("large ")]
        assert len(large) == 1 and large[0].split(" ")[1] == s["answer"]
        assert TOPIC_CLASSES[s["label"]] == s["answer"]
        assert f"large {s['answer']} " in s["prompt"]


def test_quiz_answer_names_subject_letter_and_the_right_option():
    subjects = set()
    for s in _samples("tap-synth-quiz"):
        m = re.fullmatch(r"Answer on (colour|shape|place): ([A-D])\. (.+)", s["answer"])
        assert m, s["answer"]
        subject, letter, option = m.groups()
        subjects.add(subject)
        assert f"question about {subject}." in s["prompt"]
        assert f"\n{letter}. {option}" in s["prompt"]
        meta = json.loads(s["meta"])
        assert meta["short_answer"] == option
        objs = meta["described"]
        if subject == "colour":
            assert any(o.split(" ")[1] == option for o in objs)
        elif subject == "shape":
            assert any(o.split(" ")[3].startswith(option) for o in objs)
        else:
            assert option in POSITIONS
    assert subjects == {"colour", "shape", "place"}


def test_vqa_answers_are_true_of_the_picture():
    kinds = set()
    for s in _samples("tap-synth-vqa"):
        assert s["prompt"].startswith("<image>\n") and len(s["images"]) == 1
        short = json.loads(s["meta"])["short_answer"]
        assert s["answer"] == f"Answer: {short}"
        objs = json.loads(s["meta"])["scenes"][0]["objects"]  # "size colour fill shape@x,y"
        if "How many" in s["prompt"]:
            kinds.add("count")
            assert short == str(len(objs))
        elif "Is there" in s["prompt"]:
            kinds.add("exists")
            colour, shape = re.search(r"Is there an? (\w+) (\w+)\?", s["prompt"]).groups()
            present = any(o.split("@")[0].split(" ")[1::2] == [colour, shape] for o in objs)
            assert short == ("yes" if present else "no")
        else:
            kinds.add("colour")
            shape = re.search(r"What colour is the (\w+)", s["prompt"]).group(1)
            assert any(o.split(" ")[1] == short and f"{shape}@" in o for o in objs)
    assert kinds == {"count", "exists", "colour"}


def test_describe_uses_every_concept():
    for s in _samples("tap-synth-describe"):
        concepts = re.findall(r"\n[A-F]\. ([a-z ]+)", s["prompt"])
        assert s["answer"].startswith("Description: ")
        sentence = s["answer"].lower()
        assert concepts and all(c in sentence for c in concepts)


def test_build_follows_taps_client_patterns(tmp_path):
    build(get_benchmark("tap-synth", size="tiny"), tmp_path, seed=0)
    root = tmp_path / "tap-synth"
    manifest = json.loads((root / "manifest.json").read_text())
    twin = {t.twin_of: t.id for t in TAP.values()}
    for scenario in ("flava-30", "vilt-30"):
        part = pd.read_parquet(root / manifest["partitions"][scenario]["file"])
        part["task"] = part["id"].str.rsplit("-", n=2).str[0]
        train = part[part["split"] == "train"]
        assert manifest["partitions"][scenario]["clients"] == 30
        layout = TAP_LAYOUTS[scenario.split("-")[0]]
        for client in range(30):
            held = set(train.loc[train["client"] == client, "task"])
            assert held == {twin[t] for t, _, _ in layout[client % 10]}, (scenario, client)
    vilt = pd.read_parquet(root / manifest["partitions"]["vilt-30"]["file"])
    held = set(vilt["id"].str.rsplit("-", n=2).str[0])
    assert held == set(TAP) - {"tap-synth-objects", "tap-synth-coarse"}  # ViLT drops both
    counts = manifest["partitions"]["vilt-30"]["counts"]["train"]
    assert counts["unassigned"] == 2 * 60 and counts["assigned"] == 6 * 60  # reconciled
