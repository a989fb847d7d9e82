"""`drake quickstart` end to end at a micro budget (tiny drake-synth, a few pretraining steps),
and on the shipped weights."""

import json

from drake.quickstart import quickstart


def test_quickstart_builds_pretrains_runs_and_caches(tmp_path):
    said = []
    kw = dict(methods=("sft", "fedavg"), size="tiny", rounds=2, eval_per_task=2,
              compute_budget=2, say=said.append,
              pretrain={"steps": 4, "batch_size": 2, "train_size": 16, "eval_size": 4,
                        "vision_steps": 4, "vision_batch_size": 2, "vision_pictures": 8,
                        "vision_eval_pictures": 8})
    results = quickstart(tmp_path, **kw)
    assert [r["method"]["name"] for r in results] == ["sft", "fedavg"]
    assert all(r["scoring"]["mc_scoring"] == "loglik" for r in results)
    assert (tmp_path / "data" / "drake-synth" / "manifest.json").exists()
    for name in ("tiny-llava-llama", "tiny-llava-qwen"):
        assert json.loads((tmp_path / "models" / name / "pretrain_report.json").read_text())[
            "steps"] == 4
    lines = (tmp_path / "runs" / "sft" / "metrics.jsonl").read_text().splitlines()
    points = [json.loads(x) for x in lines]
    assert points[0]["initial"] is True
    assert [p["round"] for p in points] == [0, 2]  # before training, then every 2 rounds
    # a second call reuses the data and the models
    said.clear()
    quickstart(tmp_path, **{**kw, "methods": ("sft",)})
    assert any("already built" in s for s in said) and sum(s.endswith(": cached") for s in said) == 2


def test_quickstart_runs_on_the_shipped_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty-cache"))
    said = []
    results = quickstart(tmp_path, methods=("sft",), size="tiny", rounds=1, eval_per_task=2,
                         compute_budget=1, say=said.append)
    assert results[0]["method"]["name"] == "sft"
    assert any("shipped" in s for s in said) and not (tmp_path / "models").exists()


def test_quickstart_command_prints_the_table_and_the_learnability_caveat(tmp_path, monkeypatch,
                                                                         capsys):
    import drake.quickstart
    from drake.cli import main

    fake = {"method": {"name": "sft"}, "cost": {"comm_bytes_up_per_round": [0, 0]},
            "metrics": {"self_a_last": 36.9, "self_a_auc": 35.0, "others_a_last": 29.8,
                        "others_a_auc": 30.3}}
    monkeypatch.setattr(drake.quickstart, "quickstart", lambda out, **kw: [fake])
    assert main(["quickstart", "--out", str(tmp_path), "--methods", "sft"]) == 0
    out = capsys.readouterr().out
    assert "36.9" in out and "29.8" in out
    assert "multiple-choice tasks gain 15 points or more over chance" in out
