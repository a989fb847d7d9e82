"""Strict JSON reading and atomic writing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard.errors import SubmissionError
from leaderboard.jsonio import atomic_write_text, dumps, loads_strict, read_json, read_limited


@pytest.mark.parametrize(
    "text,match",
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": Infinity}', "Infinity"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": 1e400}', "infinity"),
        ('{"a": 1, "a": 2}', "duplicate JSON key"),
        ('{"a": 1,}', "malformed JSON"),
        ("[" * 100000 + "]" * 100000, "nested too deeply"),
        ('{"a": ' + "1" * 5000 + "}", "invalid JSON value"),
    ],
)
def test_loads_strict_refuses(text: str, match: str) -> None:
    with pytest.raises(SubmissionError, match=match):
        loads_strict(text, "doc")


def test_loads_strict_refuses_bad_utf8() -> None:
    with pytest.raises(SubmissionError, match="UTF-8"):
        loads_strict(b'{"a": "\xff"}', "doc")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_strict_and_canonical_round_trip(value: object) -> None:
    text = dumps(value)
    assert loads_strict(text, "doc") == value
    assert json.loads(text) == value


def test_read_limited_checks_size_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 101)
    with pytest.raises(SubmissionError, match="exceeds the size limit of 100 bytes"):
        read_limited(path, 100)
    assert read_limited(path, 101) == b" " * 101


def test_read_refuses_non_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(SubmissionError, match="not a regular file"):
        read_json(fifo)  # would block forever if it were opened
    with pytest.raises(SubmissionError, match="not a regular file"):
        read_json(tmp_path)
    with pytest.raises(SubmissionError, match="cannot read"):
        read_json(tmp_path / "missing.json")


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json"]


def test_atomic_write_failure_keeps_old_file(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(path, "bad \ud800")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json"]


def test_dumps_keeps_scalar_lists_on_one_line() -> None:
    text = dumps({"a": [1, 2, 3], "b": {"c": [{"d": None}]}})
    assert '"a": [1, 2, 3]' in text
    assert json.loads(text) == {"a": [1, 2, 3], "b": {"c": [{"d": None}]}}
