"""Exclusive locks on the folders and files the suite writes, naming their holder.

Two ``drake build`` runs into one ``--out``, or two ``drake leaderboard submit`` on one board,
would otherwise interleave their writes. Every writer takes :func:`exclusive` on a lock file
beside its target first. The lock is ``filelock``'s (``flock`` on POSIX): the operating system
releases it when its holder exits, however it exits, so a crash never leaves a stale lock, and
the holder removes the lock file when it is done.

The holder writes who it is into the lock file (pid, host, start time, command); a caller that
cannot get the lock in time fails with one line that says so and names the target.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from drake.errors import DrakeError


class Busy(DrakeError):
    """Another process holds the lock on what this one wants to write."""


def lock_path(target: Path) -> Path:
    """The lock file for ``target``: ``.<name>.lock`` beside it."""
    target = Path(target)
    return target.parent / f".{target.name}.lock"


def holder(path: Path) -> str:
    """Who holds lock file ``path``, as its holder wrote it (or ``"another process"``)."""
    try:
        info = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
        return (f"pid {int(info['pid'])} on {info['host']}, since {info['since']}: "
                f"`{info['command']}`")
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


@contextmanager
def exclusive(target: Path, doing: str, *, wait: float = 0.0, advice: str = "") -> Iterator[None]:
    """Hold the lock on ``target`` while the block runs.

    Parameters
    ----------
    target : Path
        What the block writes (a build folder, ``leaderboard.json``).
    doing : str
        What the caller does there, for the message a second caller gets ("build", "submit").
    wait : float
        Seconds to wait for the holder to finish; 0 fails at once.
    advice : str
        How a second caller can go on, appended to its message.
    """
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=wait)
    try:
        lock.acquire()
    except Timeout:
        waited = f" (waited {wait:g} s)" if wait else ""
        raise Busy(f"cannot {doing} {target}: it is being written by {holder(path)}{waited}; "
                   f"{advice or 'wait for it to finish and try again'}") from None
    try:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": stamp,
                "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:300]}
        with open(path, "r+", encoding="utf-8") as handle:  # a second descriptor: the lock stays
            handle.truncate()
            handle.write(json.dumps(info))
        yield
    finally:
        # Unlinked while still held, so nothing is left behind: a waiter that opened this inode
        # sees it unlinked once it gets the flock and starts over on a new file (filelock >= 4).
        path.unlink(missing_ok=True)
        lock.release()
