"""`drake eval` on tap-synth with TAP's multi-task model (the ``tap`` model kind): every task
scored by its own metric, each task a view of its own, and a clear error where the model has
no weights."""

from __future__ import annotations

import json

import pytest

from drake.build import build
from drake.cli import main
from drake.registry import get_benchmark


@pytest.fixture(scope="module")
def tap_synth(tmp_path_factory):
    return build(get_benchmark("tap-synth", size="tiny"), tmp_path_factory.mktemp("tap"), seed=0)


def test_disentafl_runs_every_tap_task_by_its_metric(tap_synth, tmp_path, capsys):
    out = tmp_path / "fedavg"
    # DisentAFL is TAP's FedAvg with its orthogonality term; the ViLT layout on TAP's ViLT
    argv = ["eval", "--method", "disentafl", "--data", str(tap_synth), "--scenario",
            "vilt-30", "--model", "tiny-tap-vilt", "--rounds", "1", "--local-steps", "1",
            "--eval-per-task", "2", "--untrained", "--hp", "post_steps=1", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["protocol"] == "generation"
    assert set(results["models_per_client"]) == {"tiny-tap-vilt"}
    # each task a view (results.json is the first task's), named as TAP's leaderboard rows:
    # <backbone>-<the dataset the twin stands for>
    views = {json.loads(p.read_text())["scenario"]["name"]: json.loads(p.read_text())
             for p in out.glob("results*.json")}
    metrics = {name: set(r["metrics"]) for name, r in views.items()}
    # ViLT's six datasets: no image classification
    assert metrics == {"vilt-fmnist": {"mse"}, "vilt-caltech256": {"mse"},
                       "vilt-agnews": {"accuracy"}, "vilt-mmlu": {"bertscore_f1", "meteor"},
                       "vilt-vqa": {"bertscore_f1", "meteor"},
                       "vilt-commongen": {"bertscore_f1", "meteor"}}
    assert 0 < views["vilt-fmnist"]["metrics"]["mse"] < 1
    for path in out.glob("results*.json"):
        assert main(["leaderboard", "validate", str(path), "--data", str(tap_synth)]) == 0, \
            capsys.readouterr().err


def test_a_method_without_the_tap_kind_is_refused_by_name(tap_synth, tmp_path, capsys):
    argv = ["eval", "--method", "fedmosaic", "--data", str(tap_synth), "--scenario", "flava-30",
            "--rounds", "1", "--untrained", "--out", str(tmp_path / "x")]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "fedmosaic runs on" in err and "tiny-tap is a tap model" in err


def test_a_model_cache_without_the_weights_names_the_fix(tap_synth, tmp_path, capsys):
    argv = ["eval", "--method", "sft", "--data", str(tap_synth), "--scenario", "flava-30",
            "--rounds", "1", "--model-cache", str(tmp_path / "empty"), "--out",
            str(tmp_path / "y")]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "holds no pretrained tiny-tap" in err and "leave out --model-cache" in err
    assert "drake models pretrain" in err and "--untrained" in err
