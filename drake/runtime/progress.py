"""Where a run is, as lines: the runtime's progress hook for logs, pipes and the quickstart.

A round of the local runtime trains every sampled client and, at evaluation rounds, scores every
client on every task; on two CPU cores one round of the quickstart takes up to a minute.
:class:`RoundProgress` is a :class:`~drake.runtime.local.Hook`: it says a line at most every
``every`` seconds while clients train or are scored, and one line at the end of every round
with the time it took, the time since the run started and, at evaluation rounds, Self and
Others. :meth:`RoundProgress.keepalive` repeats the current status while one client takes
longer than ``every`` seconds. `drake eval` uses it when its output is not a terminal (there it
draws a rounds bar), and the quickstart always.

Example (a run of 4 rounds, evaluated every 2)::

    sft round 1/4: training, 6/10 clients (12 s elapsed)
    sft round 1/4 done in 18 s (18 s elapsed)
    sft round 2/4: scoring, 4/10 clients (31 s elapsed)
    sft round 2/4 done in 41 s: Self 37.1, Others 36.6 (59 s elapsed)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from drake.progress import LineProgress, format_seconds
from drake.runtime.local import Hook, LocalRuntime, RunState

#: What a line says a stage is doing.
STAGE_WORDS = {"train": "training", "eval": "scoring", "initial": "scoring before training",
               "post_fl": "post-FL stage", "unseen": "scoring the unseen tasks",
               "fast_adapt": "fast adaptation"}


class RoundProgress(Hook):
    """Say progress lines through ``say`` (see the module docstring).

    Parameters
    ----------
    say : callable
        Where a line goes (``print``; ``list.append`` in tests).
    label : str
        Put before every line (the quickstart indents and names the method).
    every : float
        Least number of seconds between two lines within a round.
    clock : callable
        Monotonic seconds (a fake one in tests).
    """

    def __init__(self, say: Callable[[str], None], label: str = "", every: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lines = LineProgress(say, every=every, clock=clock)
        self.label = label
        self._round_start = self.lines.start
        self._status = "setting up the build, the models and the method"

    def _elapsed(self) -> str:
        return f"{format_seconds(self.lines.elapsed())} elapsed"

    def status(self) -> str:
        """The line for where the run is now (what :meth:`keepalive` repeats)."""
        return f"{self.label}{self._status} ({self._elapsed()})"

    @contextmanager
    def keepalive(self) -> Iterator[None]:
        """Within the block, repeat :meth:`status` whenever ``every`` seconds pass without a
        line (model loading, a slow client)."""
        with self.lines.keepalive(self.status):
            yield

    def on_client_end(self, runtime: LocalRuntime, stage: str, r: int, done: int,
                      total: int) -> None:
        where = "before training" if stage == "initial" else f"round {r + 1}/{runtime.rounds}"
        what = "scoring" if stage == "initial" else STAGE_WORDS.get(stage, stage)
        finished = stage == "initial" and done == total  # the rounds' clock starts after it
        unit = "architecture × unseen task" if stage == "fast_adapt" else "clients"
        self._status = f"{where}: {what}, {done}/{total} {unit}"
        self.lines.update(self.status(), force=finished)
        if stage == "train" and done == 0:  # the round starts (after set-up, when resumed)
            self._round_start = self.lines.clock()
        if finished:
            self._round_start = self.lines.clock()
            self._status = f"round 1/{runtime.rounds}: training"  # till its 0/N event

    def on_round_end(self, runtime: LocalRuntime, st: RunState, r: int) -> None:
        now = self.lines.clock()
        point = st.history[-1] if st.history and st.history[-1]["round"] == r + 1 else None
        scores = ""
        if point is not None and "others" in point:
            scores = f": Self {point['self']:.1f}, Others {point['others']:.1f}"
        elif point is not None:  # other protocols: their metrics
            scores = ": " + ", ".join(f"{k} {v:.1f}" for k, v in point["metrics"].items())
        self.lines.update(f"{self.label}round {r + 1}/{runtime.rounds} done in "
                          f"{format_seconds(now - self._round_start)}{scores} "
                          f"({self._elapsed()})", force=True)
        self._round_start = now
        self._status = (f"round {r + 2}/{runtime.rounds}: training" if r + 1 < runtime.rounds
                        else "finishing")

    def on_post_fl(self, runtime: LocalRuntime, st: RunState) -> None:
        self.lines.update(f"{self.label}post-FL stage done ({self._elapsed()})", force=True)
