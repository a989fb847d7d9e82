"""Stage 6 of `drake models pretrain`: picture questions with the pointer on the asked picture,
and relation questions, after the look-up stage."""

from __future__ import annotations

import argparse
import json
import re
import shutil

import numpy as np
import pytest
import torch

from drake.models.cli import add_cli
from drake.models.lookup_pretrain import _step_loss, named_cells
from drake.models.picture_pretrain import (
    _RELATION_OFFSET,
    PICTURE_STAGE,
    PICTURE_TASK,
    picture_plans,
    picture_sample,
    pointer_cells,
    pretrain_picture,
)
from drake.models.pretrain import _meta, train_family
from drake.models.relation_pretrain import RELATION_FAMILIES, relation_sample
from drake.synth.public import PICTURE_FAMILIES

PICTURE = {"steps": 3, "batch_size": 4, "eval_size": 4, "seed": 1}


def test_own_questions_alternate_picture_and_relation_questions_seeded_by_index():
    made = [picture_sample(1, k) for k in range(8)]
    for k, sample in enumerate(made):
        if k % 2:
            assert _meta(sample)["family"] in RELATION_FAMILIES
            want = relation_sample(1, _RELATION_OFFSET + k // 2)
            assert (sample["id"], sample["prompt"]) == (want["id"], want["prompt"])
        else:
            assert sample["task"] == PICTURE_TASK
            assert _meta(sample)["family"] in PICTURE_FAMILIES
            assert sample["id"] == f"{PICTURE_TASK}-1-{k // 2:09d}"
    # by index, not by order: question 6 alone is question 6 of the run
    assert picture_sample(1, 6)["prompt"] == made[6]["prompt"]
    assert picture_sample(2, 6)["prompt"] != made[6]["prompt"]
    assert len({s["prompt"] for s in made[::2]}) == 4
    # stage 5's relation questions are others
    assert made[1]["id"] not in {relation_sample(1, j)["id"] for j in range(20)}


def test_the_pointer_goes_to_the_asked_picture_or_the_named_cells():
    sample = picture_sample(0, 0)
    k = _meta(sample)["picture"]
    assert pointer_cells(sample) == tuple(range(9 * k, 9 * k + 9))
    relation = picture_sample(0, 1)
    assert pointer_cells(relation) == named_cells(relation)


def test_a_step_plans_stage_three_draws_then_its_own_questions():
    plans = picture_plans(seed=1, share=0.65)
    first = plans.plan(32)
    own = [p for p in first if p[0] == "picture-stage-question"]
    assert own == [("picture-stage-question", k) for k in range(21)] and first[11:] == own
    assert plans.drawn() == 32


def test_the_pointer_loss_on_picture_questions_changes_the_step(stage3_root):
    from drake.models import load_model

    bundle = load_model("tiny-llava-llama", cache_dir=stage3_root)
    bundle.model.set_attn_implementation("eager")
    samples = [picture_sample(0, 0), picture_sample(0, 2)]
    heads = ((1, 0), (2, 1))
    with torch.no_grad():
        plain = _step_loss(bundle, samples, heads)  # named_cells: none for several pictures
        pointed = _step_loss(bundle, samples, heads, cells=pointer_cells)
    assert np.isfinite(float(pointed)) and float(pointed) > float(plain)


def test_the_stage_is_seeded_reported_and_needs_stage_three(stage3_root, tmp_path):
    before = json.loads((stage3_root / "tiny-llava-llama" / "pretrain_report.json").read_text())
    a = pretrain_picture("tiny-llava-llama",
                         out_dir=shutil.copytree(stage3_root, tmp_path / "a"), **PICTURE)
    b = pretrain_picture("tiny-llava-llama",
                         out_dir=shutil.copytree(stage3_root, tmp_path / "b"), **PICTURE)
    weights = (a / "model.safetensors").read_bytes()
    assert weights == (b / "model.safetensors").read_bytes()
    assert weights != (stage3_root / "tiny-llava-llama" / "model.safetensors").read_bytes()
    report = json.loads((a / "pretrain_report.json").read_text())
    stage = report.pop(PICTURE_STAGE)
    assert report.pop("weights_sha256") != before.pop("weights_sha256")
    assert report == before
    assert stage["steps"] == 3 and stage["train_samples"] == 12
    assert stage["picture_share"] == 0.65 and stage["lr"] == 1e-3
    assert stage["schedule"].startswith("linear warm-up 50 steps")
    assert stage["picture_families"] == list(PICTURE_FAMILIES)
    assert stage["own_questions"] == {"picture": 0.5, "relation": 0.5}
    with pytest.raises(ValueError, match="already went through the picture stage"):
        pretrain_picture("tiny-llava-llama", out_dir=tmp_path / "a", **PICTURE)
    stage2 = stage3_root.parent / (stage3_root.name + "-stage2")
    with pytest.raises(ValueError, match="lacks 'lookup_stage'.*--lookup-only"):
        pretrain_picture("tiny-llava-llama", out_dir=stage2, **PICTURE)


def test_train_family_runs_stage_six_after_stage_three_to_the_bytes_of_two_calls(
        stage3_root, tmp_path):
    stage2 = stage3_root.parent / (stage3_root.name + "-stage2")
    seen = []
    both = train_family("tiny-llava-llama", out_dir=shutil.copytree(stage2, tmp_path / "b"),
                        language=False, lookup_steps=2, label_steps=0, picture_steps=2, seed=1,
                        batch_size=2, eval_size=0, progress=lambda s, t, v: seen.append((s, t)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    direct = pretrain_picture("tiny-llava-llama",
                              out_dir=shutil.copytree(stage3_root, tmp_path / "d"), steps=2,
                              batch_size=2, eval_size=0, seed=1)
    assert (both / "model.safetensors").read_bytes() == (direct / "model.safetensors").read_bytes()


def test_models_pretrain_picture_only_runs_stage_six_on_the_cached_weights(
        capsys, stage3_root, tmp_path):
    parser = argparse.ArgumentParser(prog="drake")
    add_cli(parser.add_subparsers(dest="command", required=True))
    root = shutil.copytree(stage3_root, tmp_path / "cache")
    argv = ["models", "pretrain", "--model", "tiny-llava-llama", "--picture-only",
            "--batch-size", "2", "--eval-size", "2", "--seed", "1", "--cache-dir", str(root)]
    for extra, match in ((["--picture-steps", "0"], "--picture-only runs the picture stage"),
                         (["--relation-only", "--relation-steps", "2"],
                          "--relation-only and --picture-only each skip")):
        args = parser.parse_args([*argv, *extra])
        with pytest.raises(ValueError, match=match):
            args.func(args)
    args = parser.parse_args([*argv, "--picture-steps", "2", "--relation-steps", "5"])
    assert args.func(args) == 0  # --relation-steps does not run stage 5 with --picture-only
    out, err = capsys.readouterr()
    assert "then the picture stage: 2 steps in" in out and "relation stage" not in out
    assert re.findall(r"tiny-llava-llama: step (\d+)/2", err) == ["1", "2"]
    report = json.loads((root / "tiny-llava-llama" / "pretrain_report.json").read_text())
    assert report[PICTURE_STAGE]["steps"] == 2 and "relation_stage" not in report
