"""`drake report`: seed statistics against values computed here, every promised plot a real
image, the grouping errors, the missing-extra message, and the page in headless Chromium.

The run folders are written by the tests (results.json and metrics.jsonl, valid against
:class:`leaderboard.run_result.RunResult`): a micro drake-synth Self/Others federation of
4 clients with 2 tasks each, evaluated at rounds 1-3, 3 seeds of 2 methods; and small runs of
the other protocols (base/novel, per-domain classification, generation over missing rates).
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.stats import t as student_t

from drake.cli import main
from leaderboard.run_result import RunResult

MANIFEST = hashlib.sha256(b"micro drake-synth manifest").hexdigest()
MODELS = ["tiny-llava-llama", "tiny-llava-qwen", "tiny-llava-qwen", "tiny-llava-llama"]
TASKS = [[f"synth-t{2 * c}", f"synth-t{2 * c + 1}"] for c in range(len(MODELS))]
ROUNDS = [1, 2, 3]
SELF_OTHERS = ("self_a_last", "self_a_auc", "others_a_last", "others_a_auc")
HOSTILE = '<script>document.title="pwned"</script>'


def run_doc(seed: int, method: str, level: float, *, protocol: str = "self_others",
            benchmark: str = "drake-synth", scenario: str = "dynamic-hetero",
            partition: dict | None = None, hparams: dict | None = None,
            manifest: str = MANIFEST) -> dict:
    """One seed's results.json: scores drawn around ``level`` from the seed's generator."""
    rng = np.random.default_rng([seed, len(method)])
    tasks = [t for own in TASKS for t in own]
    scores, self_curve, others_curve = [], [], []
    for p, _ in enumerate(ROUNDS):
        point = [{t: float(np.clip(rng.normal(level + 5 * p, 8), 0, 100)) for t in tasks}
                 for _ in MODELS]
        scores.append(point)
        self_curve.append(float(np.mean([point[c][t] for c, own in enumerate(TASKS)
                                         for t in own])))
        others_curve.append(float(np.mean([point[c][t] for c, own in enumerate(TASKS)
                                           for t in tasks if t not in own])))
    if protocol == "self_others":
        metrics = {"self_a_last": self_curve[-1], "self_a_auc": float(np.mean(self_curve)),
                   "others_a_last": others_curve[-1], "others_a_auc": float(np.mean(others_curve))}
    elif protocol == "base_novel":
        local, base, novel = (float(np.clip(rng.normal(level + d, 3), 1, 100)) for d in (9, 0, -6))
        metrics = {"local": local, "base": base, "novel": novel,
                   "hm": 3 / (1 / local + 1 / base + 1 / novel)}
    elif protocol == "classification":
        metrics = {f"acc_{d}": float(np.clip(rng.normal(level + i, 3), 0, 100))
                   for i, d in enumerate(("plain", "noise", "stripes"))}
        metrics["accuracy"] = float(np.mean(list(metrics.values())))
    else:
        metrics = {name: float(np.clip(rng.normal(level * k, 2), 0, 100))
                   for name, k in (("rougeLsum", 1.0), ("google_bleu", 0.5), ("meteor", 0.7))}
    if protocol != "self_others":  # curves.self follows the protocol's main number
        main_metric = {"base_novel": "hm", "classification": "accuracy"}.get(protocol,
                                                                              "rougeLsum")
        self_curve[-1] = metrics[main_metric]
    params = {"lr": 0.002, "local_steps": 1, "rounds": 3, "note": HOSTILE, **(hparams or {})}
    config = json.dumps({"method": method, **params, "scenario": scenario}, sort_keys=True)
    return {
        "schema_version": "1.0",
        "benchmark": {"name": benchmark, "version": "1.0", "manifest_sha256": manifest},
        "scenario": {"name": scenario, "order": "dynamic", "models": "hetero",
                     "partition": {"n_clients": len(MODELS), "rule": "by_task",
                                   **(partition or {})}},
        "method": {"name": method, "hyperparameters": params,
                   "config_sha256": hashlib.sha256(config.encode()).hexdigest()},
        "models_per_client": list(MODELS),
        "seed": seed,
        "protocol": protocol,
        "metrics": metrics,
        "curves": {"rounds": ROUNDS, "self": self_curve, "scores": scores,
                   **({"others": others_curve} if protocol == "self_others" else {})},
        "cost": {"comm_bytes_up_per_round": [1_000_000 * (2 + len(method))] * 3,
                 "comm_bytes_down_per_round": [2_000_000] * 3,
                 "wall_time_s": 10.0 + seed, "peak_rss_mb": 500.0 + 10 * seed},
        "scoring": {"mc_scoring": "loglik", "bertscore_model": None, "eval_tasks": "started"},
        "software": {"package_version": "0.1.0", "git_hash": None, "python": "3.11.7",
                     "torch": "2.13.0", "transformers": "4.46.0"},
        "created_at": "2026-01-01T00:00:00+00:00",
    }


def write_run(folder: Path, *docs: dict) -> Path:
    """A run folder as `drake eval` leaves it: results.json (then results-<view>.json for
    further views) and a metrics.jsonl line per evaluation point."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, doc in enumerate(docs):
        RunResult.model_validate(doc)
        name = "results.json" if i == 0 else f"results-view{i}.json"
        (folder / name).write_text(json.dumps(doc, indent=1))
    first = docs[0]["curves"]
    lines = [{"round": r, "self": first["self"][p], "others": (first.get("others") or [None])[-1],
              "metrics": docs[0]["metrics"],
              "scores": {str(c): s for c, s in enumerate(first["scores"][p])}}
             for p, r in enumerate(first["rounds"])]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


