"""Self/Others aggregation of per-client, per-task score matrices, and global vs personalised.

At an evaluation point, every client's (personalised) model is scored on every task, giving a
matrix ``scores[client][task]``. FedMosaic reports two numbers from it:

* **Self**: how well each client does on its own tasks (personalisation);
* **Others**: how well each client's model does on the other clients' tasks (knowledge gained
  from the federation).

For dynamic streams, the "anytime" option counts only the tasks that have started by that point.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluators._validate import check_number, check_same_length, check_sequence
from evaluators.errors import MetricInputError

__all__ = ["SelfOthers", "self_others", "self_others_curves", "personalised_vs_global"]


@dataclass(frozen=True)
class SelfOthers:
    """Self and Others scores at one evaluation point (0-100).

    Attributes
    ----------
    self_score : float
        Mean over clients of the client's mean score on its own tasks.
    others_score : float
        Mean over clients of the client's mean score on the other clients' tasks.
    per_client_self, per_client_others : dict
        The per-client means behind the two averages, keyed by client.
    """

    self_score: float
    others_score: float
    per_client_self: dict[Hashable, float]
    per_client_others: dict[Hashable, float]


def _clients(scores: Any, client_tasks: Any) -> list[tuple[Hashable, Any, Sequence[str]]]:
    """Pair every client's score row with its task list."""
    if isinstance(client_tasks, Mapping):
        if not isinstance(scores, Mapping):
            raise MetricInputError(
                "client_tasks is a mapping but scores is not; key both by client id"
            )
        if not client_tasks:
            raise MetricInputError("client_tasks is empty; pass each client's task list")
        missing = [c for c in client_tasks if c not in scores]
        if missing:
            raise MetricInputError(f"scores has no row for client {missing[0]!r}")
        keys: list[Hashable] = list(client_tasks)
        rows = [(c, scores[c], client_tasks[c]) for c in keys]
    else:
        tasks = check_sequence("client_tasks", client_tasks)
        if isinstance(scores, Mapping):
            missing = [i for i in range(len(tasks)) if i not in scores]
            if missing:
                raise MetricInputError(
                    f"scores has no row for client {missing[0]} (client_tasks is a list, so "
                    "clients are 0..n-1)"
                )
            rows = [(i, scores[i], tasks[i]) for i in range(len(tasks))]
        else:
            check_sequence("scores", scores)
            check_same_length("scores", scores, "client_tasks", tasks)
            rows = [(i, scores[i], tasks[i]) for i in range(len(tasks))]
    out = []
    for c, row, own in rows:
        if row is None or not isinstance(row, Mapping):
            raise MetricInputError(f"scores[{c!r}] must map task id -> score, got {row!r}")
        if own is None or isinstance(own, str) or not isinstance(own, Sequence) or not own:
            raise MetricInputError(
                f"client_tasks[{c!r}] must be a non-empty list of task ids, got {own!r}"
            )
        out.append((c, row, own))
    return out


Started = Collection[str] | int | Mapping[Hashable, Collection[str]] | None


def _started_filter(started: Started, own: Sequence[str], client: Hashable) -> list[str]:
    if isinstance(started, Mapping):
        if client not in started:
            raise MetricInputError(f"started has no entry for client {client!r}; give every "
                                   "client's started tasks")
        started = started[client]
        if isinstance(started, (int, str)):
            raise MetricInputError(f"started[{client!r}] must be a collection of task ids, got "
                                   f"{started!r}")
    if started is None:
        return list(own)
    if isinstance(started, bool):
        raise MetricInputError(f"started must be an int or a set of task ids, got {started!r}")
    if isinstance(started, int):
        if started < 1:
            raise MetricInputError(f"started = {started}; at least one task must have started")
        return list(own[:started])
    return [t for t in own if t in started]


