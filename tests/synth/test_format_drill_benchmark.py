"""benchmarks/format_drill.py: its pools, its batch split and its training loop."""

from __future__ import annotations

import importlib

import pytest
import torch

pretrain = importlib.import_module("drake.models.pretrain")


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("format_drill")


def test_drill_pool_holds_only_the_drilled_formats_in_index_order(bench) -> None:
    pool = bench.drill_samples("public", 30, ["letter"], 0, start=bench.DRILL_START)
    assert len(pool) == 30
    assert {pretrain._meta(s)["format"] for s in pool} == {"letter"}
    # in index order, and exactly the lettered ones among the indices it read
    read = pretrain.public_samples("synth-public-formats", "public", 500, 0,
                                   start=bench.DRILL_START)
    assert [s["id"] for s in pool] == [s["id"] for s in read
                                       if pretrain._meta(s)["format"] == "letter"][:30]
    both = bench.drill_samples("public", 40, ["letter", "id"], 0, start=bench.DRILL_START)
    assert {pretrain._meta(s)["format"] for s in both} == {"letter", "id"}
    held = bench.drill_samples("test", 40, ["letter", "id"], 0)
    assert not {s["id"] for s in held} & {s["id"] for s in both}


def test_pools_never_repeat_the_shipped_pretraining_pool(bench) -> None:
    easy, full = pretrain._train_set(0, 400)
    shipped = {s["id"] for s in easy + full}
    regular = bench.regular_samples(40, 0)
    assert [s["task"] for s in regular].count("synth-public-formats") == \
        pretrain._shares(40)["synth-public-formats"]
    drilled = bench.drill_samples("public", 10, ["id"], 0, start=bench.DRILL_START)
    assert not ({s["id"] for s in regular + drilled} & shipped)


def test_unknown_formats_and_shares_are_refused_by_name(bench) -> None:
    with pytest.raises(ValueError, match=r"unknown drill format.*'lettered'.*letter, id"):
        bench.drill_samples("public", 1, ["lettered"], 0)
    with pytest.raises(ValueError, match=r"--share must be within \[0, 1\], got 1.5"):
        bench.split_batch(1.5)
    assert bench.split_batch(0.5) == (16, 16)
    assert bench.split_batch(0.0) == (0, 32)


def test_format_scores_is_a_per_format_percentage(bench) -> None:
    samples = bench.drill_samples("test", 6, ["letter", "id"], 0)
    right = {samples[0]["id"]}
    scores = bench.format_scores(lambda ss: [s["id"] in right for s in ss], samples)
    first = pretrain._meta(samples[0])["format"]
    n_first = sum(pretrain._meta(s)["format"] == first for s in samples)
    assert scores[first] == round(100 / n_first, 1)
    assert sum(scores.values()) == scores[first]  # the other format scored nothing


def test_drill_trains_the_language_side_only_and_reports_each_point(bench) -> None:
    from drake.models import load_model

    bundle = load_model("tiny-llava-qwen")
    tower = {k: v.clone() for k, v in bundle.model.model.vision_tower.state_dict().items()}
    head = bundle.model.get_output_embeddings().weight.clone()
    pools = (bench.drill_samples("public", 8, ["letter"], 0, start=bench.DRILL_START),
             bench.regular_samples(8, 0))
    points = []
    losses = bench.drill(bundle, pools, steps=3, share=0.5, lr=1e-3, seed=0, every=2,
                         on_point=lambda step, loss: points.append((step, loss)))
    assert [p[0] for p in points] == [0, 2, 3]
    assert len(losses) == 3 and all(loss > 0 for loss in losses)
    assert not torch.equal(head, bundle.model.get_output_embeddings().weight)
    for key, value in bundle.model.model.vision_tower.state_dict().items():
        assert torch.equal(value, tower[key]), key
    assert not any(p.requires_grad for p in bundle.model.parameters())
    with pytest.raises(ValueError, match="empty pool"):
        bench.drill(bundle, (pools[0], []), steps=1, share=0.5, lr=1e-3, seed=0, every=1,
                    on_point=lambda step, loss: None)
