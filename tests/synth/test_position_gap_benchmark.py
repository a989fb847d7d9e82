"""benchmarks/position_gap.py: which cell each image token stands for, and the probes per layer."""

from __future__ import annotations

import json

import pytest
import torch


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("position_gap")


def test_token_cells_follow_the_grid_row_by_row_for_every_picture(bench) -> None:
    meta = {"scenes": [
        {"domain": "noise", "objects": ["large red solid star@0.20,0.20",  # top left: cell 0
                                        "small red outlined heart@0.80,0.50"]},  # right: cell 5
        {"domain": "dots", "objects": ["small blue solid circle@0.50,0.90"]}]}  # bottom: 7
    for given in (meta, json.dumps(meta)):
        cells = bench.token_cells({"meta": given})
        assert [cell for cell, _ in cells] == list(range(9)) * 2
        assert [k for k, (_, held) in enumerate(cells) if held] == [0, 5, 9 + 7]


def test_cell_probes_find_a_cell_written_into_the_tokens_and_not_one_left_out(bench) -> None:
    samples = [{"meta": {"scenes": [{"domain": "noise", "objects": [
        f"large red solid star@{0.17 + 0.33 * (i % 3):.2f},{0.17 + 0.33 * (i // 3 % 3):.2f}"]}]}}
        for i in range(120)]
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn(120, 2, 9, 12, generator=gen)  # samples, layers, tokens, hidden
    marked = noise.clone()
    marked[:, 1, :, :9] += 4 * torch.eye(9)  # layer 1 writes each token's cell
    got = bench.cell_probes(list(marked), samples)
    assert got["all"][1] >= 0.95 and got["occupied"][1] >= 0.9
    assert got["all"][0] < 0.3  # layer 0 is noise: about chance (1/9)
    with pytest.raises(ValueError, match="1080 image tokens but 9 cells"):
        bench.cell_probes(list(marked), samples[:1])


def test_measure_reads_every_layer_of_a_model(bench) -> None:
    from drake.models import load_model

    bundle = load_model("tiny-llava-qwen", pretrained=False)
    bundle.model.eval()
    got = bench.measure(bundle, "synth-spatial", 12, 0)
    layers = bundle.model.config.text_config.num_hidden_layers + 1
    assert (got["task"], got["samples"], got["tokens"]) == ("synth-spatial", 12, 108)
    assert 0 < got["holding"] < 108
    assert len(got["all"]) == len(got["occupied"]) == layers
    assert all(0.0 <= v <= 1.0 for v in got["all"] + got["occupied"])
    assert "a token's cell by layer (chance 11.1)" in bench.table(got)
