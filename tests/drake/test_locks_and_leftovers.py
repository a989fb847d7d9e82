"""Issue 23, items 1 and 10, with real processes: one build at a time per target (a second one
fails at once naming the first), workers die with a killed build, and nothing a killed build
leaves behind (a half-done swap, an empty partial folder) outlives the next build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drake.build import JOURNAL, MANIFEST, build, recover
from drake.errors import BuildError
from drake.locks import Busy, exclusive, lock_path
from drake.registry import get_benchmark
from drake.verify import verify

DRAKE = [sys.executable, "-m", "drake.cli"]


def children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_a_second_build_into_a_busy_out_fails_and_a_killed_build_takes_its_workers(tmp_path):
    out = tmp_path / "o"
    target = out / "drake-synth"
    first = subprocess.Popen([*DRAKE, "build", "--benchmark", "drake-synth", "--size", "small",
                              "--out", str(out), "--seed", "0", "--num-proc", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until(lambda: lock_path(target).exists(), 120, "the first build's lock")
        journal = target.parent / f".{target.name}.partial" / JOURNAL
        until(lambda: journal.exists() and journal.stat().st_size > 0, 120, "a written shard")
        workers = until(lambda: children(first.pid), 60, "the first build's workers")
        second = subprocess.run([*DRAKE, "build", "--benchmark", "drake-synth", "--size", "small",
                                 "--out", str(out), "--seed", "1"],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2 and "Traceback" not in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert f"pid {first.pid}" in second.stderr and "another --out" in second.stderr
        assert first.poll() is None, "the first build must still be running"
        done = [json.loads(line)["file"] for line in journal.read_text().splitlines()]
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        until(lambda: not any(alive(w) for w in workers), 10, "the orphaned workers to exit")
    finally:
        if first.poll() is None:
            first.kill()
    partial = journal.parent
    assert all((partial / f).exists() for f in done), "the second build touched the first's"
    with exclusive(target, "build"):  # the kernel released the killed build's lock
        pass


def test_a_held_target_is_named_with_its_holder(tmp_path):
    target = tmp_path / "o" / "drake-synth"
    with exclusive(target, "build"):
        proc = subprocess.run([*DRAKE, "build", "--benchmark", "drake-synth", "--size", "tiny",
                               "--out", str(target.parent)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert f"pid {os.getpid()}" in proc.stderr and "cannot build" in proc.stderr
        assert not target.exists()
        with pytest.raises(Busy, match=r"cannot build .*\(waited 0.2 s\)"):
            with exclusive(target, "build", wait=0.2):
                pass
    assert not lock_path(target).exists(), "the lock file is removed on release"


@pytest.fixture(scope="module")
def tiny():
    return get_benchmark("drake-synth", size="tiny")


def _fake_build(folder: Path, tag: str, finished: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "shard.parquet").write_text(tag)
    if finished:
        (folder / MANIFEST).write_text(json.dumps({"tag": tag}))
    else:
        (folder / JOURNAL).write_text("")
    return folder


def test_recover_finishes_or_undoes_a_swap_cut_by_a_kill(tmp_path):
    final = tmp_path / "drake-synth"
    old, partial = tmp_path / ".drake-synth.old", tmp_path / ".drake-synth.partial"
    # cut after the old build moved aside: the finished partial goes in
    _fake_build(old, "old"), _fake_build(partial, "new")
    recover(final)
    assert (final / "shard.parquet").read_text() == "new" and not old.exists()
    assert not partial.exists()
    # cut while the old build was being removed
    _fake_build(old, "old")
    recover(final)
    assert (final / "shard.parquet").read_text() == "new" and not old.exists()
    # no finished partial: the old build comes back, nothing is lost
    (final / MANIFEST).rename(tmp_path / "gone")
    final.rename(old)
    _fake_build(partial, "half", finished=False)
    recover(final)
    assert (final / "shard.parquet").read_text() == "new" and (partial / JOURNAL).exists()


def test_the_next_build_clears_a_stale_old_folder_and_a_failed_build_leaves_no_partial(
        tiny, tmp_path, monkeypatch):
    done = build(tiny, tmp_path, seed=3, shard_rows=64)
    _fake_build(tmp_path / ".drake-synth.old", "stale")
    rebuilt = build(tiny, tmp_path, seed=3, shard_rows=64, overwrite=True)
    assert verify(rebuilt).ok and rebuilt == done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drake-synth"]

    def broken(*args, **kwargs):
        raise BuildError("planned failure")

    monkeypatch.setattr("drake.build.plan_shards", broken)
    with pytest.raises(BuildError, match="planned failure"):
        build(tiny, tmp_path / "fresh", seed=3, shard_rows=64)
    assert not any((tmp_path / "fresh").iterdir()), "an empty partial folder was left behind"
