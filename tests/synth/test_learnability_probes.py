"""The capability probes of benchmarks/learnability.py: what they ask, and that they stay off the
client tasks' questions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def learnability():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import learnability

        yield learnability
    finally:
        sys.path.remove(str(BENCHMARKS))


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
    assert set(learnability.PROBES) == {"probe-colour-lookup", "probe-option-copy"}
