"""The measured learnability table (drake/synth/calibration.json) describes the shipped data."""

import dataclasses
import json

from drake.card import CALIBRATION_FILE, calibration_table
from drake.registry import get_benchmark
from drake.synth.catalog import SYNTH_TASKS
from drake.synth.knobs import DEFAULT_KNOBS


def _record():
    return json.loads(CALIBRATION_FILE.read_text())


def test_every_client_task_is_measured_and_only_those():
    synth = get_benchmark("drake-synth")
    client_tasks = {t for c in synth.clients for t in c.tasks}
    measured = set(_record()["tasks"])
    open_ended = {t for t in client_tasks if SYNTH_TASKS[t].answer_type == "open_ended"}
    assert open_ended, "expected the open-ended iconqa twins among the client tasks"
    assert measured == client_tasks
    for task in open_ended:  # measured by their own metric, with no chance level
        row = _record()["tasks"][task]
        assert row["chance"] is None and row["metric"] == "token_f1"
        assert len(row["exact"]) == len(row["curve"])


def test_recorded_knobs_are_the_shipped_defaults():
    """Changing a knob without re-measuring makes the card's table describe other data."""
    stale = {task: row["knobs"] for task, row in _record()["tasks"].items()
             if row["knobs"] != json.loads(json.dumps(dataclasses.asdict(DEFAULT_KNOBS[task])))}
    assert not stale, (
        f"drake/synth/calibration.json was measured at other knobs for {sorted(stale)}; re-run "
        "`python benchmarks/learnability.py --json drake/synth/calibration.json`")


def test_curves_match_the_recorded_schedule():
    record = _record()
    points = record["settings"]["steps"] // record["settings"]["every"] + 1
    for task, row in record["tasks"].items():
        assert len(row["curve"]) == points, task
        assert row["chance"] is None or 0 < row["chance"] < 100, task
        assert all(0 <= a <= 100 for a in row["curve"] + row.get("exact", [])), task


def test_card_table_reports_gain_over_chance(tmp_path):
    path = tmp_path / "calibration.json"
    knobs = json.loads(json.dumps(dataclasses.asdict(DEFAULT_KNOBS["synth-spatial"])))
    path.write_text(json.dumps({
        "settings": {"model": "m", "lr": 0.002, "batch_size": 8, "train_size": 10, "test": 4,
                     "steps": 20, "every": 10},
        "tasks": {"synth-spatial": {"chance": 50.0, "curve": [50.0, 60.0, 75.0],
                                    "knobs": knobs},
                  "synth-count-open": {"chance": None, "metric": "token_f1",
                                       "curve": [10.0, 20.0, 42.5], "exact": [5.0, 15.0, 40.0],
                                       "knobs": knobs}}}))
    table = calibration_table(get_benchmark("drake-synth"), path)
    assert "| 1 | synth-spatial | 50.0 | 50.0 | 60.0 | 75.0 | +25.0 |" in table
    assert "| 6 | synth-count-open | token F1 | 10.0 | 20.0 | 42.5 | +32.5 (exact match 5.0 -> " \
        "40.0) |" in table
    assert "| 8 | synth-count-arith | not measured |" in table
    assert "1 of 1 multiple-choice tasks gain 15 points or more over chance (1 gain 10 or " \
        "more, 0 end above 95%)" in table


def test_summary_counts_the_recorded_gains(tmp_path):
    from drake.card import calibration_summary

    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"settings": {}, "tasks": {
        "a": {"chance": 50.0, "curve": [50.0, 80.0]},
        "b": {"chance": 25.0, "curve": [25.0, 24.0]},
        "c": {"chance": 50.0, "curve": [50.0, 62.0]},
        "d": {"chance": 50.0, "curve": [50.0, 97.0]},
        "e": {"chance": None, "curve": [0.0, 90.0], "exact": [0.0, 90.0]}}}))
    text = calibration_summary(path)
    assert "2 of 4 multiple-choice tasks gain 15 points or more over chance (3 gain 10 or more, " \
        "1 end above 95%)" in text
    assert "the mean gain is +22.0 points" in text