def _row_mean(row: Mapping[str, Any], tasks: Sequence[str], client: Hashable) -> float:
    values = []
    for t in tasks:
        if t not in row:
            raise MetricInputError(
                f"scores[{client!r}] has no score for task {t!r}; evaluate client {client!r} "
                "on every task it is averaged over"
            )
        values.append(check_number(f"scores[{client!r}][{t!r}]", row[t]))
    return float(np.mean(values))


def self_others(
    scores: Mapping[Hashable, Mapping[str, float]] | Sequence[Mapping[str, float]],
    client_tasks: Mapping[Hashable, Sequence[str]] | Sequence[Sequence[str]],
    started: Started = None,
) -> SelfOthers:
    """Self and Others at one evaluation point.

    With C clients, ``T_c`` the tasks of client c and ``s[c][t]`` client c's model's score on
    task t::

        Self   = 1/C * sum_c mean_{t in T_c} s[c][t]
        Others = 1/C * sum_c mean_{t in O_c} s[c][t],   O_c = (union_{c' != c} T_c') minus T_c

    Tasks count once in ``O_c`` even if several other clients hold them. Clients weigh the same
    whatever their number of tasks or samples.

    **Anytime.** With ``started`` given, only tasks that have started enter both means:
    ``started = k`` keeps the first k tasks of every client's list (task-incremental streams
    where all clients move to their next task together); a set of task ids keeps those tasks;
    a mapping ``{client: task ids}`` gives each client's own started tasks (a runtime knows
    them from each client's stream).

    Parameters
    ----------
    scores : mapping or list
        ``scores[client][task]`` -> score (0-100). A list is indexed by client position.
    client_tasks : mapping or list
        Each client's own tasks, in stream order; keyed like ``scores`` (a list pairs with a
        list, or with a mapping keyed 0..n-1).
    started : int, set of str or mapping of client to set of str, optional
        Anytime evaluation: the number of tasks started per client, the started task ids, or
        each client's started task ids.

    Returns
    -------
    SelfOthers
        The two means and the per-client values behind them.

    Raises
    ------
    MetricInputError
        If fewer than two clients are given, a client has no (started) own or other task, or a
        needed score is missing, ``None`` or NaN (reported with client and task).

    Examples
    --------
    >>> s = {0: {"a": 80, "b": 20}, 1: {"a": 40, "b": 60}}
    >>> r = self_others(s, [["a"], ["b"]])
    >>> (r.self_score, r.others_score)
    (70.0, 30.0)
    """
    rows = _clients(scores, client_tasks)
    if len(rows) < 2:
        raise MetricInputError(f"{len(rows)} client given; Self/Others needs at least two clients")
    active = {c: _started_filter(started, own, c) for c, _, own in rows}
    per_self: dict[Hashable, float] = {}
    per_others: dict[Hashable, float] = {}
    for c, row, own in rows:
        mine = active[c]
        if not mine:
            raise MetricInputError(f"client {c!r} has no started task among {list(own)!r}")
        per_self[c] = _row_mean(row, mine, c)
        own_set = set(own)
        others: list[str] = []
        seen: set[str] = set()
        for c2, _, _ in rows:
            if c2 == c:
                continue
            for t in active[c2]:
                if t not in own_set and t not in seen:
                    seen.add(t)
                    others.append(t)
        if not others:
            raise MetricInputError(
                f"client {c!r} has no (started) task of another client to score Others on"
            )
        per_others[c] = _row_mean(row, others, c)
    return SelfOthers(
        self_score=float(np.mean(list(per_self.values()))),
        others_score=float(np.mean(list(per_others.values()))),
        per_client_self=per_self,
        per_client_others=per_others,
    )


