"""Summaries of a run's accuracy curve: A_last, A_AUC and forgetting.

A run evaluates its models at several points (every few rounds). FedMosaic reports the accuracy
at the last point (A_last) and the area under the accuracy curve (A_AUC, Koh et al. 2022), which
rewards methods that are good throughout the stream, not only at its end. For dynamic
(task-incremental) streams, forgetting measures how much of each task is lost by the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from evaluators._validate import check_curve, check_same_length, check_sequence
from evaluators.errors import MetricInputError

__all__ = ["a_last", "a_auc", "forgetting"]


def a_last(curve: Sequence[float]) -> float:
    """Accuracy at the final evaluation point: ``curve[-1]``.

    Parameters
    ----------
    curve : list of float
        Scores at the evaluation points, in order (0-100).

    Returns
    -------
    float
        The last score.

    Raises
    ------
    MetricInputError
        If the curve is empty or holds ``None``/NaN/inf (reported with its index).

    Examples
    --------
    >>> a_last([40.0, 55.0, 61.5])
    61.5
    """
    return float(check_curve("curve", curve)[-1])


def a_auc(curve: Sequence[float], points: Sequence[float] | None = None) -> float:
    """Area under the accuracy curve, normalised by the span of the evaluation points.

    With evaluation points x_0 < x_1 < ... < x_K (rounds, or samples seen) and scores
    y_0, ..., y_K, the area is taken with the trapezoid rule and divided by the span::

        A_AUC = sum_{k=1..K} (x_k - x_{k-1}) * (y_k + y_{k-1}) / 2  /  (x_K - x_0)

    so A_AUC is a time-weighted mean accuracy on the same 0-100 scale as the curve, between its
    minimum and maximum. With a single point (K = 0) the span is 0 and A_AUC is that point's
    score. Koh et al. (2022) define A_AUC = sum_i f(i * dn) * dn over evaluations every dn
    samples; normalising that sum by the span gives the same time-weighted mean up to the
    quadrature rule. Used by FedMosaic with evaluation every few rounds.

    Parameters
    ----------
    curve : list of float
        Scores y_k at the evaluation points (0-100).
    points : list of float, optional
        The points x_k, strictly increasing (round numbers or samples seen). Default: equally
        spaced points 0, 1, ..., K.

    Returns
    -------
    float
        A_AUC on the curve's scale.

    Raises
    ------
    MetricInputError
        On an empty curve, ``None``/NaN entries, a length mismatch, or points that do not
        strictly increase.

    Examples
    --------
    >>> a_auc([40.0, 60.0, 80.0], [5, 10, 20])  # (5*50 + 10*70) / 15
    63.333333333333336
    """
    y = check_curve("curve", curve)
    if points is None:
        x = np.arange(len(y), dtype=np.float64)
    else:
        x = check_curve("points", points)
        check_same_length("curve", y, "points", x)
        steps = np.diff(x)
        if (steps <= 0).any():
            k = int(np.argmax(steps <= 0)) + 1
            raise MetricInputError(
                f"points must strictly increase, but points[{k}] = {x[k]} follows "
                f"points[{k - 1}] = {x[k - 1]}"
            )
    if len(y) == 1:
        return float(y[0])
    area = float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))
    return area / float(x[-1] - x[0])


def forgetting(task_curves: Mapping[str, Sequence[float]], task_order: Sequence[str]) -> float:
    """Average forgetting of one client over a task-incremental stream.

    ``task_curves[t]`` holds task t's scores at the evaluation points since t started, ending at
    the final point (so tasks that started later have shorter curves, as with anytime
    evaluation). For every task but the last one learnt,
    ``F_t = max(task_curves[t][:-1]) - task_curves[t][-1]``: the drop from the best earlier score
    to the final one (negative when the task improved, i.e. backward transfer). The result is
    the mean of F_t over those tasks (Chaudhry et al. 2018's forgetting, per client).

    Parameters
    ----------
    task_curves : mapping of task id to list of float
        Per-task score curves (0-100); every task except the last in ``task_order`` needs at
        least two points.
    task_order : list of str
        The client's tasks in the order it learnt them; the last one is excluded.

    Returns
    -------
    float
        Mean forgetting in points of the 0-100 scale.

    Raises
    ------
    MetricInputError
        If fewer than two tasks are given, a task has no curve, a curve is too short or holds
        ``None``/NaN.

    Examples
    --------
    >>> forgetting({"a": [80, 60, 50], "b": [70, 75], "c": [90]}, ["a", "b", "c"])
    12.5
    """
    order = check_sequence("task_order", task_order)
    if len(order) < 2:
        raise MetricInputError(
            f"task_order has {len(order)} task; forgetting needs at least two tasks"
        )
    if len(set(order)) != len(order):
        raise MetricInputError(f"task_order repeats a task: {list(order)!r}")
    drops = []
    for t in order[:-1]:
        if t not in task_curves:
            raise MetricInputError(f"task_curves has no curve for task {t!r}")
        y = check_curve(f"task_curves[{t!r}]", task_curves[t])
        if len(y) < 2:
            raise MetricInputError(
                f"task_curves[{t!r}] has {len(y)} point; forgetting needs a score before the "
                "final one"
            )
        drops.append(float(y[:-1].max() - y[-1]))
    return float(np.mean(drops))
