"""benchmarks/picture_drill.py: its picture questions and its seeded drill."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("picture_drill")


def test_picture_questions_are_the_public_ones_seeded(bench) -> None:
    from drake.synth.public import picture_question

    questions = bench.PictureQuestions(3)
    made = [questions.next() for _ in range(20)]
    rng = np.random.default_rng(80)  # PictureQuestions(3) draws from default_rng(77 + 3)
    for i, (sample, tokens) in enumerate(made, start=1):
        want, want_tokens = picture_question(rng, f"picture-{i}", task="picture")
        assert sample["prompt"] == want["prompt"] and sample["meta"] == want["meta"]
        assert sample["id"] == want["id"] and tokens == want_tokens
    assert bench.FAMILIES and bench.PER_PICTURE == 9
    compared = bench.PictureQuestions(3, compare=True)
    families = {json.loads(compared.next()[0]["meta"])["family"] for _ in range(60)}
    assert families == {*bench.FAMILIES, "same_background", "same_look"}


def _digest(bundle) -> str:
    h = hashlib.sha256()
    for name, p in sorted(bundle.model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def test_drill_is_seeded_trains_with_the_pointer_and_saves_a_cache(bench, tmp_path) -> None:
    from drake.models import load_model

    def run(pointer: bool):
        torch.manual_seed(0)
        bundle = load_model("tiny-llava-qwen")
        losses = bench.drill(bundle, steps=2, pictures=2, batch=4, lr=1e-3, seed=0,
                             pointer=pointer, say=lambda line: None)
        return bundle, losses

    first, losses = run(True)
    start = _digest(load_model("tiny-llava-qwen"))
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
    assert _digest(first) != start
    assert _digest(run(True)[0]) == _digest(first)
    assert _digest(run(False)[0]) != _digest(first)  # the pointer loss changes the update
    assert not any(p.requires_grad for p in first.model.parameters())
    save_model_cache = bench.save_model_cache  # public_formats', as the script imports it
    folder = save_model_cache(first, tmp_path, "tiny-llava-qwen", "drill.json", {"seed": 0})
    assert folder == tmp_path / "tiny-llava-qwen"
    assert _digest(load_model("tiny-llava-qwen", cache_dir=tmp_path)) == _digest(first)
    scores = bench.exact_match(first, 6, 0)
    assert set(scores) <= {*bench.FAMILIES, "all"} and "all" in scores
    assert all(0.0 <= v <= 1.0 for v in scores.values())
    compared = bench.exact_match(first, 12, 0, compare=True)  # scores what --compare trains
    assert set(compared) & set(bench.COMPARE_FAMILIES) and "all" in compared
    with pytest.raises(SystemExit, match="--pictures 5: give 1 to 4"):
        bench.drill(first, steps=1, pictures=5, batch=4, lr=1e-3, seed=0)
    with pytest.raises(SystemExit, match="--comparisons 3: give 0 to 2"):
        bench.drill(first, steps=1, pictures=2, comparisons=3, batch=4, lr=1e-3, seed=0)


def test_comparison_questions_are_seeded_public_comparisons(bench) -> None:
    from drake.models.pretrain import _meta

    drawn = bench.ComparisonQuestions(0)
    made = [drawn.next() for _ in range(40)]
    again = bench.ComparisonQuestions(0)
    assert [again.next()["id"] for _ in range(40)] == [s["id"] for s in made]
    assert len({s["id"] for s in made}) == 40  # each public index once
    assert {_meta(s)["family"] for s in made} <= bench.COMPARISON_FAMILIES
    assert {s["task"] for s in made} == {"synth-public-multi", "synth-public-formats"}
    assert len({_meta(s)["family"] for s in made}) >= 4


def test_drill_with_comparisons_trains_on_them(bench) -> None:
    from drake.models import load_model

    def run(comparisons: int):
        torch.manual_seed(0)
        bundle = load_model("tiny-llava-qwen")
        bench.drill(bundle, steps=1, pictures=1, comparisons=comparisons, batch=3, lr=1e-3,
                    seed=0, say=lambda line: None)
        return _digest(bundle)

    assert run(1) == run(1) != run(0)