LEVELS = {"fedavg": 50.0, "ditto": 62.0}


@pytest.fixture(scope="module")
def micro(tmp_path_factory) -> tuple[list[Path], Path]:
    """3 seeds of 2 methods on the micro drake-synth, and `drake report` of them."""
    root = tmp_path_factory.mktemp("report")
    runs = [write_run(root / "runs" / f"{m}-s{s}", run_doc(s, m, level))
            for m, level in LEVELS.items() for s in range(3)]
    assert main(["report", *map(str, runs), "--out", str(root / "out")]) == 0
    return runs, root / "out"


def test_the_table_holds_each_metric_s_mean_std_and_t_interval_over_seeds(micro):
    runs, out = micro
    rows = list(csv.DictReader((out / "table.csv").open(encoding="utf-8")))
    assert {(r["method"], r["metric"]) for r in rows} == {(m, k) for m in LEVELS
                                                          for k in SELF_OTHERS}
    markdown = (out / "table.md").read_text(encoding="utf-8")
    assert MANIFEST in markdown
    for row in rows:
        values = np.array([json.loads((p / "results.json").read_text())["metrics"][row["metric"]]
                           for p in runs if p.name.startswith(row["method"] + "-")])
        mean, std = values.mean(), values.std(ddof=1)
        half = student_t.ppf(0.975, 2) * std / np.sqrt(3)
        assert (row["n_seeds"], row["seeds"], row["manifest_sha256"]) == ("3", "0 1 2", MANIFEST)
        assert float(row["mean"]) == pytest.approx(mean, abs=1e-9)
        assert float(row["std"]) == pytest.approx(std, abs=1e-9)
        assert float(row["ci95_low"]) == pytest.approx(mean - half, abs=1e-9)
        assert float(row["ci95_high"]) == pytest.approx(mean + half, abs=1e-9)
        assert f"{mean:.2f} ± {std:.2f} [{mean - half:.2f}, {mean + half:.2f}]" in markdown


def assert_real_image(png: Path) -> None:
    with Image.open(png) as image:
        image.load()
        rgb = image.convert("RGB")
        assert min(rgb.size) >= 100, (png, rgb.size)
        colours = rgb.getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 8, (png, colours)  # not blank, not two-tone


