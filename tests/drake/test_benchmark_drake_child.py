"""The grid scripts' child runs (benchmarks/drake_child.py): output kept in a log beside the run,
failures named with the log's end, and no child outliving the grid script."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("drake_child", ROOT / "benchmarks" / "drake_child.py")
drake_child = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(drake_child)


def test_the_log_sits_beside_the_run_folder(tmp_path) -> None:
    assert drake_child.log_of(tmp_path / "runs" / "fedavg-s0") == tmp_path / "runs" / "fedavg-s0.log"


def test_a_childs_output_is_appended_to_its_log(tmp_path) -> None:
    log = tmp_path / "runs" / "methods.log"
    drake_child.run_drake(["methods"], log)
    drake_child.run_drake(["methods"], log)
    text = log.read_text()
    assert text.startswith("$ drake methods\n")
    assert text.count("$ drake methods\n") == 2  # appended, not overwritten
    assert "fedmosaic" in text and "fedavg" in text


def test_a_failed_child_names_its_command_and_log(tmp_path) -> None:
    log = tmp_path / "nope-s0.log"
    with pytest.raises(RuntimeError) as err:
        drake_child.run_drake(["eval", "--method", "nope"], log)
    message = str(err.value)
    assert "drake eval --method nope failed (exit 2)" in message
    assert str(log) in message
    assert "unknown method 'nope'" in message  # the log's end is quoted
    assert "unknown method 'nope'" in log.read_text()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie that no one has reaped yet has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_child_ends_with_the_grid_script(tmp_path) -> None:
    """A grid script killed mid-run takes its running child with it (a restarted grid must not
    find an orphan still writing into the run folder it resumes)."""
    log = tmp_path / "build.log"
    grid = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, pathlib\n"
         f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
         "from drake_child import run_drake\n"
         f"run_drake(['build', '--benchmark', 'drake-synth', '--out', {str(tmp_path / 'data')!r}],"
         f" pathlib.Path({str(log)!r}))\n"])
    try:
        child = None
        for _ in range(300):
            found = subprocess.run(["pgrep", "-P", str(grid.pid)], capture_output=True,
                                   text=True).stdout.split()
            if found:
                child = int(found[0])
                break
            time.sleep(0.1)
        assert child is not None, "the grid script started no child"
        time.sleep(1.0)  # the child is past its start and building
        os.kill(grid.pid, signal.SIGKILL)
        grid.wait()
        for _ in range(100):
            if not _alive(child):
                break
            time.sleep(0.1)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the child outlived its grid script by 10 s")
    finally:
        if grid.poll() is None:
            grid.kill()
