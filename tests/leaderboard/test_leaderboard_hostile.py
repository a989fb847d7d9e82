"""Hostile and malformed submissions: each is refused through the CLI with one error line,
and the leaderboard file stays byte-identical (sha256 before == after), with no temp files."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from leaderboard.cli import add_cli

LINK = "https://github.com/example/drake-runs"


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="drake")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


@dataclass
class Ctx:
    tmp: Path
    make: Callable[..., dict]
    runs: list[Path]

    def run(self, doc: dict | bytes | str, name: str = "run") -> str:
        folder = self.tmp / name
        folder.mkdir(parents=True, exist_ok=True)
        data = (
            doc
            if isinstance(doc, bytes)
            else (doc if isinstance(doc, str) else json.dumps(doc)).encode()
        )
        (folder / "results.json").write_bytes(data)
        return str(folder)

    def edited(self, path: str, value: object, seed: int = 0) -> str:
        doc = self.make(seed)
        holder = doc
        keys = path.split(".")
        for key in keys[:-1]:
            holder = holder[key]
        holder[keys[-1]] = value
        return self.run(doc, f"edit{seed}")


def _text_with(ctx: Ctx, old: str, new: str) -> str:
    text = json.dumps(ctx.make(0))
    assert old in text
    return ctx.run(text.replace(old, new, 1))


def _fifo(ctx: Ctx) -> list[str]:
    folder = ctx.tmp / "fifo"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "results.json")
    return [str(folder)]


def _symlink_to_device(ctx: Ctx) -> list[str]:
    folder = ctx.tmp / "link"
    folder.mkdir(parents=True)
    os.symlink("/dev/zero", folder / "results.json")
    return [str(folder)]


# The bytes a pickler writes for {"seed": 0} (protocol 4), as a literal: the suite never pickles.
PICKLED = b'\x80\x04\x95\r\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x04seed\x94K\x00s.'


def _pickle(ctx: Ctx) -> list[str]:
    return [ctx.run(PICKLED)]


CASES: list[tuple[str, str, Callable[[Ctx], list[str]]]] = [
    (
        "too-large",
        "exceeds the size limit",
        lambda c: [c.run(json.dumps(c.make(0)) + " " * (2 * 1024 * 1024))],
    ),
    ("truncated-json", "malformed JSON", lambda c: [c.run(json.dumps(c.make(0))[:-10])]),
    ("not-utf8", "not valid UTF-8", lambda c: [c.run(b'{"seed": "\xff\xfe"}')]),
    ("pickle-payload", "not valid UTF-8", _pickle),
    (
        "nan",
        "NaN is not allowed",
        lambda c: [_text_with(c, '"self_a_auc": ', '"self_a_auc": NaN, "x": ')],
    ),
    (
        "infinity",
        "Infinity is not allowed",
        lambda c: [_text_with(c, '"wall_time_s": 10.0', '"wall_time_s": Infinity')],
    ),
    (
        "overflow-number",
        "overflows to infinity",
        lambda c: [_text_with(c, '"wall_time_s": 10.0', '"wall_time_s": 1e999')],
    ),
    (
        "duplicate-key",
        "duplicate JSON key 'seed'",
        lambda c: [_text_with(c, '"seed": 0', '"seed": 0, "seed": 1')],
    ),
    ("deep-nesting", "nested too deeply", lambda c: [c.run("[" * 200000 + "]" * 200000)]),
    (
        "huge-integer",
        "invalid JSON value",
        lambda c: [_text_with(c, '"seed": 0', '"seed": ' + "9" * 5000)],
    ),
    ("top-level-array", "valid dictionary", lambda c: [c.run([c.make(0)])]),
    ("seed-as-string", "seed: Input should be a valid integer", lambda c: [c.edited("seed", "0")]),
    (
        "metric-above-100",
        "metrics.self_a_auc: 120.0 is outside",
        lambda c: [c.edited("metrics.self_a_auc", 120.0)],
    ),
    (
        "metric-negative",
        "metrics.others_a_auc: -3.0 is outside",
        lambda c: [c.edited("metrics.others_a_auc", -3.0)],
    ),
    ("unknown-metric", "metrics.bogus: not a metric", lambda c: [c.edited("metrics.bogus", 1.0)]),
    (
        "run-made-in-the-future",
        "created_at: 2099-01-01T00:00:00+00:00 is in the future",
        lambda c: [c.edited("created_at", "2099-01-01T00:00:00+00:00")],
    ),
    (
        "entry-dated-in-the-future",
        "date: 2099-01-01 is in the future",
        lambda c: [str(c.runs[0]), "--date", "2099-01-01"],
    ),
    (
        "unknown-field-with-code",
        "eval: Extra inputs are not permitted",
        lambda c: [c.edited("eval", "__import__('os').system('id')")],
    ),
    (
        "manifest-unknown",
        "matches no known manifest",
        lambda c: [c.edited("benchmark.manifest_sha256", "f" * 64)],
    ),
    (
        "manifest-not-hex",
        "benchmark.manifest_sha256: String should match",
        lambda c: [c.edited("benchmark.manifest_sha256", "../manifest.json")],
    ),
    ("control-char-method", "method.name", lambda c: [c.edited("method.name", "fed\u0000avg")]),
    (
        "path-method",
        "method.name: String should match",
        lambda c: [c.edited("method.name", "../../etc/passwd")],
    ),
    (
        "path-benchmark",
        "benchmark.name: String should match",
        lambda c: [c.edited("benchmark.name", "../drake-synth")],
    ),
    (
        "path-scenario",
        "scenario.name: String should match",
        lambda c: [c.edited("scenario.name", "dynamic/hetero")],
    ),
    (
        "backslash-model",
        "models_per_client[0]",
        lambda c: [c.edited("models_per_client", ["..\\..\\x"] * 10)],
    ),
    (
        "bidi-hyperparameter",
        "U+202E",
        lambda c: [c.edited("method.hyperparameters.note", "ok\u202egnp.exe")],
    ),
    (
        "surrogate-hyperparameter",
        "unicode string",
        lambda c: [_text_with(c, '"lr": 0.0002', '"lr": "\\ud800"')],
    ),
    (
        "nested-hyperparameters",
        "flatten nested configs",
        lambda c: [c.edited("method.hyperparameters.opt", {"lr": 1})],
    ),
    (
        "unknown-benchmark",
        "unknown benchmark 'imagenet'",
        lambda c: [c.edited("benchmark.name", "imagenet")],
    ),
    (
        "unknown-version",
        "version '9.9' is not known",
        lambda c: [c.edited("benchmark.version", "9.9")],
    ),
    (
        "protocol-mismatch",
        "not a metric of protocol 'base_novel'",
        lambda c: [c.edited("protocol", "base_novel")],
    ),
    ("scenario-rule", "make them agree", lambda c: [c.edited("scenario.name", "dynamic-homo")]),
    (
        "a-last-not-curve",
        "differs from the last curve point",
        lambda c: [c.edited("metrics.self_a_last", 99.0)],
    ),
    (
        "scores-clients",
        "1 clients, but models_per_client",
        lambda c: [c.edited("curves.scores", [[{"t": 1.0}]] * 4)],
    ),
    (
        "seeds-of-two-experiments",
        "submit only seeds of the same experiment",
        lambda c: [str(c.runs[0]), "--seeds", c.edited("method.hyperparameters.lr", 0.1, 1)],
    ),
    ("same-seed-twice", "duplicate seeds", lambda c: [str(c.runs[0]), "--seeds", str(c.runs[0])]),
    (
        "duplicate-submission",
        "pass --replace",
        lambda c: [str(c.runs[0]), "--seeds", str(c.runs[1]), str(c.runs[2])],
    ),
    (
        "submitter-newline",
        "submitter: character U+000A",
        lambda c: [str(c.runs[0]), "--replace", "--submitter", "Eve\nok: fake line"],
    ),
    (
        "submitter-escape",
        "submitter: character U+001B",
        lambda c: [str(c.runs[0]), "--replace", "--submitter", "Eve\x1b[2J"],
    ),
    (
        "link-javascript",
        "link: String should match",
        lambda c: [str(c.runs[0]), "--replace", "--link", "javascript:alert(1)"],
    ),
    (
        "link-http",
        "link: String should match",
        lambda c: [str(c.runs[0]), "--replace", "--link", "http://example.org"],
    ),
    (
        "date-invalid",
        "not a valid date",
        lambda c: [str(c.runs[0]), "--replace", "--date", "2025-13-01"],
    ),
    ("fifo", "not a regular file", _fifo),
    ("symlink-to-device", "not a regular file", _symlink_to_device),
    ("missing-run", "cannot read", lambda c: [str(c.tmp / "nope")]),
]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, make_result, write_run, manifest_bytes, seeded_source):
    """A seeded leaderboard that already holds one reproduced drake-synth entry."""
    root = tmp_path_factory.mktemp("hostile")
    data = root / "data"
    data.mkdir()
    (data / "manifest.json").write_bytes(manifest_bytes)
    runs = [write_run(root / f"seed{s}", make_result(s)) for s in range(3)]
    board = root / "board.json"
    shutil.copyfile(seeded_source, board)
    rc = cli(
        "leaderboard",
        "submit",
        str(runs[0]),
        "--seeds",
        str(runs[1]),
        str(runs[2]),
        "--leaderboard",
        str(board),
        "--data",
        str(data),
        "--submitter",
        "Jane",
        "--link",
        LINK,
    )
    assert rc == 0
    return board, data, runs


def test_enough_hostile_cases() -> None:
    assert len(CASES) >= 25


@pytest.mark.parametrize("name,reason,build", CASES, ids=[c[0] for c in CASES])
def test_hostile_submission_is_refused_and_file_unchanged(
    name, reason, build, prepared, tmp_path, make_result, capsys
) -> None:
    source, data, runs = prepared
    board_dir = tmp_path / "board"
    board_dir.mkdir()
    board = board_dir / "leaderboard.json"
    shutil.copyfile(source, board)
    before = hashlib.sha256(board.read_bytes()).hexdigest()
    argv = build(Ctx(tmp_path / "case", make_result, runs))
    capsys.readouterr()
    rc = cli(
        "leaderboard",
        "submit",
        *argv[:1],
        "--leaderboard",
        str(board),
        "--data",
        str(data),
        "--submitter",
        "Eve",
        "--link",
        LINK,
        *argv[1:],
    )
    out, err = capsys.readouterr()
    assert rc == 1
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert reason in err, err
    assert hashlib.sha256(board.read_bytes()).hexdigest() == before
    assert [p.name for p in board_dir.iterdir()] == ["leaderboard.json"]
    assert out == ""