def assert_plots(out: Path, stems: set[str]) -> None:
    page = (out / "index.html").read_text(encoding="utf-8")
    assert {p.stem for p in (out / "plots").glob("*.png")} == stems
    for stem in stems:
        assert_real_image(out / "plots" / f"{stem}.png")
        root = ET.parse(out / "plots" / f"{stem}.svg").getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(list(root.iter("{http://www.w3.org/2000/svg}path"))) > 10
        assert f'src="plots/{stem}.png"' in page and f'href="plots/{stem}.svg"' in page


def test_every_promised_plot_is_a_real_image_and_on_the_page(micro):
    _, out = micro
    stem = "drake-synth-dynamic-hetero"
    assert_plots(out, {f"curves-{stem}", f"heatmap-{stem}-ditto", f"heatmap-{stem}-fedavg",
                       f"cost-{stem}"})


def test_the_other_protocols_get_their_bars_and_the_missing_rate_plot(tmp_path):
    runs = []
    for m, level in LEVELS.items():
        for s in range(2):
            runs.append(write_run(tmp_path / f"b2n-{m}-{s}", run_doc(
                s, m, level, protocol="base_novel", benchmark="synth-cls", scenario="base2novel")))
            runs.append(write_run(tmp_path / f"dom-{m}-{s}", run_doc(
                s, m, level, protocol="classification", benchmark="synth-cls",
                scenario="by-domain")))
            for rate in (0.0, 0.6):  # one run folder, two views: personalised and global
                views = [run_doc(s, m, level - 10 * rate, protocol="generation",
                                 benchmark="synth-caption",
                                 scenario=f"missing{rate}-{view}",
                                 partition={"missing_rate": rate}, hparams={"data": rate})
                         for view in ("personalized", "global")]
                runs.append(write_run(tmp_path / f"gen-{m}-{s}-{rate}", *views))
    out = tmp_path / "out"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    gen = ["synth-caption-missing0.0", "synth-caption-missing0.6"]
    stems = {"curves-synth-cls-base2novel", "base-novel-synth-cls-base2novel",
             "cost-synth-cls-base2novel", "curves-synth-cls-by-domain",
             "domains-synth-cls-by-domain", "cost-synth-cls-by-domain",
             "missing-rate-synth-caption"}
    stems |= {f"{kind}-{g}-{view}" for kind in ("curves", "generation") for g in gen
              for view in ("personalized", "global")}
    stems |= {f"cost-{g}-global" for g in gen}  # drawn once for a run's two views
    assert_plots(out, stems)
    rows = list(csv.DictReader((out / "table.csv").open(encoding="utf-8")))
    assert len({(r["benchmark"], r["scenario"]) for r in rows}) == 6
    assert {r["metric"] for r in rows if r["scenario"] == "by-domain"} == {
        "accuracy", "acc_plain", "acc_noise", "acc_stripes"}


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("drake: error: ") and "Traceback" not in err
    return err


