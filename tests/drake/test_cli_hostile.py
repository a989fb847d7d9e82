"""Issue 23: a hostile-input suite for the CLI. Bad arguments, bad manifests and bad checkpoints
each give one line on stderr, a non-zero exit, no traceback and no "internal error" (the catch-all
for bugs), and leave the files they were given byte-identical."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drake.build import MANIFEST, build, write_manifest
from drake.cli import main
from drake.registry import get_benchmark


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("h"), seed=2)


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def refused(argv: list[str], capsys, *, touches: Path | None = None, code: int = 2) -> str:
    """Run ``drake argv`` in-process; return its one stderr line after checking the rules."""
    before = snapshot(touches) if touches is not None else None
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse
        got = exc.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert got == code, (argv, got, captured.err)
    assert len(lines) == 1, (argv, captured.err)
    assert "Traceback" not in captured.err and "internal error" not in lines[0], lines[0]
    if before is not None:
        assert snapshot(touches) == before, f"{argv} changed {touches}"
    return lines[0]


def test_bad_arguments(built, tmp_path, capsys):
    data = str(built.parent)
    cases = [
        (["build", "--benchmark", "drake-synth", "--num-proc", "0", "--out", str(tmp_path)],
         "--num-proc must be >= 1"),
        (["build", "--benchmark", "nope", "--out", str(tmp_path)], "nope"),
        (["build", "--benchmark", "drake-synth", "--size", "huge", "--out", str(tmp_path)],
         "huge"),
        (["build", "--bogus"], "unrecognized arguments: --bogus"),
        (["build", "--seed", "x"], "invalid int value: 'x'"),
        (["eval", "--method", "nope", "--data", data, "--benchmark", "drake-synth"], "unknown method 'nope'"),
        (["eval", "--method", "fedavg", "--data", data, "--benchmark", "drake-synth", "--frac",
          "0"], "frac"),
        (["eval", "--method", "fedavg", "--data", data, "--benchmark", "drake-synth",
          "--scenario", "nope"], "nope"),
        (["partition", str(built), "--scenario", "x", "--rule", "nope"], "nope"),
        (["partition", str(built), "--scenario", "x", "--rule", "dirichlet", "--param", "alpha"],
         "KEY=VALUE"),
        (["eval", "--method", "hetlora", "--data", data, "--benchmark", "drake-synth", "--hp",
          "ranks=[8,4"], "ranks='[8,4' is not valid JSON"),
        (["verify", str(tmp_path / "absent")], "is not a DRAKE build"),
        (["info", str(tmp_path)], "is not a DRAKE build"),
    ]
    for argv, fragment in cases:
        assert fragment in refused(argv, capsys, touches=built), argv
    board = ["leaderboard", "show", "--leaderboard", str(tmp_path / "absent.json")]
    assert "absent.json: cannot read" in refused(board, capsys, code=1)  # its validation code
    assert not any(tmp_path.iterdir()), "a refused command wrote into --out"


BAD_MANIFESTS = {
    "not-json": lambda m: "{ not json",
    "a-list": lambda m: "[]",
    "no-tasks": lambda m: {k: v for k, v in m.items() if k != "tasks"},
    "rows-a-string": lambda m: _set_first_split(m, "rows", "ten"),
    "shards-not-a-list": lambda m: _set_first_split(m, "shards", {"file": "x"}),
    "seed-negative": lambda m: {**m, "seed": -1},
    "spec-a-string": lambda m: {**m, "spec": "drake-synth"},
    "sha-not-hex": lambda m: _set_first_shard(m, "sha256", "z" * 64),
    "binary": lambda m: b"\xff\xfe\x00garbage",
}


def _set_first_split(m, key, value):
    split = next(iter(next(iter(m["tasks"].values())).values()))
    split[key] = value
    return m


def _set_first_shard(m, key, value):
    next(iter(next(iter(m["tasks"].values())).values()))["shards"][0][key] = value
    return m


@pytest.mark.parametrize("kind", sorted(BAD_MANIFESTS))
def test_bad_manifests(built, tmp_path, capsys, kind):
    folder = tmp_path / "drake-synth"
    shutil.copytree(built, folder)
    bad = BAD_MANIFESTS[kind](json.loads((built / MANIFEST).read_text()))
    path = folder / MANIFEST
    if isinstance(bad, bytes):
        path.write_bytes(bad)
    else:
        path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    for argv in (["verify", str(folder)], ["info", str(folder)],
                 ["partition", str(folder), "--scenario", "x", "--rule", "iid"],
                 ["eval", "--method", "fedavg", "--data", str(tmp_path), "--benchmark",
                  "drake-synth", "--untrained", "--out", str(tmp_path / "run")]):
        line = refused(argv, capsys, touches=folder)
        assert str(path) in line or "manifest" in line, (argv, line)


def test_an_absolute_shard_path_is_reported_not_read(built, tmp_path, capsys):
    folder = tmp_path / "drake-synth"
    shutil.copytree(built, folder)
    manifest = _set_first_shard(json.loads((built / MANIFEST).read_text()), "file", "/etc/passwd")
    write_manifest(folder, manifest)
    before = snapshot(folder)
    assert main(["verify", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "'/etc/passwd' points outside" in err and "Traceback" not in err
    assert snapshot(folder) == before


@pytest.fixture(scope="module")
def finished_run(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    argv = ["eval", "--method", "fedavg", "--data", str(built.parent), "--benchmark",
            "drake-synth", "--untrained",
            "--rounds", "1", "--local-steps", "1", "--eval-per-task", "1", "--out", str(out)]
    assert main(argv) == 0
    return argv, out


CHECKPOINT_DAMAGE = {
    "sha-list-not-json": ("sha256.json", lambda b: b"{oops"),
    "sha-list-empty": ("sha256.json", lambda b: b"{}"),
    "tensors-truncated": ("state.safetensors", lambda b: b[:64]),
    "state-edited": ("state.json", lambda b: b.replace(b'"round": 0', b'"round": 7')),
    "state-binary": ("state.json", lambda b: b"\x00\xff" * 10),
}


@pytest.mark.parametrize("kind", sorted(CHECKPOINT_DAMAGE))
def test_bad_checkpoints(finished_run, tmp_path, capsys, kind):
    argv, out = finished_run  # damaged in place (the run's config names its folder), restored
    name, damage = CHECKPOINT_DAMAGE[kind]
    target = out / "checkpoint" / name
    pristine = target.read_bytes()
    target.write_bytes(damage(pristine))
    try:
        line = refused(argv, capsys, touches=out)
    finally:
        target.write_bytes(pristine)
    assert "checkpoint" in line and f"delete {out}" in line, line


def test_a_garbled_run_config_is_one_line(finished_run, tmp_path, capsys):
    argv, out = finished_run
    pristine = (out / "config.json").read_bytes()
    (out / "config.json").write_text("{ garbled")
    try:
        assert "config.json is not valid JSON" in refused(argv, capsys, touches=out)
    finally:
        (out / "config.json").write_bytes(pristine)


def test_a_real_process_prints_one_line_and_no_traceback(built, tmp_path):
    folder = tmp_path / "drake-synth"
    shutil.copytree(built, folder)
    (folder / MANIFEST).write_text(json.dumps({"benchmark": "drake-synth"}))
    for argv in (["info", str(folder)], ["build", "--no-such-flag"]):
        proc = subprocess.run([sys.executable, "-m", "drake.cli", *argv], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_info_prints_markup_in_a_manifest_as_written(built, tmp_path, capsys):
    folder = tmp_path / "drake-synth"
    shutil.copytree(built, folder)
    manifest = json.loads((built / MANIFEST).read_text())
    manifest["spec"]["description"] = "[/oops] [link=https://evil.example]click[/link]"
    for task in manifest["spec"]["tasks"]:
        task["subgroup"] = "[/bad]"
    write_manifest(folder, manifest)
    assert main(["info", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "[/oops] [link=https://evil.example]click[/link]" in out and "[/bad]" in out


def test_key_values_read_json_where_it_is_json_and_text_otherwise():
    """`--hp similarity=flat` is the word, not a JSON error (it once crashed on every value
    starting with f or t); numbers, booleans and lists are JSON."""
    from drake.cli import key_values

    got = key_values("--hp", ["similarity=flat", "b_features=adapter", "prune=false",
                              "lam=1e-3", "ranks=[8,4]", "n=-2", "name=true-ish"], "lam=0.01")
    assert got == {"similarity": "flat", "b_features": "adapter", "prune": False, "lam": 1e-3,
                   "ranks": [8, 4], "n": -2, "name": "true-ish"}


def test_a_user_error_is_one_line_and_verbose_adds_its_traceback(tmp_path, capsys, caplog):
    missing = tmp_path / "no-such-build"
    assert main(["info", str(missing)]) == 2
    plain = capsys.readouterr().err
    assert plain.startswith("drake: error: ") and "Traceback" not in plain
    assert not any(r.exc_info for r in caplog.records)
    assert main(["--verbose", "info", str(missing)]) == 2
    assert capsys.readouterr().err == plain  # the same one line, and the traceback logged
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1 and "not a DRAKE build" in str(logged[0].exc_info[1])
