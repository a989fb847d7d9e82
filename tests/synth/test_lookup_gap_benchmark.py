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


def test_object_cells_split_the_asked_objects_cells_from_the_others(bench) -> None:
    # 3 x 3 grid: (0.2, 0.2) is cell 0, (0.8, 0.2) cell 2, (0.5, 0.8) cell 7
    sample = {**_sample(["large red solid star@0.20,0.20", "small blue outlined heart@0.80,0.20",
                         "large green solid star@0.50,0.80"]), "answer": "blue"}
    assert bench.object_cells(sample, "colour") == ([2], [0, 7])
    assert bench.object_cells({**sample, "answer": "star"}, "shape") == ([0, 7], [2])
    assert bench.object_cells({**sample, "answer": "pink"}, "colour") == ([], [0, 2, 7])


def test_selectivity_is_the_last_positions_mean_attention_per_cell(bench) -> None:
    # one layer, two heads, five positions; image tokens at positions 1, 2, 3 (cells 0, 1, 2)
    layer = torch.zeros(2, 5, 5)
    layer[0, -1] = torch.tensor([0.1, 0.6, 0.1, 0.1, 0.1])
    layer[1, -1] = torch.tensor([0.0, 0.2, 0.3, 0.5, 0.0])
    layer[:, 0] = 9.0  # other query positions are never read
    got = bench.selectivity([layer], [1, 2, 3], named=[0], others=[1, 2])
    assert got.shape == (1, 2, 2)
    assert torch.allclose(got, torch.tensor([[[0.6, 0.1], [0.2, 0.4]]]))


def test_attention_reads_every_layer_and_head_and_restores_the_model(bench) -> None:
    from drake.models import load_model

    bundle = load_model("tiny-llava-qwen", pretrained=False)
    before = bundle.model.config._attn_implementation
    samples = bench.lookup_questions(12, 0)["colour"]
    got = bench.attention(bundle, samples, "colour", 3)
    assert got["questions"] == 3
    config = bundle.model.config.text_config
    shape = (config.num_hidden_layers, config.num_attention_heads)
    for key in ("named", "other"):
        assert torch.tensor(got[key]).shape == shape
        assert all(0.0 <= v <= 1.0 for row in got[key] for v in row)
    assert bundle.model.config._attn_implementation == before
    # no question with a named object beside another one: nothing read
    assert bench.attention(bundle, samples[:0], "colour", 3) == {
        "questions": 0, "named": [], "other": []}
