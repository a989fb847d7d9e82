"""A table of resumed runs must come from one version of the code.

The grid scripts (``fedmosaic_synth.py``, ``tap_synth.py``, ``fedilora_synth.py``,
``clip_synth.py``) skip a run whose ``results.json`` exists, so a grid can be stopped and
resumed. A run left from an earlier commit would then sit in the same table as runs of the
current one without anyone noticing. Every ``results.json`` records the commit it ran on
(``software.git_hash``); :func:`check` refuses a table whose runs name more than one, and says
which runs to delete (or to pass ``--allow-mixed-commits``, which labels the table as mixed). It
reads the results the script has already loaded, not the files again.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-mixed-commits", action="store_true",
                        help="tabulate runs recorded at different commits of the suite (the "
                        "table says so) instead of refusing")


def check(runs: Iterable[tuple[str, Mapping[str, Any]]], allow_mixed: bool) -> str:
    """The commit all ``runs`` (pairs of a run's folder and one of its loaded results files) ran
    on (``"unknown"`` when none recorded one), or a ``"mixed: ..."`` label when ``allow_mixed``;
    otherwise mixed commits end the script with the runs of each commit named."""
    by_commit: dict[str, set[str]] = {}
    for folder, result in runs:
        software = result.get("software") or {}
        by_commit.setdefault(software.get("git_hash") or "unknown", set()).add(str(folder))
    if len(by_commit) <= 1:
        return next(iter(by_commit), "unknown")
    counts = ", ".join(f"{commit[:12]} ({len(folders)} runs)" for commit, folders in
                       sorted(by_commit.items(), key=lambda kv: -len(kv[1])))
    if allow_mixed:
        return f"mixed: {counts}"
    lines = [f"  {commit[:12]}: " + ", ".join(sorted(folders)[:6])
             + (f" and {len(folders) - 6} more" if len(folders) > 6 else "")
             for commit, folders in sorted(by_commit.items())]
    raise SystemExit("these runs were recorded at different commits of the suite, so one table "
                     "would mix code versions:\n" + "\n".join(lines) + "\ndelete the runs of "
                     "the stale commit(s) to re-run them, or pass --allow-mixed-commits")
