"""`drake models list` and `drake models pretrain` through an argparse parser."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from drake.errors import UnknownNameError
from drake.models.cli import add_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drake")
    add_cli(parser.add_subparsers(dest="command", required=True))
    return parser


def test_models_list_prints_the_zoo(capsys, tmp_path):
    args = _parser().parse_args(["models", "list", "--cache-dir", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for text in ("tiny-llava-llama", "tiny-llava-qwen", "thkim0305/llama3.2_1B_vl",
                 "llava-hf/llava-1.5-7b-hf", "128/256", "drake models pretrain"):
        assert text in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    for name, hf_id in (("clip-vit-b16", "openai/clip-vit-base-patch16"),
                        ("clip-vit-b32", "openai/clip-vit-base-patch32")):
        assert hf_id in rows[name] and "2/1.41" in rows[name] and "no (Hub)" in rows[name]
    # an explicit cache without its text side: the row says how to make it
    assert "drake models pretrain --model tiny-clip" in rows["tiny-clip"]
    assert "8/16" in rows["tiny-clip"]


def test_models_pretrain_writes_the_cache(capsys, tmp_path):
    args = _parser().parse_args([
        "models", "pretrain", "--model", "tiny-llava-qwen", "--steps", "2", "--batch-size", "2",
        "--train-size", "8", "--eval-size", "3", "--vision-steps", "2", "--vision-pictures", "4",
        "--device", "cpu", "--cache-dir", str(tmp_path), "--fresh-samples", "--sample-workers", "1",
        "--focus-share", "0.5", "--focus", "lookup", "--mark-options", "--lookup-steps", "2",
        "--label-steps", "2", "--relation-steps", "2",
    ])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "tiny-llava-qwen: 2 steps" in out and "held-out public accuracy" in out
    assert "then the look-up stage: 2 steps in" in out
    assert "then the label stage: 2 steps in" in out
    assert "then the relation stage: 2 steps in" in out
    assert "tiny-vision: 2 steps" in out and "held-out accuracy" in out and "colour" in out
    report = json.loads((tmp_path / "tiny-llava-qwen" / "pretrain_report.json").read_text())
    assert report["steps"] == 2 and report["batch_size"] == 2
    assert report["fresh_samples"] is True and report["train_samples"] == 4
    assert report["focus"] == {"share": 0.5, "kind": "lookup"} and report["mark_options"] is True
    assert report["device"].startswith("cpu") and report["lookup_stage"]["steps"] == 2
    args = _parser().parse_args(["models", "list", "--cache-dir", str(tmp_path)])
    args.func(args)
    assert "yes (pretrained in the cache)" in capsys.readouterr().out


def test_models_pretrain_resumes_a_stopped_run(capsys, tmp_path):
    """A run stopped after its checkpoint at step 2: the same command resumes it there."""
    from drake.models.pretrain import pretrain, pretrain_vision

    pretrain_vision(out_dir=tmp_path, seed=0, steps=2, batch_size=2, pictures=4,
                    eval_pictures=4)

    def stop(step: int, steps: int, loss: float) -> None:
        if step == 3:
            raise KeyboardInterrupt

    budget = {"steps": 4, "batch_size": 2, "train_size": 8, "eval_size": 3}
    with pytest.raises(KeyboardInterrupt):
        pretrain("tiny-llava-qwen", out_dir=tmp_path, checkpoint_every=2, progress=stop, **budget)
    args = _parser().parse_args([
        "models", "pretrain", "--model", "tiny-llava-qwen", "--reuse-vision", "--steps", "4",
        "--batch-size", "2", "--train-size", "8", "--eval-size", "3", "--checkpoint-every", "2",
        "--lookup-steps", "0", "--cache-dir", str(tmp_path)])
    assert args.func(args) == 0
    out, err = capsys.readouterr()
    assert "tiny-llava-qwen: 4 steps in" in out and "(resumed at step 2)" in out
    # stderr is no terminal here, so progress comes as plain lines, from the resumed step on
    steps = re.findall(r"tiny-llava-qwen: step (\d+)/4, loss \d+\.\d{3}", err)
    assert steps == ["3", "4"]
    report = json.loads((tmp_path / "tiny-llava-qwen" / "pretrain_report.json").read_text())
    assert [part["step"] for part in report["resumed_at"]] == [2]
    assert not (tmp_path / ".tiny-llava-qwen.resume").exists()


def test_models_pretrain_names_a_missing_device(tmp_path, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    args = _parser().parse_args(["models", "pretrain", "--model", "tiny-llava-qwen",
                                 "--device", "cuda", "--cache-dir", str(tmp_path)])
    with pytest.raises(ValueError, match=r"0 CUDA device\(s\).*--device cpu"):
        args.func(args)
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_models_pretrain_refuses_real_backbones(tmp_path):
    args = _parser().parse_args(["models", "pretrain", "--model", "llava-1.5-7b",
                                 "--cache-dir", str(tmp_path)])
    with pytest.raises(UnknownNameError, match="not a tiny model"):
        args.func(args)


def test_models_pretrain_lookup_only_runs_stage_three_on_the_cached_weights(capsys, tmp_path):
    from drake.models.pretrain import pretrain, pretrain_vision

    pretrain_vision(out_dir=tmp_path, seed=0, steps=2, batch_size=2, pictures=4,
                    eval_pictures=4)
    pretrain("tiny-llava-qwen", out_dir=tmp_path, steps=2, batch_size=2, train_size=4,
             eval_size=0)
    argv = ["models", "pretrain", "--model", "tiny-llava-qwen", "--lookup-only",
            "--batch-size", "2", "--eval-size", "2", "--cache-dir", str(tmp_path)]
    args = _parser().parse_args([*argv, "--lookup-steps", "0"])
    with pytest.raises(ValueError, match="--lookup-only runs the look-up stage alone"):
        args.func(args)
    args = _parser().parse_args([*argv, "--lookup-steps", "2", "--model", "tiny-clip"])
    with pytest.raises(ValueError, match="--lookup-only trains .*, not tiny-clip"):
        args.func(args)
    args = _parser().parse_args([*argv, "--lookup-steps", "2", "--label-steps", "0"])
    assert args.func(args) == 0
    out, err = capsys.readouterr()
    assert "tiny-llava-qwen: 2 steps in" in out and "then the look-up stage: 2 steps in" in out
    assert "tiny-vision" not in out + err  # no stage 1, no stage 2
    assert re.findall(r"tiny-llava-qwen: step (\d+)/2", err) == ["1", "2"]  # stage 3 alone


def test_models_pretrain_label_only_runs_stage_four_on_the_cached_weights(capsys, tmp_path):
    from drake.models.lookup_pretrain import pretrain_lookup
    from drake.models.pretrain import pretrain, pretrain_vision

    pretrain_vision(out_dir=tmp_path, seed=0, steps=2, batch_size=2, pictures=4,
                    eval_pictures=4)
    pretrain("tiny-llava-qwen", out_dir=tmp_path, steps=2, batch_size=2, train_size=4,
             eval_size=0)
    pretrain_lookup("tiny-llava-qwen", out_dir=tmp_path, steps=2, batch_size=2, eval_size=0)
    argv = ["models", "pretrain", "--model", "tiny-llava-qwen", "--label-only",
            "--batch-size", "2", "--eval-size", "2", "--cache-dir", str(tmp_path)]
    for extra, match in ((["--label-steps", "0"], "--label-only runs the label stage alone"),
                         (["--label-steps", "2", "--lookup-only", "--lookup-steps", "2"],
                          "give one"),
                         (["--label-steps", "2", "--model", "tiny-clip"],
                          "--label-only trains .*, not tiny-clip")):
        args = _parser().parse_args([*argv, *extra])
        with pytest.raises(ValueError, match=match):
            args.func(args)
    args = _parser().parse_args([*argv, "--label-steps", "2", "--label-lr", "0.004",
                                 "--label-value-weight", "0.5"])
    assert args.func(args) == 0
    out, err = capsys.readouterr()
    assert "then the look-up stage: 2 steps in" in out  # the cached stage 3, reported
    assert "then the label stage: 2 steps in" in out
    assert re.findall(r"tiny-llava-qwen: step (\d+)/2", err) == ["1", "2"]  # stage 4 alone
    report = json.loads((tmp_path / "tiny-llava-qwen" / "pretrain_report.json").read_text())
    assert report["label_stage"]["steps"] == 2 and report["label_stage"]["label_head"] == [2, 0]
    assert report["label_stage"]["lr"] == 0.004 and report["label_stage"]["value_weight"] == 0.5


def test_models_pretrain_names_the_shipped_folder_a_named_cache_can_start_from(tmp_path):
    from drake.models.errors import ModelNotPretrained
    from drake.models.shipped import shipped_folder

    argv = ["models", "pretrain", "--model", "tiny-llava-qwen", "--cache-dir", str(tmp_path)]
    args = _parser().parse_args([*argv, "--relation-only", "--relation-steps", "2"])
    with pytest.raises(ModelNotPretrained) as refused:  # the shipped weights are past stage 3
        args.func(args)
    message = str(refused.value)
    assert "no stage-3 weights in" in message
    assert f"copy the shipped folder {shipped_folder('tiny-llava-qwen')}" in message
    for extra, before in ((["--label-only"], "stage-3"),  # the shipped weights are stage-4 ones
                          (["--lookup-only", "--lookup-steps", "2"], "stage-2")):
        args = _parser().parse_args([*argv, *extra])
        with pytest.raises(ModelNotPretrained) as refused:  # ... so these cannot start from them
            args.func(args)
        assert f"no {before} weights in" in str(refused.value)
        assert "shipped" not in str(refused.value)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))  # refused before writing
