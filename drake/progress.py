"""Progress as plain lines, for output that a user watches in a log or through a pipe.

tqdm bars (``drake build``, ``drake eval`` on a terminal) draw nothing when their output is not
a terminal, so a piped or logged run stays silent for minutes. :class:`LineProgress` says one
line at most every ``every`` seconds while work goes on, and always at the end of a stage, so
that output appears at least that often plus the time of one unit of work; within
:meth:`LineProgress.keepalive` a background thread repeats the current status when one unit
takes longer (one client's evaluation on busy cores can take a minute). The quickstart uses it
on a terminal too (a bar and the quickstart's own lines would interleave).

Example
-------
>>> said = []
>>> lines = LineProgress(said.append, every=0.0)
>>> list(lines.wrap("building", "shard")(iter("ab"), 2))
['a', 'b']
>>> [s.split(" (")[0] for s in said]
['building: 1/2 shards', 'building: 2/2 shards']
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator


class LineProgress:
    """Say progress lines through ``say``, at most one every ``every`` seconds unless forced.

    Parameters
    ----------
    say : callable
        Where a line goes (``print``, a logger method, ``list.append`` in tests).
    every : float
        Least number of seconds between two unforced lines.
    clock : callable
        Monotonic seconds (a fake one in tests).
    """

    def __init__(self, say: Callable[[str], None], every: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.say = say
        self.every = every
        self.clock = clock
        self.start = clock()
        self._last = self.start
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since this reporter was made."""
        return self.clock() - self.start

    def update(self, text: str, *, force: bool = False) -> bool:
        """Say ``text`` if forced or if ``every`` seconds have passed since the last line;
        return whether it was said."""
        with self._lock:  # the keepalive thread says lines too
            now = self.clock()
            if not force and now - self._last < self.every:
                return False
            self.say(text)
            self._last = now
            return True

    @contextlib.contextmanager
    def keepalive(self, status: Callable[[], str]) -> Iterator[None]:
        """Within the block, say ``status()`` whenever ``every`` seconds pass without a line.

        A daemon thread checks four times per interval, so that lines come at least every
        ``1.25 * every`` seconds however long one step of the block takes; it stops when the
        block ends (or raises).
        """
        stop = threading.Event()
        poll = max(self.every / 4, 0.01)

        def beat() -> None:
            while not stop.wait(poll):
                self.update(status())

        thread = threading.Thread(target=beat, name="drake-keepalive", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def wrap(self, desc: str, unit: str) -> Callable[[Iterable, int], Iterator]:
        """A ``progress(iterable, total)`` wrapper, the form :func:`drake.build.build` takes:
        ``desc: i/total units (t s)`` after items, and always after the last."""

        def wrap(iterable: Iterable, total: int) -> Iterator:
            t0 = self.clock()
            for done, item in enumerate(iterable, 1):
                yield item  # the line below runs once the caller has handled the item
                self.update(f"{desc}: {done}/{total} {unit}s ({self.clock() - t0:.0f} s)",
                            force=done == total)

        return wrap


def format_seconds(seconds: float) -> str:
    """``42 s`` or ``3 min 05 s``: how long a step took, for a person to read."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"
