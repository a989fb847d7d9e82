"""`drake quickstart` end to end at a micro budget (tiny drake-synth, a few pretraining steps)."""

import json

from drake.quickstart import quickstart


def test_quickstart_builds_pretrains_runs_and_caches(tmp_path):
    said = []
    kw = dict(methods=("sft", "fedavg"), size="tiny", rounds=2, eval_per_task=2,
              compute_budget=2, pretrain_steps=4, say=said.append)
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
