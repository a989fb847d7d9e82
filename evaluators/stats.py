"""Uncertainty of reported numbers: mean ± std over seeds and bootstrap confidence intervals.

The papers report mean ± standard deviation over a few seeds. That says how much training
randomness moves a number, not how much the finite set of clients and test samples does; the
two-level bootstrap here gives that confidence interval, which leaderboard users ask for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluators._validate import check_curve, check_sequence
from evaluators.errors import MetricInputError

__all__ = ["MeanStd", "BootstrapCI", "mean_std", "bootstrap_ci"]


@dataclass(frozen=True)
class MeanStd:
    """A mean with its standard deviation over ``n`` values."""

    mean: float
    std: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.2f} ± {self.std:.2f}"


@dataclass(frozen=True)
class BootstrapCI:
    """A point estimate with a percentile bootstrap confidence interval."""

    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int
    seed: int

    def __str__(self) -> str:
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"


def mean_std(values: Sequence[float], ddof: int = 1) -> MeanStd:
    """Mean and standard deviation of values (e.g. one score per seed).

    ``std = sqrt(sum (x - mean)^2 / (n - ddof))``. The default ``ddof=1`` is the sample standard
    deviation, the usual choice for a few seeds drawn from all possible seeds; with a single value
    the standard deviation is reported as 0.

    Parameters
    ----------
    values : list of float
        The values, e.g. a metric under seeds 0, 1, 2.
    ddof : int
        Delta degrees of freedom (1: sample std; 0: population std, as ``numpy.std``).

    Returns
    -------
    MeanStd
        ``mean``, ``std`` and ``n``; ``str()`` gives ``"61.20 ± 1.05"``.

    Raises
    ------
    MetricInputError
        On an empty list or ``None``/NaN values (reported with the index), or a bad ``ddof``.

    Examples
    --------
    >>> mean_std([60.0, 62.0, 64.0])
    MeanStd(mean=62.0, std=2.0, n=3)
    """
    x = check_curve("values", values)
    if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
        raise MetricInputError(f"ddof must be a non-negative int, got {ddof!r}")
    if len(x) == 1:
        return MeanStd(float(x[0]), 0.0, 1)
    if len(x) <= ddof:
        raise MetricInputError(f"ddof={ddof} needs more than {ddof} values, got {len(x)}")
    return MeanStd(float(x.mean()), float(x.std(ddof=ddof)), len(x))


def bootstrap_ci(
    per_client_scores: Sequence[Sequence[float]],
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> BootstrapCI:
    """Two-level percentile bootstrap confidence interval over clients and their samples.

    The statistic is the mean over clients of each client's mean per-sample score (clients weigh
    the same, as in Self/Others). One bootstrap replicate:

    1. draw C clients with replacement from the C clients;
    2. for every drawn client (every draw separately, also repeats), draw its n_c per-sample
       scores with replacement and take their mean;
    3. average those C means.

    The interval is the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of ``n_resamples``
    replicates (numpy's linear interpolation). All draws come from
    ``numpy.random.default_rng(seed)``, so the interval is reproducible. The estimate is the
    statistic on the original data.

    Parameters
    ----------
    per_client_scores : list of list of float
        For each client, its per-sample scores (e.g. 0 or 100 for a wrong or right answer, or a
        per-sample metric).
    n_resamples : int
        Bootstrap replicates (default 1000).
    level : float
        Confidence level in (0, 1) (default 0.95).
    seed : int
        Seed of the random generator.

    Returns
    -------
    BootstrapCI
        ``estimate``, ``low``, ``high`` and the settings used.

    Raises
    ------
    MetricInputError
        On no clients, a client without samples, ``None``/NaN scores, or bad settings.

    Examples
    --------
    >>> ci = bootstrap_ci([[100, 0, 100, 100], [0, 100, 0, 0]], n_resamples=200, seed=1)
    >>> ci.estimate
    50.0
    """
    clients = check_sequence("per_client_scores", per_client_scores)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise MetricInputError(f"n_resamples must be a positive int, got {n_resamples!r}")
    if not (isinstance(level, float) and 0.0 < level < 1.0):
        raise MetricInputError(f"level must be a float in (0, 1), got {level!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise MetricInputError(f"seed must be an int, got {seed!r}")
    arrays = [check_curve(f"per_client_scores[{c}]", s) for c, s in enumerate(clients)]
    n_clients = len(arrays)
    estimate = float(np.mean([a.mean() for a in arrays]))

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_clients, size=(n_resamples, n_clients))
    means = np.empty((n_resamples, n_clients), dtype=np.float64)
    # Resample within each client for all the slots that drew it, in chunks to bound memory.
    chunk_elems = 4_000_000
    for c, scores in enumerate(arrays):
        slots = np.flatnonzero(draws == c)
        if slots.size == 0:
            continue
        n_c = scores.size
        per_chunk = max(1, chunk_elems // n_c)
        for start in range(0, slots.size, per_chunk):
            part = slots[start : start + per_chunk]
            idx = rng.integers(0, n_c, size=(part.size, n_c))
            means.flat[part] = scores[idx].mean(axis=1)
    replicates = means.mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return BootstrapCI(
        estimate=estimate,
        low=float(low),
        high=float(high),
        level=level,
        n_resamples=n_resamples,
        seed=int(seed),
    )
