"""benchmarks/picture_gap.py: its probe, the facts it probes for and where it reads them."""

from __future__ import annotations

import json

import pytest
import torch


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("picture_gap")


def test_linear_probe_separates_a_linear_rule_and_not_noise(bench) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(400, 6, generator=gen)
    rule = (x[:, 2] - 0.5 * x[:, 4] > 0).long()
    assert bench.linear_probe(x, rule, 300, classes=2) >= 0.95
    noise = torch.randint(0, 2, (400,), generator=gen)
    assert bench.linear_probe(x, noise, 300, classes=2) < 0.7
    # seeded: the same fit twice
    assert bench.linear_probe(x, noise, 300, classes=2) == bench.linear_probe(x, noise, 300,
                                                                              classes=2)


def test_picture_facts_reads_each_pictures_background_colours_and_shapes(bench) -> None:
    from drake.synth.scene import ALL_DOMAINS

    meta = {"scenes": [
        {"domain": "noise", "objects": ["large red solid star@0.20,0.20",
                                        "small red outlined heart@0.80,0.20"]},
        {"domain": "dots", "objects": []}]}
    for given in (meta, json.dumps(meta)):
        facts = bench.picture_facts({"meta": given})
        assert facts == [
            {"background": ALL_DOMAINS.index("noise"), "colours": {"red"},
             "shapes": {"star", "heart"}},
            {"background": ALL_DOMAINS.index("dots"), "colours": set(), "shapes": set()}]


def test_picture_of_tokens_numbers_the_blocks_of_image_tokens(bench) -> None:
    ids = [1, 9, 9, 5, 9, 9, 9, 9, 2]
    assert bench.picture_of_tokens(ids, 9, 2) == [(1, 0), (2, 0), (4, 1), (5, 1), (6, 2),
                                                  (7, 2)]
    with pytest.raises(ValueError, match="5 image tokens are not blocks of 2"):
        bench.picture_of_tokens(ids[:-2], 9, 2)


def test_task_samples_refuses_one_picture_tasks(bench) -> None:
    assert len(bench.task_samples("synth-quality-pair", 3, 0)[0]["images"]) == 2
    with pytest.raises(SystemExit, match="synth-state: picture_gap needs .* hold \\[1\\]"):
        bench.task_samples("synth-state", 3, 0)


def test_measure_probes_every_layer_and_picture(bench) -> None:
    from drake.models import load_model

    bundle = load_model("tiny-llava-qwen", pretrained=False)
    bundle.model.eval()
    got = bench.measure(bundle, "synth-quality-pair", 16, 0)
    layers = bundle.model.config.text_config.num_hidden_layers + 1
    assert (got["task"], got["samples"], got["pictures"]) == ("synth-quality-pair", 16, 2)
    assert got["seen"]["pictures"] == 32
    assert len(got["placed"]) == layers
    assert len(got["gathered"]["background"]) == layers
    assert all(len(row) == 2 for row in got["gathered"]["background"])
    assert len(got["gathered"]["answer"]) == layers
    values = [got["seen"]["background"], *got["placed"], *got["gathered"]["answer"],
              *[v for row in got["gathered"]["background"] for v in row]]
    assert all(0.0 <= v <= 1.0 for v in values)
    # an untrained model's first layer input carries no picture index: the projected tokens
    # of two pictures are told apart by content only, which is random here
    assert got["placed"][0] <= 0.75
    assert "placed, by layer (chance 50.0)" in bench.table(got)
