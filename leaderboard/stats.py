"""Summaries of a metric over seeds: mean, sample std and a Student-t 95% interval.

For per-seed values x_1..x_n:

- mean = (1/n) Σ x_i
- std  = sqrt(Σ (x_i - mean)² / (n - 1)), the sample standard deviation (ddof = 1); 0 for n = 1
- ci95 = mean ± t_{0.975, n-1} · std / sqrt(n), the two-sided 95% confidence interval of the
  mean under a normal model; undefined (None) for n = 1.

With 3 seeds, t_{0.975, 2} ≈ 4.303, so the interval half-width is ≈ 2.48 · std. The interval is
not clipped to the metric's range: it describes uncertainty about the mean.

Examples
--------
>>> s = summarize([1.0, 2.0, 3.0])
>>> s["mean"], s["std"]
(2.0, 1.0)
>>> [round(v, 4) for v in s["ci95"]]
[-0.4841, 4.4841]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy.stats import t as student_t

from leaderboard.errors import SubmissionError

TOLERANCE = 1e-6
"""Absolute tolerance when checking stored mean/std/CI against per-seed values."""


def summarize(per_seed: Sequence[float]) -> dict[str, object]:
    """Mean, sample std (ddof=1) and Student-t 95% CI of per-seed values.

    Parameters
    ----------
    per_seed : sequence of float
        One value per seed, in seed order; at least one, all finite.

    Returns
    -------
    dict
        ``{"mean", "std", "ci95", "per_seed"}`` in the shape of
        :class:`leaderboard.model.MetricStats`; ``ci95`` is None for a single seed.
    """
    values = [float(v) for v in per_seed]
    if not values:
        raise SubmissionError("per_seed: needs at least one value")
    if not all(math.isfinite(v) for v in values):
        raise SubmissionError(f"per_seed: all values must be finite, got {values!r}")
    n = len(values)
    mean = math.fsum(values) / n
    if n == 1:
        return {"mean": mean, "std": 0.0, "ci95": None, "per_seed": values}
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(student_t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return {"mean": mean, "std": std, "ci95": [mean - half, mean + half], "per_seed": values}


def check_consistent(
    where: str,
    mean: float,
    std: float | None,
    ci95: Sequence[float] | None,
    per_seed: Sequence[float] | None,
    n_seeds: int | None,
) -> None:
    """Check stored statistics against per-seed values (when given) and against each other.

    Always: ``lo <= mean <= hi`` when a CI is given, and ``len(per_seed) == n_seeds``.
    With per-seed values: mean, std and CI equal :func:`summarize` to :data:`TOLERANCE`.

    Raises
    ------
    SubmissionError
        Naming the inconsistent field and the expected value.
    """
    if ci95 is not None:
        lo, hi = ci95
        if not lo <= mean <= hi:
            raise SubmissionError(
                f"{where}.ci95: [{lo}, {hi}] must contain the mean {mean}; lo <= mean <= hi"
            )
    if per_seed is None:
        return
    if n_seeds is not None and len(per_seed) != n_seeds:
        raise SubmissionError(
            f"{where}.per_seed: {len(per_seed)} values for {n_seeds} seeds; give one per seed"
        )
    expected = summarize(per_seed)
    if abs(expected["mean"] - mean) > TOLERANCE:
        raise SubmissionError(
            f"{where}.mean: {mean} is not the mean of per_seed ({expected['mean']})"
        )
    if std is None or abs(expected["std"] - std) > TOLERANCE:
        raise SubmissionError(
            f"{where}.std: {std} is not the sample std (ddof=1) of per_seed ({expected['std']})"
        )
    exp_ci = expected["ci95"]
    if exp_ci is None:
        if ci95 is not None:
            raise SubmissionError(f"{where}.ci95: must be null for a single seed")
    elif ci95 is None or any(abs(a - b) > TOLERANCE for a, b in zip(ci95, exp_ci)):
        raise SubmissionError(
            f"{where}.ci95: {ci95} is not the Student-t 95% interval of per_seed ({exp_ci})"
        )
