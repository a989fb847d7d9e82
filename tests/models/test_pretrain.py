"""`drake models pretrain` on a micro budget: determinism, cache layout, safetensors only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from drake.models import load_model, pretrain
from drake.models.pretrain import public_tasks

MICRO = {"steps": 3, "batch_size": 2, "train_size": 3, "eval_size": 4}
PACKAGE = Path(__file__).resolve().parents[2] / "drake" / "models"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    a = pretrain("tiny-llava-llama", out_dir=tmp_path_factory.mktemp("a"), seed=1, **MICRO)
    b = pretrain("tiny-llava-llama", out_dir=tmp_path_factory.mktemp("b"), seed=1, **MICRO)
    return a, b


def test_public_split_tasks():
    from drake.synth import SYNTH_TASKS

    tasks = public_tasks()
    assert tasks and all(SYNTH_TASKS[t].group == "public" for t in tasks)


def test_same_seed_same_weight_bytes(two_runs):
    a, b = two_runs
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()


def test_other_seed_other_weights(two_runs, tmp_path):
    c = pretrain("tiny-llava-llama", out_dir=tmp_path, seed=2, **MICRO)
    assert (c / "model.safetensors").read_bytes() != (two_runs[0] / "model.safetensors").read_bytes()


def test_cache_layout_and_report(two_runs):
    folder = two_runs[0]
    assert folder.name == "tiny-llava-llama"
    files = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "pretrain_report.json"} <= files
    assert not any(re.search(r"\.(bin|pt|pth|pkl|pickle|ckpt)$", f) for f in files)
    assert not any(p.name.startswith(".") for p in folder.parent.iterdir())  # no staging left
    report = json.loads((folder / "pretrain_report.json").read_text())
    assert report["steps"] == 3 and report["seed"] == 1 and report["model"] == "tiny-llava-llama"
    assert report["train_samples"] == 3 * len(public_tasks())
    assert report["final_loss"] > 0 and len(report["loss_curve"]) >= 1
    for key in ("accuracy_before", "accuracy_after"):
        acc = report[key]
        assert acc["n"] == 4 and 0 <= acc["loglik"] <= 1 and 0 < acc["chance"] < 1
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        assert any("language_model" in k for k in handle.keys())


def test_load_model_finds_the_cached_weights(two_runs):
    folder = two_runs[0]
    bundle = load_model("tiny-llava-llama", cache_dir=folder.parent)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        saved = {k: handle.get_tensor(k) for k in handle.keys()}
    params = dict(bundle.model.state_dict())
    renames = (("language_model.model.", "model.language_model."),
               ("language_model.lm_head.", "lm_head."),
               ("vision_tower.", "model.vision_tower."),
               ("multi_modal_projector.", "model.multi_modal_projector."))
    for key, value in saved.items():
        for old, new in renames:
            if key.startswith(old):
                key = new + key[len(old):]
                break
        assert torch.equal(params[key], value), key
    assert len(bundle.tokenizer) == bundle.model.config.text_config.vocab_size


def test_real_backbones_are_not_pretrained_here(tmp_path):
    with pytest.raises(ValueError, match="tiny models only"):
        pretrain("llama3.2-1b-vl", out_dir=tmp_path, **MICRO)
    with pytest.raises(ValueError, match="steps"):
        pretrain("tiny-llava-llama", out_dir=tmp_path, steps=0)


def test_no_pickle_in_the_model_zoo():
    for source in PACKAGE.glob("*.py"):
        text = source.read_text()
        assert "import pickle" not in text and "pickle." not in text, source
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (source, call)


def _fake(task: str, family: str, choices=()) -> dict:
    return {"task": task, "choices": list(choices), "meta": json.dumps({"family": family})}


def test_curriculum_pools():
    from drake.models.pretrain import curriculum_pools

    samples = [_fake("open", "colour"), _fake("mc", "colour", ["red", "blue"]),
               _fake("open", "shape"), _fake("open", "caption"), _fake("mc", "claim", ["a"])]
    pools = curriculum_pools(samples)
    assert pools["colour"].tolist() == [0]
    assert pools["attributes"].tolist() == [0, 2]
    assert pools["all"].tolist() == [0, 1, 2, 3, 4]
    assert curriculum_pools([_fake("mc", "claim", ["a"])])["colour"].tolist() == [0]


def test_curriculum_stages_switch_on_ignition_or_cap():
    import numpy as np

    from drake.models.pretrain import IGNITION_LOSS, STAGE_MIX, _Curriculum

    pools = {"colour": np.arange(4), "attributes": np.arange(4, 8), "all": np.arange(8, 20)}
    ignited = _Curriculum(pools, 1000, 4, np.random.default_rng(0))
    stuck = _Curriculum(pools, 1000, 4, np.random.default_rng(0))
    drawn = {"colour": [], "attributes": [], "all": []}
    for step in range(1000):
        ignited.advance(step, [IGNITION_LOSS - 0.1] * 60)
        stuck.advance(step, [IGNITION_LOSS + 0.1] * 60)
        rows = ignited.batch().tolist()
        assert len(rows) == 4
        drawn[["colour", "attributes", "all"][ignited.stage]].extend(rows)
        stuck.batch()
    assert [(s["stage"], s["from_step"], s["to_step"]) for s in ignited.summary()] == [
        ("colour", 0, 100), ("attributes", 100, 300), ("all", 300, 1000)]
    assert [(s["from_step"], s["to_step"]) for s in stuck.summary()] == [
        (0, 450), (450, 650), (650, 1000)]
    # batches follow the stage mix exactly: 4 rows = 2 + 2, then 1 + 1 + 2
    assert set(drawn["colour"]) == set(range(4))
    assert sum(r < 4 for r in drawn["attributes"]) == 2 * 200
    assert sum(r >= 8 for r in drawn["all"]) == 2 * 700
    assert STAGE_MIX["colour"] == {"colour": 1.0}
    # pools are read in epochs: every colour index appears equally often in stage one
    counts = np.bincount(drawn["colour"], minlength=4)
    assert counts.min() == counts.max() == 100


def test_parallel_workers_give_the_same_weights(tmp_path):
    from drake.models.pretrain import pretrain_many

    seen = []
    folders = pretrain_many(["tiny-llava-llama", "tiny-llava-qwen"], workers=2,
                            out_dir=tmp_path / "par", seed=1, progress=lambda *a: seen.append(a),
                            **{**MICRO, "steps": 10})
    alone = pretrain("tiny-llava-llama", out_dir=tmp_path / "alone", seed=1,
                     **{**MICRO, "steps": 10})
    assert set(folders) == {"tiny-llava-llama", "tiny-llava-qwen"}
    assert ((folders["tiny-llava-llama"] / "model.safetensors").read_bytes()
            == (alone / "model.safetensors").read_bytes())
    assert {name for name, *_ in seen} == set(folders)
    assert all(step <= total for _, step, total, _ in seen)
