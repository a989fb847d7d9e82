"""The grid scripts refuse to tabulate resumed runs of different commits (benchmarks/one_commit.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("one_commit", ROOT / "benchmarks" / "one_commit.py")
one_commit = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(one_commit)


def _run(tmp_path: Path, name: str, commit: str | None) -> tuple[str, dict]:
    """A run's folder and its results as a grid script has loaded them."""
    software = None if commit is None else {"package_version": "0", "git_hash": commit}
    return str(tmp_path / name), {"metrics": {}, "software": software}


def test_one_commit_is_returned(tmp_path) -> None:
    runs = [_run(tmp_path, f"fedavg-s{s}", "a" * 40) for s in range(3)]
    assert one_commit.check(runs, allow_mixed=False) == "a" * 40


def test_mixed_commits_are_refused_with_the_runs_named(tmp_path) -> None:
    runs = [_run(tmp_path, "fedavg-s0", "a" * 40), _run(tmp_path, "fedavg-s1", "a" * 40),
            _run(tmp_path, "ditto-s0", "b" * 40)]
    with pytest.raises(SystemExit) as err:
        one_commit.check(runs, allow_mixed=False)
    message = str(err.value)
    assert "aaaaaaaaaaaa" in message and "bbbbbbbbbbbb" in message
    assert str(tmp_path / "ditto-s0") in message and "--allow-mixed-commits" in message
    label = one_commit.check(runs, allow_mixed=True)
    assert label == "mixed: aaaaaaaaaaaa (2 runs), bbbbbbbbbbbb (1 runs)"


def test_a_run_without_a_recorded_commit_counts_as_unknown(tmp_path) -> None:
    assert one_commit.check([_run(tmp_path, "a", None)], allow_mixed=False) == "unknown"
    with pytest.raises(SystemExit, match="unknown"):
        one_commit.check([_run(tmp_path, "b", None), _run(tmp_path, "c", "c" * 40)],
                         allow_mixed=False)


@pytest.mark.parametrize("script", ["fedmosaic_synth", "tap_synth", "fedilora_synth",
                                    "clip_synth"])
def test_every_grid_script_offers_the_override(script) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--allow-mixed-commits" in done.stdout
