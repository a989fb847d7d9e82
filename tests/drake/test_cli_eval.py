"""`drake eval`, `info` and `verify` as a new user meets them: folders that are not the build,
a model cache without the models, progress when the output is not a terminal, which settings
ran, and what the counts count."""

import json

import pytest

from drake.build import build
from drake.cli import main
from drake.registry import get_benchmark


@pytest.fixture(scope="module")
def qs(tmp_path_factory):
    """The quickstart's layout: OUT/data/drake-synth (a tiny build)."""
    out = tmp_path_factory.mktemp("qs") / "drake-quickstart"
    build(get_benchmark("drake-synth", size="tiny"), out / "data", seed=0)
    return out


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("drake: error: ") and "Traceback" not in err
    return err


def test_eval_on_the_quickstart_folder_names_the_build_inside_it(qs, capsys):
    build_dir = qs / "data" / "drake-synth"
    for wrong in ([qs], [qs, "--benchmark", "drake-synth"], [qs / "data"]):
        assert main(["eval", "--method", "fedavg", "--data", *map(str, wrong)]) == 2
        err = one_line_error(capsys)
        assert f"--data {build_dir}`" in err and "drake build" not in err


def test_eval_with_benchmark_inside_the_build_names_the_build_not_a_nested_one(qs, capsys):
    build_dir = qs / "data" / "drake-synth"
    assert main(["eval", "--method", "fedavg", "--data", str(build_dir),
                 "--benchmark", "drake-synth"]) == 2
    err = one_line_error(capsys)
    assert f"--data {build_dir}`" in err and "drake build" not in err


def test_eval_with_no_build_nearby_advises_a_build_beside_never_inside_one(qs, tmp_path,
                                                                          capsys):
    assert main(["eval", "--method", "fedavg", "--data", str(tmp_path / "none"),
                 "--benchmark", "hflb"]) == 2
    assert f"--out {tmp_path / 'none'}`" in one_line_error(capsys)
    build_dir = qs / "data" / "drake-synth"
    assert main(["eval", "--method", "fedavg", "--data", str(build_dir),
                 "--benchmark", "hflb"]) == 2
    err = one_line_error(capsys)
    assert f"drake build --benchmark hflb --out {qs / 'data'}`" in err
    assert f"--data {qs / 'data' / 'hflb'}`" in err


@pytest.mark.parametrize("command", ["info", "verify"])
def test_info_and_verify_name_the_build_one_level_down_or_up(qs, capsys, command):
    build_dir = qs / "data" / "drake-synth"
    for wrong in (qs / "data", qs, build_dir / "tasks"):
        assert main([command, str(wrong)]) == 2
        err = one_line_error(capsys)
        assert f"run `drake {command} {build_dir}`" in err
    assert main([command, str(build_dir)]) == 0  # the named folder works


def test_info_and_verify_say_what_their_counts_count(qs, capsys):
    build_dir = qs / "data" / "drake-synth"
    manifest = json.loads((build_dir / "manifest.json").read_text())
    samples = manifest["total_rows"]
    train = sum(s["train"]["rows"] for s in manifest["tasks"].values() if "train" in s)
    test = sum(s["test"]["rows"] for s in manifest["tasks"].values() if "test" in s)
    part_rows = sum(p["rows"] for p in manifest["partitions"].values())
    assert samples == train + test and part_rows > 0
    label = f"{samples} samples ({train} train, {test} test)"
    assert main(["info", str(build_dir)]) == 0
    assert label in " ".join(capsys.readouterr().out.split())
    assert main(["verify", str(build_dir)]) == 0
    out = capsys.readouterr().out
    assert label in out and f"and {part_rows} rows in 2 scenario partition files" in out


def test_a_model_cache_without_the_models_names_every_model_and_the_cli_flags(qs, tmp_path,
                                                                              capsys):
    run = tmp_path / "run"
    assert main(["eval", "--method", "fedavg", "--data", str(qs / "data" / "drake-synth"),
                 "--model-cache", str(tmp_path / "models"), "--out", str(run)]) == 2
    err = one_line_error(capsys)
    assert "tiny-llava-llama, tiny-llava-qwen" in err
    assert "leave out --model-cache to use the weights shipped with drake" in err
    assert "--untrained" in err and "pretrained=False" not in err
    assert "drake models pretrain --model" not in err  # no two-hour advice: weights ship
    assert not run.exists()  # failed before writing anything


