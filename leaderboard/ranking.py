"""Ranking per benchmark and scenario, with tie groups from overlapping 95% intervals.

Algorithm (per benchmark, version and scenario; reported and reproduced entries together):

1. The primary metric is the protocol's (``leaderboard.metrics.primary_metric``): Self A_last
   for DRAKE/HFLB/drake-synth, HM for base/novel, accuracy for classification, the paper's
   main metric for generation benchmarks. Entries without it are listed last, unranked.
2. Sort by the primary metric's mean, best first (descending, or ascending for metrics where
   lower is better such as ``mse``); ties are broken by method name, then provenance.
3. Each entry's interval is its ``ci95``; an entry without one (a single seed, or a paper
   that reports none) uses the point interval ``[mean, mean]``.
4. Greedy grouping: the first entry opens group 1 and is its leader. Walking down the sorted
   list, an entry joins the current group if its interval overlaps the leader's interval,
   i.e. (higher is better) its upper bound is not below the leader's lower bound; otherwise
   it opens the next group and becomes its leader. For lower-is-better metrics the mirror
   rule applies (a new group starts when the entry's lower bound is above the leader's upper
   bound).

Entries in one group are not distinguishable at 95% from the group's leader; the group
number is the displayed rank. Overlap with the leader (not with any member) keeps groups
from chaining across the whole table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from leaderboard.metrics import metric_spec, primary_metric
from leaderboard.model import Entry, Leaderboard


@dataclass(frozen=True)
class RankedRow:
    """One entry with its rank group (None when it lacks the primary metric)."""

    group: int | None
    entry: Entry
    value: float | None
    interval: tuple[float, float] | None
    label: str = ""
    """The method's name, with the hyper-parameters that set it apart from another row of the
    same method and provenance on its board (:func:`row_labels`)."""


@dataclass(frozen=True)
class RankedBoard:
    """The ranked entries of one benchmark version and scenario."""

    benchmark: str
    version: str
    scenario: str
    protocol: str
    primary: str
    higher_is_better: bool
    rows: tuple[RankedRow, ...]


def _interval(entry: Entry, metric: str) -> tuple[float, float] | None:
    stats = entry.metrics.get(metric)
    if stats is None:
        return None
    if stats.ci95 is not None:
        return (stats.ci95[0], stats.ci95[1])
    return (stats.mean, stats.mean)


def _param(value: object) -> str:
    return "unset" if value is None else str(value)


def row_labels(entries: Sequence[Entry]) -> list[str]:
    """A display label per entry of one board: the method's name, and where other entries share
    its method and provenance, the hyper-parameters whose values differ among them (``disentafl
    (post_steps=10)``), or the config hash when only the config differs."""
    siblings: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        siblings.setdefault((entry.method.name, entry.provenance), []).append(entry)
    labels = []
    for entry in entries:
        group = siblings[(entry.method.name, entry.provenance)]
        if len(group) == 1:
            labels.append(entry.method.name)
            continue
        keys = sorted({k for e in group for k in e.method.hyperparameters})
        differ = [k for k in keys
                  if len({_param(e.method.hyperparameters.get(k)) for e in group}) > 1]
        if differ:
            shown = ", ".join(f"{k}={_param(entry.method.hyperparameters.get(k))}"
                              for k in differ)
        else:
            shown = f"config {(entry.method.config_sha256 or 'none')[:8]}"
        labels.append(f"{entry.method.name} ({shown})")
    return labels


def rank_entries(
    entries: Iterable[Entry], metric: str, higher_is_better: bool
) -> tuple[RankedRow, ...]:
    """Sort entries by ``metric`` and assign greedy CI-overlap rank groups (module docstring)."""
    scored = [e for e in entries if metric in e.metrics]
    unscored = sorted(
        (e for e in entries if metric not in e.metrics),
        key=lambda e: (e.method.name, e.provenance),
    )
    sign = -1.0 if higher_is_better else 1.0
    scored.sort(key=lambda e: (sign * e.metrics[metric].mean, e.method.name, e.provenance))
    rows: list[RankedRow] = []
    group = 0
    leader: tuple[float, float] | None = None
    for entry in scored:
        interval = _interval(entry, metric)
        assert interval is not None
        lo, hi = interval
        if leader is None:
            starts = True
        elif higher_is_better:
            starts = hi < leader[0]
        else:
            starts = lo > leader[1]
        if starts:
            group += 1
            leader = interval
        rows.append(RankedRow(group, entry, entry.metrics[metric].mean, interval))
    rows.extend(RankedRow(None, e, None, None) for e in unscored)
    labels = row_labels([r.entry for r in rows])
    return tuple(replace(r, label=label) for r, label in zip(rows, labels))


def rank(
    board: Leaderboard | Sequence[Entry],
    benchmark: str | None = None,
    scenario: str | None = None,
) -> list[RankedBoard]:
    """Rank every (benchmark, version, scenario) of a leaderboard, optionally filtered.

    Returns
    -------
    list of RankedBoard
        Sorted by benchmark, version and scenario.
    """
    entries = board.entries if isinstance(board, Leaderboard) else list(board)
    groups: dict[tuple[str, str, str], list[Entry]] = {}
    for entry in entries:
        if benchmark is not None and entry.benchmark.name != benchmark:
            continue
        if scenario is not None and entry.scenario.name != scenario:
            continue
        key = (entry.benchmark.name, entry.benchmark.version, entry.scenario.name)
        groups.setdefault(key, []).append(entry)
    out = []
    for (bench, version, scen), members in sorted(groups.items()):
        protocol = members[0].protocol
        primary = primary_metric(protocol, bench, scen)
        higher = metric_spec(primary).higher_is_better
        out.append(
            RankedBoard(
                bench,
                version,
                scen,
                protocol,
                primary,
                higher,
                rank_entries(members, primary, higher),
            )
        )
    return out