def test_runs_that_are_not_seeds_of_one_experiment_are_refused_by_name(tmp_path, capsys):
    base = write_run(tmp_path / "fedavg-s0", run_doc(0, "fedavg", 50))
    out = str(tmp_path / "out")
    other_build = write_run(tmp_path / "fedavg-s1", run_doc(1, "fedavg", 50,
                                                            manifest="f" * 64))
    assert main(["report", str(base), str(other_build), "--out", out]) == 2
    err = one_line_error(capsys)
    assert str(base) in err and str(other_build) in err and "benchmark.manifest_sha256" in err
    edited = run_doc(2, "fedavg", 50)
    edited["method"]["hyperparameters"]["lr"] = 0.1  # same config hash, other lr
    edited_run = write_run(tmp_path / "fedavg-s2", edited)
    assert main(["report", str(base), str(edited_run), "--out", out]) == 2
    err = one_line_error(capsys)
    assert str(edited_run) in err and "method.hyperparameters (lr: 0.002 vs 0.1)" in err
    twice = write_run(tmp_path / "fedavg-again", run_doc(0, "fedavg", 50))
    assert main(["report", str(base), str(twice), "--out", out]) == 2
    assert "both seed 0 of fedavg" in one_line_error(capsys)
    ditto = write_run(tmp_path / "ditto-s0", run_doc(0, "ditto", 60, manifest="e" * 64))
    assert main(["report", str(base), str(ditto), "--out", out]) == 2
    err = one_line_error(capsys)
    assert str(ditto) in err and "benchmark.manifest_sha256" in err and "same build" in err
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_unreadable_or_empty_run_folders_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "holds no results.json" in one_line_error(capsys)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text('{"schema_version": "1.0"}')
    assert main(["report", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "not a valid results file" in one_line_error(capsys)


def test_without_matplotlib_the_error_names_the_extra(tmp_path, capsys, monkeypatch):
    run = write_run(tmp_path / "fedavg-s0", run_doc(0, "fedavg", 50))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 2
    assert "pip install 'drake-pfl[report]'" in one_line_error(capsys)


@pytest.mark.browser
def test_the_report_page_in_headless_chromium(micro, chromium, tmp_path):
    _, out = micro
    shot = chromium.screenshot(out / "index.html", tmp_path / "report.png", size=(1280, 1400))
    assert_real_image(shot)
    with Image.open(shot) as image:  # the plots loaded: the curve colours are on screen
        colours = {c for _, c in image.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert {(31, 119, 180), (255, 127, 14)} <= colours  # tab10 blue and orange
    dom = chromium.dump_dom(out / "index.html")
    assert "<title>drake report</title>" in dom
    assert "pwned" not in dom.split("<body", 1)[0]  # the hyper-parameter ran no script
    assert dom.count("<script") == 0
    assert "note=&lt;script&gt;document.title=\"pwned\"&lt;/script&gt;" in dom


def test_report_of_real_runs_three_seeds_of_two_methods_on_a_micro_drake_synth(tmp_path):
    """The whole path: a micro drake-synth build (the first task of clients 0-3, both model
    families: `drake build --tasks`), `drake eval` of sft and fedavg with seeds 0-2 (one
    round, one step, one test sample per task, untrained tiny models), then `drake report`:
    each method's Self A_last row is the mean, std and t-interval of its three runs, and the
    curves, heatmaps and cost plots are real images."""
    from drake.build import build, restrict_spec
    from drake.registry import get_benchmark

    spec = get_benchmark("drake-synth", size="tiny")
    micro = restrict_spec(spec, [client.tasks[0] for client in spec.clients[:4]])
    assert len(set(micro.model_mixes["hetero"])) == 2
    build(micro, tmp_path / "data", seed=0)
    runs = []
    for method in ("sft", "fedavg"):
        for seed in range(3):
            out = tmp_path / "runs" / f"{method}-{seed}"
            assert main(["eval", "--method", method, "--data", str(tmp_path / "data"),
                         "--benchmark", "drake-synth", "--scenario", "static", "--rounds", "1",
                         "--local-steps", "1", "--eval-per-task", "1", "--mc-scoring",
                         "loglik", "--untrained", "--seed", str(seed), "--out",
                         str(out)]) == 0
            runs.append(out)
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "report")]) == 0
    rows = {(r["method"], r["metric"]): r for r in csv.DictReader(
        (tmp_path / "report" / "table.csv").open(encoding="utf-8"))}
    for method in ("sft", "fedavg"):
        values = np.array([json.loads((p / "results.json").read_text())["metrics"]["self_a_last"]
                           for p in runs if p.name.startswith(method + "-")])
        row = rows[(method, "self_a_last")]
        half = student_t.ppf(0.975, 2) * values.std(ddof=1) / np.sqrt(3)
        assert (row["n_seeds"], row["seeds"]) == ("3", "0 1 2")
        assert float(row["mean"]) == pytest.approx(values.mean(), abs=1e-9)
        assert float(row["ci95_high"]) == pytest.approx(values.mean() + half, abs=1e-9)
    stems = {p.stem for p in (tmp_path / "report" / "plots").glob("*.png")}
    assert {s.split("-")[0] for s in stems} >= {"curves", "heatmap", "cost"}
    for stem in stems:
        assert_real_image(tmp_path / "report" / "plots" / f"{stem}.png")