def test_eval_piped_prints_round_lines_and_the_table_names_the_settings(qs, tmp_path, capsys):
    """Under pytest stderr is not a terminal, as in `drake eval ... | tee log`."""
    assert main(["eval", "--method", "fedavg", "--data", str(qs / "data"), "--benchmark",
                 "drake-synth", "--rounds", "2", "--local-steps", "1", "--batch-size", "2",
                 "--eval-per-task", "2", "--mc-scoring", "loglik", "--untrained",
                 "--out", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    rounds = [x for x in captured.err.splitlines() if " done in " in x]
    assert [x.split(" done in ")[0] for x in rounds] == ["fedavg round 1/2", "fedavg round 2/2"]
    assert "elapsed" in rounds[-1] and "Self " in rounds[-1]
    title = " ".join(captured.out.split())
    assert "MC scored by loglik, 2 test samples/task, 1 local steps/round, 2 rounds" in title
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["scoring"]["mc_scoring"] == "loglik"
    assert results["method"]["hyperparameters"]["eval_per_task"] == 2


def test_paper_preset_sets_the_protocol_prints_its_departures_and_is_recorded(qs, tmp_path,
                                                                              capsys):
    # FedMosaic's protocol on the twin, with the slow settings overridden explicitly (the
    # preset's own 512-token answers are checked in test_presets.py)
    assert main(["eval", "--method", "sft", "--data", str(qs / "data" / "drake-synth"),
                 "--preset", "paper", "--rounds", "1", "--local-steps", "1",
                 "--eval-per-task", "2", "--max-new-tokens", "8", "--mc-scoring", "loglik",
                 "--untrained", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    head = next(line for line in err.splitlines() if line.startswith("preset paper"))
    assert "FedMosaic" in head and "lr 2e-05" in head and "batch_size 4" in head
    assert "eval_per_task 2" in head and "max_new_tokens 8" in head  # given values win
    assert "departs from the paper: batch 1 x gradient accumulation 4" in err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["preset"] == "paper" and config["lr"] == 2e-5
    assert config["eval_every"] == 5 and config["eval_per_task"] == 2
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    hp = res["method"]["hyperparameters"]
    assert hp["preset"] == "paper" and hp["lr"] == 2e-5 and hp["max_new_tokens"] == 8
    assert hp["eval_every"] == 5
    # the unseen tasks are scored at the end, by every client (2 test samples each here)
    assert config["eval_unseen"] is True and len(res["unseen"]) == 10
    assert all(len(u) == 7 for u in res["unseen"]) and 0 <= res["metrics"]["unseen_a_last"] <= 100


def test_cpu_preset_is_the_default_and_all_scores_every_test_sample(qs, tmp_path, capsys):
    assert main(["eval", "--method", "sft", "--data", str(qs / "data" / "drake-synth"),
                 "--rounds", "1", "--local-steps", "1", "--eval-per-task", "all",
                 "--mc-scoring", "loglik", "--untrained", "--out", str(tmp_path / "run")]) == 0
    assert "preset" not in capsys.readouterr().err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["preset"] == "cpu" and config["eval_per_task"] is None
    assert (config["lr"], config["batch_size"], config["compute_budget"]) == (2e-3, 4, 20)


def test_a_benchmark_without_a_paper_preset_is_an_error_that_names_the_way_round(qs, tmp_path,
                                                                                 capsys,
                                                                                 monkeypatch):
    monkeypatch.setattr("drake.cli._built_benchmark", lambda root: "my-bench")
    assert main(["eval", "--method", "sft", "--data", str(qs / "data" / "drake-synth"),
                 "--preset", "paper", "--out", str(tmp_path / "run")]) == 2
    err = one_line_error(capsys)
    assert "'my-bench' has no paper preset yet" in err and "--preset cpu" in err
    assert not (tmp_path / "run").exists()
    with pytest.raises(SystemExit) as exc:  # argparse
        main(["eval", "--method", "sft", "--data", str(qs / "data" / "drake-synth"),
              "--eval-per-task", "some"])
    assert exc.value.code == 2
    assert "expected a count or 'all', got 'some'" in capsys.readouterr().err
