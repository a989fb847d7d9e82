"""benchmarks/lookup_gap.py: its present-guess line, its grounding score and its questions."""

from __future__ import annotations

import importlib
import json

import pytest
import torch

pretrain = importlib.import_module("drake.models.pretrain")


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("lookup_gap")


def _sample(objects: list[str]) -> dict:
    return {"meta": json.dumps({"family": "colour",
                                "scenes": [{"domain": "plain", "objects": objects}]})}


def test_present_guess_is_one_over_the_distinct_values_in_the_picture(bench) -> None:
    sample = _sample(["large red solid star@0.20,0.20", "small red outlined heart@0.80,0.20",
                      "large blue solid star@0.50,0.80"])
    assert bench.scene_objects(sample)[1] == {"colour": "red", "shape": "heart",
                                              "fill": "outlined", "size": "small"}
    assert bench.present_guess(sample, "colour") == pytest.approx(1 / 2)  # red, blue
    assert bench.present_guess(sample, "shape") == pytest.approx(1 / 2)  # star, heart
    assert bench.present_guess(sample, "size") == pytest.approx(1 / 2)
    assert bench.present_guess(_sample(["large red solid star@0.2,0.2"]), "colour") == 1.0
    assert bench.present_guess(_sample([]), "colour") == 0.0


def test_slot_accuracy_argmaxes_among_each_slots_words_and_skips_empty_cells(bench) -> None:
    # vocabulary of 8: colours 0, 1; shapes 2, 3; fills 4, 5; sizes 6, 7
    targets = torch.tensor([[0, 2, 4, 6], [1, 3, 5, 7], [-100, -100, -100, -100]])
    logits = torch.zeros(3, 8)
    logits[0, [0, 2, 5, 6]] = 1.0  # colour, shape, size right; fill wrong (5 over 4)
    logits[1, [0, 3, 5, 7]] = 1.0  # colour wrong; shape, fill, size right
    logits[1, 2] = 0.5
    logits[2, :] = 9.0  # an empty cell: ignored whatever it says
    logits[0, 7] = 5.0  # the other size word: cell 0's size is wrong, its colour still right
    got = bench.slot_accuracy(logits, targets)
    assert got == {"colour": 0.5, "shape": 1.0, "fill": 0.5, "size": 0.5}


def test_lookup_questions_are_held_out_colour_and_shape_questions_in_order(bench) -> None:
    found = bench.lookup_questions(5, 0)
    read = pretrain.public_samples("synth-public-open", "test", 400, 0)
    for family in bench.LOOKUPS:
        want = [s["id"] for s in read if pretrain._meta(s)["family"] == family][:5]
        assert [s["id"] for s in found[family]] == want  # the test split's, in index order
