"""Reading untrusted JSON safely and writing leaderboard files atomically.

Reading (:func:`read_json`) proceeds in this order, so that nothing large or odd is parsed:

1. ``stat`` the path: it must be a regular file (not a FIFO or device, which could block or
   stream forever) no larger than the size limit;
2. read at most ``limit + 1`` bytes and refuse if the limit is exceeded (the file may have
   grown since the ``stat``);
3. decode as strict UTF-8;
4. parse with :mod:`json`, refusing ``NaN``/``Infinity`` literals, numbers that overflow to
   infinity (``1e400``), duplicate object keys, and nesting deep enough to exhaust the
   recursion limit.

Nothing is ever evaluated or unpickled. Writing (:func:`atomic_write_text`) goes to a
temporary file in the destination directory, is flushed and fsync'ed, then renamed over the
destination with :func:`os.replace`, so readers see either the old or the new file, never a
partial one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from leaderboard.errors import SubmissionError

MAX_SUBMISSION_BYTES = 2 * 1024 * 1024
"""Size limit of a results.json or entry file given to ``submit``/``validate``."""

MAX_LEADERBOARD_BYTES = 64 * 1024 * 1024
"""Size limit of a leaderboard file."""

NEW_FILE_MODE = 0o644
"""Permissions of a leaderboard file created by the first write (existing files keep theirs)."""


def _reject_constant(token: str) -> Any:
    raise SubmissionError(f"JSON constant {token} is not allowed; numbers must be finite")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise SubmissionError(f"JSON number {token[:40]} overflows to infinity; use a finite value")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SubmissionError(f"duplicate JSON key {key[:80]!r}; each key may appear once")
        out[key] = value
    return out


def loads_strict(data: bytes | str, where: str) -> Any:
    """Parse JSON text, refusing everything :mod:`json` would otherwise let through.

    Parameters
    ----------
    data : bytes or str
        The document; bytes must be UTF-8.
    where : str
        Name of the source, used in error messages.

    Raises
    ------
    SubmissionError
        For invalid UTF-8, malformed JSON, NaN/Infinity, overflowing numbers, duplicate keys
        or excessive nesting.
    """
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SubmissionError(
                f"{where}: not valid UTF-8 ({err.reason} at byte {err.start})"
            ) from err
    else:
        text = data
    try:
        return json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_no_duplicate_keys,
        )
    except SubmissionError as err:
        raise SubmissionError(f"{where}: {err}") from err
    except json.JSONDecodeError as err:
        raise SubmissionError(
            f"{where}: malformed JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from err
    except RecursionError as err:
        raise SubmissionError(f"{where}: JSON nested too deeply") from err
    except ValueError as err:  # e.g. integers beyond the int-digits limit
        raise SubmissionError(f"{where}: invalid JSON value ({err})") from err


def read_limited(path: Path, limit: int) -> bytes:
    """Read a regular file of at most ``limit`` bytes (checked before and while reading).

    Raises
    ------
    SubmissionError
        If the path is missing, not a regular file, or too large.
    """
    try:
        info = os.stat(path)
    except OSError as err:
        raise SubmissionError(f"{path}: cannot read ({err.strerror})") from err
    if not stat.S_ISREG(info.st_mode):
        raise SubmissionError(f"{path}: not a regular file")
    if info.st_size > limit:
        raise SubmissionError(
            f"{path}: {info.st_size} bytes exceeds the size limit of {limit} bytes"
        )
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as err:
        raise SubmissionError(f"{path}: cannot read ({err.strerror})") from err
    if len(data) > limit:
        raise SubmissionError(f"{path}: exceeds the size limit of {limit} bytes")
    return data


def read_json(path: Path, limit: int = MAX_SUBMISSION_BYTES) -> Any:
    """Read and strictly parse a JSON file no larger than ``limit`` bytes."""
    return loads_strict(read_limited(path, limit), str(path))


def _format(value: Any, depth: int) -> str:
    pad = "  " * depth
    if isinstance(value, dict) and value:
        items = [
            f"{pad}  {json.dumps(k, ensure_ascii=False)}: {_format(v, depth + 1)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [f"{pad}  {_format(v, depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def dumps(document: Any) -> str:
    """Serialise a document the way every leaderboard file is written.

    Objects are indented by two spaces, one key per line; arrays of scalars stay on one line.
    The output is deterministic for a given document (key order is preserved).
    """
    return _format(document, 0) + "\n"


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (temp file in the same directory + rename)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else NEW_FILE_MODE
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
