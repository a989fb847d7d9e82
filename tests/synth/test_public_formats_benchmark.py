"""benchmarks/public_formats.py: the options it reads from each prompt, and its table's counts."""

from __future__ import annotations

import importlib
import json

import pytest


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("public_formats")


@pytest.fixture(scope="module")
def samples():
    pretrain = importlib.import_module("drake.models.pretrain")
    return pretrain.public_samples("synth-public-formats", "test", 300, seed=0)


def _format(sample: dict) -> str:
    return json.loads(sample["meta"])["format"]


def test_options_hold_the_gold_in_every_closed_format(bench, samples) -> None:
    seen = set()
    for s in samples:
        found = bench.options(s)
        seen.add(_format(s))
        if _format(s) == "open":
            assert found is None
            continue
        assert 2 <= len(found) <= 8 and len(set(found)) == len(found)
        assert s["answer"] in found
        if _format(s) == "letter":
            assert found == [chr(ord("A") + i) for i in range(len(found))]
        if _format(s) == "id":
            assert found == [str(i + 1) for i in range(len(found))]
    assert seen == set(bench.FORMATS)


def test_a_prompt_without_its_options_is_named(bench, samples) -> None:
    letter = next(s for s in samples if _format(s) == "letter")
    kept = [line for line in letter["prompt"].splitlines() if line[1:3] != ". "]
    broken = {**letter, "prompt": "\n".join(kept)}
    with pytest.raises(ValueError, match=letter["id"]):
        bench.options(broken)


class _FirstRight:
    """generate(): the gold for the first sample of each call, a wrong word for the rest."""

    def generate(self, group, max_new_tokens, batch_size):
        return [s["answer"] if i == 0 else "nothing-at-all" for i, s in enumerate(group)]


def test_table_counts_every_sample_once_against_a_hand_computed_score(bench, samples) -> None:
    kept = ("letter", "choice", "open")
    result = bench.table(_FirstRight(), samples, kept)
    cells = [(family, fmt, c) for family, row in result.items() for fmt, c in row.items()]
    assert {fmt for _, fmt, _ in cells} == set(kept)
    assert sum(c["n"] for _, _, c in cells) == sum(_format(s) in kept for s in samples)
    for family, fmt, c in cells:
        group = [s for s in samples if _format(s) == fmt
                 and json.loads(s["meta"])["family"] == family]
        assert c["n"] == len(group)
        assert c["accuracy"] == round(100.0 / len(group), 1)
        if fmt == "open":
            assert c["chance"] is None
        else:
            want = sum(1 / len(bench.options(s)) for s in group) / len(group)
            assert c["chance"] == round(100.0 * want, 1)
