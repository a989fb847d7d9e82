"""`drake quickstart` end to end at a micro budget (tiny drake-synth, a few pretraining steps),
and on the shipped weights."""

import json
import re

from drake.quickstart import QUICKSTART, quickstart


def test_quickstart_builds_pretrains_runs_and_caches(tmp_path):
    said = []
    kw = dict(methods=("sft", "fedavg"), size="tiny", rounds=2, eval_per_task=1,
              compute_budget=2, say=said.append,
              pretrain={"steps": 4, "batch_size": 2, "train_size": 16, "eval_size": 4,
                        "vision_steps": 4, "vision_batch_size": 2, "vision_pictures": 8,
                        "vision_eval_pictures": 8, "lookup_steps": 2, "label_steps": 2})
    results = quickstart(tmp_path, **kw)
    assert [r["method"]["name"] for r in results] == ["sft", "fedavg"]
    for name in ("tiny-vision", "tiny-llava-llama", "tiny-llava-qwen"):  # pretraining talks
        total = 4 if name == "tiny-vision" else 8  # stage 2, then 2 steps of stages 3 and 4
        assert any(s.startswith(f"      {name}: step {total}/{total}, loss ") for s in said), said
    assert all(r["scoring"]["mc_scoring"] == "loglik" for r in results)
    assert (tmp_path / "data" / "drake-synth" / "manifest.json").exists()
    for name in ("tiny-llava-llama", "tiny-llava-qwen"):
        report = json.loads((tmp_path / "models" / name / "pretrain_report.json").read_text())
        assert report["steps"] == 4 and report["lookup_stage"]["steps"] == 2
        assert report["label_stage"]["steps"] == 2
    lines = (tmp_path / "runs" / "sft" / "metrics.jsonl").read_text().splitlines()
    points = [json.loads(x) for x in lines]
    assert points[0]["initial"] is True
    assert [p["round"] for p in points] == [0, 2]  # before training, then every 2 rounds
    # a second call reuses the data and the models (no runs: they would only resume)
    said.clear()
    assert quickstart(tmp_path, **{**kw, "methods": ()}) == []
    assert any("already built" in s for s in said) and sum(s.endswith(": cached") for s in said) == 2


def test_quickstart_runs_on_the_shipped_weights_and_says_what_it_does(tmp_path, monkeypatch):
    """Shipped weights, no model folder; the README says the quickstart verifies the build, and
    minutes of runs show their clients and rounds as they go, and each method's time."""
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty-cache"))
    said = []
    results = quickstart(tmp_path, methods=("sft",), size="tiny", rounds=2, eval_per_task=1,
                         eval_every=1, compute_budget=1, say=said.append, every=0)
    assert results[0]["method"]["name"] == "sft"
    assert any("shipped" in s for s in said) and not (tmp_path / "models").exists()
    manifest = json.loads((tmp_path / "data" / "drake-synth" / "manifest.json").read_text())
    verified = [s for s in said if "verified: " in s]
    assert len(verified) == 1 and f"{manifest['total_rows']} samples" in verified[0]
    assert any(re.fullmatch(r"      building: \d+/\d+ shards \(\d+ s\)", s) for s in said)
    assert any(s.startswith("      sft before training: scoring, 10/10") for s in said)
    assert any(s.startswith("      sft round 1/2: training, 10/10") for s in said)
    assert any(s.startswith("      sft round 2/2: scoring, 10/10") for s in said)
    rounds = [s for s in said if s.startswith("      sft round ") and "done in" in s]
    assert [s.split(" done in")[0].strip() for s in rounds] == ["sft round 1/2", "sft round 2/2"]
    assert all("elapsed" in s and "Self " in s for s in rounds)
    assert sum(bool(re.fullmatch(r"      sft took \d+ (s|min \d\d s)", s)) for s in said) == 1
    # and writes the report of its runs
    assert said[-1].startswith(f"report: {tmp_path / 'report' / 'index.html'} (plots")
    assert (tmp_path / "report" / "table.md").is_file()
    # a second call checks the build again and says so
    said.clear()
    assert quickstart(tmp_path, methods=(), size="tiny", say=said.append) == []
    assert "already built" in said[0] and "verified: " in said[0]


def test_quickstart_command_prints_the_table_and_the_learnability_caveat(tmp_path, monkeypatch,
                                                                         capsys):
    import drake.quickstart
    from drake.cli import main

    fake = {"method": {"name": "sft", "hyperparameters": {
                "eval_per_task": QUICKSTART.eval_per_task, "rounds": QUICKSTART.rounds,
                "compute_budget": QUICKSTART.compute_budget, "local_steps": 12}},
            "scoring": {"mc_scoring": QUICKSTART.mc_scoring},
            "cost": {"comm_bytes_up_per_round": [0, 0]},
            "metrics": {"self_a_last": 36.9, "self_a_auc": 35.0, "others_a_last": 29.8,
                        "others_a_auc": 30.3}}
    monkeypatch.setattr(drake.quickstart, "quickstart", lambda out, **kw: [fake])
    assert main(["quickstart", "--out", str(tmp_path), "--methods", "sft"]) == 0
    out = capsys.readouterr().out
    assert "36.9" in out and "29.8" in out
    assert "multiple-choice tasks gain 15 points or more over chance" in out
    assert (f"MC scored by {QUICKSTART.mc_scoring}, {QUICKSTART.eval_per_task} test samples/"
            f"task, budget {QUICKSTART.compute_budget} steps/round, {QUICKSTART.rounds} rounds"
            in " ".join(out.split()))


def test_quickstart_prints_a_drake_eval_command_with_its_own_settings(tmp_path, monkeypatch,
                                                                       capsys):
    import drake.quickstart
    from drake.cli import main, make_parser

    fake = {"method": {"name": "sft", "hyperparameters": {"eval_per_task": 8, "rounds": 4,
                                                          "compute_budget": 12}},
            "scoring": {"mc_scoring": "loglik"}, "cost": {"comm_bytes_up_per_round": [0]},
            "metrics": dict.fromkeys(("self_a_last", "self_a_auc", "others_a_last",
                                      "others_a_auc"), 0.0)}
    monkeypatch.setattr(drake.quickstart, "quickstart", lambda out, **kw: [fake])
    assert main(["quickstart", "--out", str(tmp_path)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "drake eval" in x]
    args = make_parser().parse_args(line.split("drake ", 1)[1].split())
    assert args.data == str(tmp_path / "data" / "drake-synth") and args.benchmark is None
    assert (args.scenario, args.rounds, args.compute_budget, args.eval_per_task,
            args.eval_every, args.mc_scoring) == (
        QUICKSTART.scenario, QUICKSTART.rounds, QUICKSTART.compute_budget,
        QUICKSTART.eval_per_task, QUICKSTART.eval_every, QUICKSTART.mc_scoring)
    assert args.model_cache is None and args.local_steps is None


def test_the_quickstart_settings_are_the_quickstart_command_defaults():
    from drake.cli import make_parser

    args = make_parser().parse_args(["quickstart"])
    assert (args.rounds, args.mc_scoring) == (QUICKSTART.rounds, QUICKSTART.mc_scoring)
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(quickstart).parameters.items()}
    assert (defaults["rounds"], defaults["compute_budget"], defaults["eval_per_task"],
            defaults["eval_every"], defaults["mc_scoring"]) == (
        QUICKSTART.rounds, QUICKSTART.compute_budget, QUICKSTART.eval_per_task,
        QUICKSTART.eval_every, QUICKSTART.mc_scoring)
