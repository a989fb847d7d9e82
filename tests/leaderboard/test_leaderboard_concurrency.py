"""Issue 23, item 2: concurrent `drake leaderboard submit` processes on one board keep every
entry (before the lock, 8 concurrent submits kept 1)."""

from __future__ import annotations

import json
import subprocess
import sys

LINK = "https://github.com/example/drake-runs"
METHODS = ["fedavg", "fedprox", "ditto", "sft", "fedsim", "feddpa"]


def test_concurrent_submits_keep_every_entry(tmp_path, make_result, write_run, data_dir,
                                             empty_board):
    runs = [write_run(tmp_path / "runs" / m, make_result(0, method=m)) for m in METHODS]
    procs = [subprocess.Popen([sys.executable, "-m", "drake.cli", "leaderboard", "submit",
                               str(run), "--leaderboard", str(empty_board), "--data",
                               str(data_dir), "--submitter", "Jane", "--link", LINK],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for run in runs]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in outcomes] == [0] * len(METHODS), outcomes
    entries = json.loads(empty_board.read_text())["entries"]
    assert sorted(e["method"]["name"] for e in entries) == sorted(METHODS)
    assert sorted(p.name for p in empty_board.parent.iterdir() if p.name.startswith(".")) == []