def self_others_curves(
    scores_per_point: Sequence[Any],
    client_tasks: Mapping[Hashable, Sequence[str]] | Sequence[Sequence[str]],
    started_per_point: Sequence[Started] | None = None,
) -> tuple[list[float], list[float]]:
    """Self and Others at every evaluation point, ready for :func:`a_last` and :func:`a_auc`.

    Parameters
    ----------
    scores_per_point : list
        One ``scores[client][task]`` matrix per evaluation point, in order.
    client_tasks : mapping or list
        Each client's own tasks (see :func:`self_others`).
    started_per_point : list, optional
        Anytime evaluation: the ``started`` argument of :func:`self_others` for each point.

    Returns
    -------
    (self_curve, others_curve)
        Two lists with one value per evaluation point.

    Examples
    --------
    >>> pts = [{0: {"a": 50, "b": 10}, 1: {"a": 20, "b": 40}},
    ...        {0: {"a": 70, "b": 30}, 1: {"a": 40, "b": 60}}]
    >>> self_others_curves(pts, [["a"], ["b"]])
    ([45.0, 65.0], [15.0, 35.0])
    """
    check_sequence("scores_per_point", scores_per_point)
    if started_per_point is not None:
        check_same_length(
            "scores_per_point", scores_per_point, "started_per_point", started_per_point
        )
    self_curve: list[float] = []
    others_curve: list[float] = []
    for k, matrix in enumerate(scores_per_point):
        started = started_per_point[k] if started_per_point is not None else None
        try:
            r = self_others(matrix, client_tasks, started)
        except MetricInputError as exc:
            raise MetricInputError(f"evaluation point {k}: {exc}") from exc
        self_curve.append(r.self_score)
        others_curve.append(r.others_score)
    return self_curve, others_curve


def personalised_vs_global(
    personalised: Mapping[Hashable, float],
    global_scores: Mapping[Hashable, float],
    weights: Mapping[Hashable, float] | None = None,
) -> dict[str, float]:
    """Personalised and global-model evaluation side by side (FediLoRA's "global" table).

    ``personalised[c]`` is client c's own model on its test set; ``global_scores[c]`` is the
    single global (aggregated) model on the same test set. Each column is the mean over clients,
    weighted by ``weights[c]`` (e.g. test-set sizes) when given, else unweighted::

        personalised = sum_c w_c p_c / sum_c w_c,   global = sum_c w_c g_c / sum_c w_c

    Parameters
    ----------
    personalised, global_scores : mapping of client to float
        Per-client scores (0-100) with the same clients.
    weights : mapping of client to float, optional
        Non-negative client weights with a positive sum.

    Returns
    -------
    dict
        ``{"personalised", "global", "gap"}`` with gap = personalised - global.

    Raises
    ------
    MetricInputError
        On empty input, different client sets, bad weights or ``None``/NaN scores.

    Examples
    --------
    >>> personalised_vs_global({"a": 80, "b": 60}, {"a": 70, "b": 50}, {"a": 3, "b": 1})
    {'personalised': 75.0, 'global': 65.0, 'gap': 10.0}
    """
    if not personalised:
        raise MetricInputError("personalised is empty; pass one score per client")
    if set(personalised) != set(global_scores):
        extra = set(personalised) ^ set(global_scores)
        raise MetricInputError(
            f"personalised and global_scores cover different clients (e.g. {next(iter(extra))!r})"
        )
    clients = list(personalised)
    p = np.array([check_number(f"personalised[{c!r}]", personalised[c]) for c in clients])
    g = np.array([check_number(f"global_scores[{c!r}]", global_scores[c]) for c in clients])
    if weights is None:
        w = np.ones(len(clients))
    else:
        missing = [c for c in clients if c not in weights]
        if missing:
            raise MetricInputError(f"weights has no entry for client {missing[0]!r}")
        w = np.array([check_number(f"weights[{c!r}]", weights[c]) for c in clients])
        if (w < 0).any() or w.sum() <= 0:
            raise MetricInputError("weights must be non-negative with a positive sum")
    pers = float(np.dot(w, p) / w.sum())
    glob = float(np.dot(w, g) / w.sum())
    return {"personalised": pers, "global": glob, "gap": pers - glob}
