"""benchmarks/picture_drill.py: its picture questions and its seeded drill."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("picture_drill")


def _scenes(sample: dict) -> list:
    from drake.synth.scene import Scene

    return [Scene.from_summary(s) for s in json.loads(sample["meta"])["scenes"]]


def test_picture_questions_answer_from_the_asked_picture(bench) -> None:
    from drake.synth.public import QUALITY_WORDS

    questions = bench.PictureQuestions(3)
    made = [questions.next() for _ in range(200)]
    again = bench.PictureQuestions(3)
    assert [again.next()[0]["prompt"] for _ in range(200)] == [s["prompt"] for s, _ in made]
    families = set()
    for sample, tokens in made:
        meta = json.loads(sample["meta"])
        scenes = _scenes(sample)
        n = len(scenes)
        assert 2 <= n <= 4 and len(sample["images"]) == n == sample["prompt"].count("<image>")
        k = tokens[0] // bench.PER_PICTURE
        assert tokens == list(range(k * 9, k * 9 + 9)) and k < n
        family = meta["family"]
        families.add(family)
        looks = [QUALITY_WORDS[s.effects[0][0] if s.effects else ""] for s in scenes]
        if family == "which_background":
            asked = scenes[k].domain
            assert f"the {asked} background" in sample["prompt"]
            assert sample["answer"] == str(k + 1)
            assert [s.domain for s in scenes].count(asked) == 1
        elif family == "background_at":
            assert f"in picture {k + 1}." in sample["prompt"]
            assert sample["answer"] == scenes[k].domain
        elif family == "which_look":
            assert sample["answer"] == str(k + 1)
            assert f"looks {looks[k]}." in sample["prompt"] and looks[k] != "clean"
            assert looks.count("clean") == n - 1
        else:
            assert family == "look_at" and f"how picture {k + 1} looks" in sample["prompt"]
            assert sample["answer"] == looks[k]
    assert families == set(bench.FAMILIES)


def test_picture_questions_ask_no_client_question(bench) -> None:
    from drake.registry import get_benchmark
    from drake.synth.catalog import generate_sample

    spec = get_benchmark("drake-synth")
    tasks = [t for c in spec.clients for t in c.tasks] + list(spec.unseen_tasks)
    prompts = " ".join(generate_sample(t, "train", i, 0)["prompt"] for t in tasks
                       for i in range(5))
    for template in bench._TEMPLATES.values():
        fixed = template.split("{")[0]
        assert len(fixed) > 10 and fixed not in prompts


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
