"""Stage 5 of `drake models pretrain`: fresh public questions that compare pictures or relate
objects, after the look-up stage."""

from __future__ import annotations

import argparse
import json
import re
import shutil

import pytest

from drake.models.cli import add_cli
from drake.models.pretrain import (
    _meta,
    public_samples,
    train_family,
)
from drake.models.relation_pretrain import (
    _RELATION_BLOCK,
    _RELATION_START,
    RELATION_FAMILIES,
    RELATION_STAGE,
    pretrain_relation,
    relation_plans,
    relation_sample,
)

RELATION = {"steps": 3, "batch_size": 4, "eval_size": 4, "seed": 1}


def test_three_in_ten_relation_questions_are_multi_picture_ones_the_rest_formats():
    """Question k: the first of every ten from synth-public-multi's blocks, in order, then the
    rest from synth-public-formats'; each the first sample of its block of a relation family."""
    tasks = []
    for index in range(12):
        sample = relation_sample(1, index)
        assert _meta(sample)["family"] in RELATION_FAMILIES
        tasks.append(sample["id"].rsplit("-public-", 1)[0])
    multi, formats = "synth-public-multi", "synth-public-formats"
    assert tasks == [multi] * 3 + [formats] * 7 + [multi] * 2
    # question 11 is the fifth multi-picture one, question 9 the seventh formats one
    for index, task, j in ((11, multi, 4), (9, formats, 6)):
        block = public_samples(task, "public", _RELATION_BLOCK, 1,
                               start=_RELATION_START + j * _RELATION_BLOCK)
        first = next(s for s in block if _meta(s).get("family") in RELATION_FAMILIES)
        sample = relation_sample(1, index)
        assert (sample["id"], sample["prompt"]) == (first["id"], first["prompt"])
    assert len({relation_sample(1, k)["id"] for k in range(12)}) == 12


def test_a_step_plans_stage_three_draws_then_its_share_of_relation_questions():
    plans = relation_plans(seed=1, share=0.5)
    first, second = plans.plan(4), plans.plan(5)
    assert first[2:] == [("relation-question", 0), ("relation-question", 1)]
    assert second[3:] == [("relation-question", 2), ("relation-question", 3)]  # round(2.5) = 2
    assert all(task != "relation-question" for task, _ in first[:2] + second[:3])
    assert plans.drawn() == 9
    # the regular draws are a fresh stream of their own: another seed draws others
    assert relation_plans(2, 0.5).plan(40)[:20] != relation_plans(1, 0.5).plan(40)[:20]


def test_the_stage_is_seeded_reported_and_needs_stage_three(stage3_root, tmp_path):
    before = json.loads((stage3_root / "tiny-llava-llama" / "pretrain_report.json").read_text())
    a = pretrain_relation("tiny-llava-llama",
                          out_dir=shutil.copytree(stage3_root, tmp_path / "a"), **RELATION)
    b = pretrain_relation("tiny-llava-llama",
                          out_dir=shutil.copytree(stage3_root, tmp_path / "b"), **RELATION)
    weights = (a / "model.safetensors").read_bytes()
    assert weights == (b / "model.safetensors").read_bytes()
    assert weights != (stage3_root / "tiny-llava-llama" / "model.safetensors").read_bytes()
    report = json.loads((a / "pretrain_report.json").read_text())
    stage = report.pop(RELATION_STAGE)
    assert report.pop("weights_sha256") != before.pop("weights_sha256")
    assert report == before  # the earlier stages' records stay as they were
    assert stage["steps"] == 3 and stage["train_samples"] == 12
    assert stage["relation_share"] == 0.5 and stage["lr"] == 1e-3
    assert stage["schedule"].startswith("linear warm-up 50 steps")  # half stage 3's ...
    assert report["lookup_stage"]["schedule"].startswith("linear warm-up 100 steps")
    assert stage["relation_families"] == list(RELATION_FAMILIES)
    assert stage["relation_tasks"] == {"synth-public-multi": 0.3, "synth-public-formats": 0.7}
    assert stage["from_weights_sha256"] == json.loads(
        (stage3_root / "tiny-llava-llama" / "pretrain_report.json").read_text())["weights_sha256"]
    assert set(stage["accuracy_after"]) > {"mean"} and len(stage["loss_curve"]) == 3
    with pytest.raises(ValueError, match="already went through the relation stage"):
        pretrain_relation("tiny-llava-llama", out_dir=tmp_path / "a", **RELATION)
    stage2 = stage3_root.parent / (stage3_root.name + "-stage2")
    with pytest.raises(ValueError, match="lacks 'lookup_stage'.*--lookup-only"):
        pretrain_relation("tiny-llava-llama", out_dir=stage2, **RELATION)
    with pytest.raises(ValueError, match="share must be in"):
        pretrain_relation("tiny-llava-llama", out_dir=stage3_root, **{**RELATION, "share": 0})


def test_train_family_runs_stage_five_after_stage_three_to_the_bytes_of_two_calls(
        stage3_root, tmp_path):
    stage2 = stage3_root.parent / (stage3_root.name + "-stage2")
    seen = []
    both = train_family("tiny-llava-llama", out_dir=shutil.copytree(stage2, tmp_path / "b"),
                        language=False, lookup_steps=2, label_steps=0, relation_steps=2, seed=1,
                        batch_size=2, eval_size=0, progress=lambda s, t, v: seen.append((s, t)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # stage 5 counts on after stage 3, of 4
    direct = pretrain_relation("tiny-llava-llama",
                               out_dir=shutil.copytree(stage3_root, tmp_path / "d"), steps=2,
                               batch_size=2, eval_size=0, seed=1)
    assert (both / "model.safetensors").read_bytes() == (direct / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="trains nothing"):
        train_family("tiny-llava-llama", out_dir=tmp_path / "b", language=False, lookup_steps=0,
                     relation_steps=0)


def test_models_pretrain_relation_only_runs_stage_five_on_the_cached_weights(
        capsys, stage3_root, tmp_path):
    parser = argparse.ArgumentParser(prog="drake")
    add_cli(parser.add_subparsers(dest="command", required=True))
    root = shutil.copytree(stage3_root, tmp_path / "cache")
    argv = ["models", "pretrain", "--model", "tiny-llava-llama", "--relation-only",
            "--batch-size", "2", "--eval-size", "2", "--seed", "1", "--cache-dir", str(root)]
    for extra, match in ((["--relation-steps", "0"], "--relation-only runs the relation stage "
                                                      "alone"),
                         (["--label-only", "--label-steps", "2"],
                          "--label-only and --relation-only each skip"),
                         (["--model", "tiny-clip"], "--relation-only trains .*, not tiny-clip")):
        args = parser.parse_args([*argv, *extra])
        with pytest.raises(ValueError, match=match):
            args.func(args)
    args = parser.parse_args([*argv, "--relation-steps", "2", "--label-steps", "5"])
    assert args.func(args) == 0  # --label-steps does not run stage 4 with --relation-only
    out, err = capsys.readouterr()
    assert "then the look-up stage: 2 steps in" in out  # the cached stage 3, reported
    assert "then the relation stage: 2 steps in" in out and "label stage" not in out
    assert re.findall(r"tiny-llava-llama: step (\d+)/2", err) == ["1", "2"]  # stage 5 alone
    report = json.loads((root / "tiny-llava-llama" / "pretrain_report.json").read_text())
    assert report[RELATION_STAGE]["steps"] == 2 and "label_stage" not in report
