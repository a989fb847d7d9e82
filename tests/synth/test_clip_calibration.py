"""synth-cls on tiny-clip (drake/synth/clip_calibration.json, the card's table): every CLIP
method measured under both scenarios at the learning rates the methods now have."""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path

from baselines import get_method, method_names
from drake.card import CLIP_CALIBRATION_FILE, clip_calibration_table

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCENARIOS = {"base2novel": {"local", "base", "novel", "hm"}, "by-domain": {"accuracy"}}


def _record():
    return json.loads(CLIP_CALIBRATION_FILE.read_text())


def test_every_clip_method_and_scenario_is_measured_on_every_seed():
    record = _record()
    clip = {m for m in method_names() if get_method(m).__module__.startswith("baselines.")
            and get_method(m).kinds == ("clip",)} - {"promptfl-fedprox"}  # a PromptFL variant
    # base-to-novel always; the per-domain table where it has been measured
    assert "base2novel" in record["scenarios"] and set(record["scenarios"]) <= set(SCENARIOS)
    for scenario, rows in record["scenarios"].items():
        assert set(rows) == clip, scenario
        for method, runs in rows.items():
            assert len(runs) == len(record["settings"]["seeds"]) >= 3, (scenario, method)
            assert all(SCENARIOS[scenario] <= set(r) for r in runs)
            assert all(0 <= v <= 100 for r in runs for k, v in r.items() if k != "wall_s")


def _script():
    spec = importlib.util.spec_from_file_location("clip_synth", BENCHMARKS / "clip_synth.py")
    script = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCHMARKS))  # as when run: its sibling modules import by name
    try:
        spec.loader.exec_module(script)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return script


def test_recorded_learning_rates_are_the_scripts():
    """A changed learning rate leaves the table describing other runs."""
    script = _script()
    settings = _record()["settings"]
    for method, lr in settings["lrs"].items():
        own = inspect.signature(get_method(method).__init__).parameters["lr"].default
        want = (own or 1e-3) if settings["paper_lrs"] else script.CPU_LRS[method]
        assert lr == want, (f"{method}: measured at lr {lr}; re-run `python "
                            f"benchmarks/clip_synth.py --json drake/synth/clip_calibration.json`")


def test_the_recorded_rates_are_the_validation_builds_best():
    """Each trained method's rate is the best base-to-novel HM its validation runs recorded
    (ties: the smaller rate), on a build of another seed than the table's."""
    settings = _record()["settings"]
    choice = settings["lr_choice"]
    assert choice["validation"]["seed"] != settings["data"]["seed"]
    assert set(choice["hm_by_lr"]) == set(settings["lrs"]) - {"clip-zeroshot"}
    for method, by_lr in choice["hm_by_lr"].items():
        best = max(by_lr, key=lambda lr: (by_lr[lr], -float(lr)))
        assert float(best) == settings["lrs"][method], method


def test_validate_keeps_each_methods_best_rate_and_the_smaller_on_a_tie():
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    script = _script()
    hm = {("promptfl", 0.001): 50.0, ("promptfl", 0.003): 60.0, ("promptfl", 0.009): 55.0,
          ("fedotp", 0.01): 70.0, ("fedotp", 0.03): 70.0, ("fedotp", 0.09): 10.0}
    seen = []

    def fake_run(args, method, scenario, seed, lr=None):
        seen.append((method, scenario, seed))
        return {"hm": hm[method, round(lr, 6)]}

    script.run = fake_run
    args = SimpleNamespace(methods=["clip-zeroshot", "promptfl", "fedotp"], lr_grid=[1 / 3, 1, 3],
                           lrs={"clip-zeroshot": 1e-3, "promptfl": 0.003, "fedotp": 0.03})
    with ThreadPoolExecutor(2) as pool:
        tried = script.choose_lrs(args, pool)
    assert args.lrs == {"clip-zeroshot": 1e-3, "promptfl": 0.003, "fedotp": 0.01}
    assert tried["promptfl"] == {"0.001": 50.0, "0.003": 60.0, "0.009": 55.0}
    # the zero-shot model is never validated; every run is base-to-novel, seed 0
    assert {m for m, _, _ in seen} == {"promptfl", "fedotp"}
    assert {(sc, s) for _, sc, s in seen} == {("base2novel", 0)}


def test_recorded_weights_are_the_shipped_ones():
    from drake.models.shipped import SHIPPED_SHA256

    assert _record()["settings"]["weights"]["weights_sha256"] == SHIPPED_SHA256["tiny-clip"]


def test_card_table_is_mean_std_over_seeds_and_moves_from_zero_shot(tmp_path):
    path = tmp_path / "c.json"
    settings = {"seeds": [0, 1], "rounds": 2, "local_steps": 3, "batch_size": 4,
                "eval_per_task": 5, "paper_lrs": False, "ctx_init": "a photo of a",
                "lrs": {"fedotp": 0.02},
                "data": {"benchmark": "synth-cls", "seed": 0, "rows": {"train": 10, "test": 4},
                         "classes": 200},
                "weights": {"weights_sha256": "ab" * 32, "objective": "captions",
                            "held_out_accuracy": 45.0, "torch": "2.x", "transformers": "5.x",
                            "machine": "x86_64, 2 CPUs"}}
    runs = {"clip-zeroshot": [{"accuracy": 40.0, "acc_a": 40.0}] * 2,
            "fedotp": [{"accuracy": 50.0, "acc_a": 44.0}, {"accuracy": 60.0, "acc_a": 46.0}]}
    path.write_text(json.dumps({"settings": settings, "scenarios": {"by-domain": runs}}))
    table = clip_calibration_table(path)
    assert "| fedotp | 55.0 ± 5.0 | 45.0 ± 1.0 |" in table
    assert "pretrained on the captions objective, sha256 abababababab" in table
    assert "chosen for this budget on a validation build of another seed (fedotp 0.02)" in table
    assert "Chance is 0.5% per scored set; zero-shot CLIP scores 40.0 (accuracy). Trained " \
        "methods' accuracy minus zero-shot's: fedotp +15.0. 0 of 1 trained methods stay " \
        "within 1 point of zero-shot and 1 gain 5 or more: at this budget synth-cls separates " \
        "the methods from zero-shot CLIP." in table
