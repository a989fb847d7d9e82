"""Per-domain accuracy for feature-shift benchmarks (DomainNet, Office-Caltech10)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np

from evaluators._validate import check_number
from evaluators.errors import MetricInputError
from evaluators.stats import MeanStd

__all__ = ["per_domain_accuracy"]


def per_domain_accuracy(
    client_scores: Mapping[Hashable, float],
    client_domains: Mapping[Hashable, str],
    ddof: int = 0,
) -> dict[str, MeanStd]:
    """Mean ± std of client accuracies within each domain, as pFedMMA reports them.

    For domain d with clients C_d: ``mean_d = mean_{c in C_d} acc_c`` and
    ``std_d = sqrt(sum_{c in C_d} (acc_c - mean_d)^2 / (|C_d| - ddof))``. The default
    ``ddof=0`` treats a domain's clients as the whole population (``numpy.std``); a domain with
    one client has std 0.

    Parameters
    ----------
    client_scores : mapping of client to float
        Each client's accuracy (0-100).
    client_domains : mapping of client to str
        Each client's domain; must cover every scored client.
    ddof : int
        Delta degrees of freedom of the standard deviation.

    Returns
    -------
    dict of str to MeanStd
        One entry per domain, in order of first appearance in ``client_scores``.

    Raises
    ------
    MetricInputError
        On empty input, a client without a domain, or ``None``/NaN scores.

    Examples
    --------
    >>> r = per_domain_accuracy({"c0": 70, "c1": 90, "c2": 50}, {"c0": "sketch", "c1": "sketch",
    ...                         "c2": "real"})
    >>> str(r["sketch"]), r["real"].std
    ('80.00 ± 10.00', 0.0)
    """
    if not client_scores:
        raise MetricInputError("client_scores is empty; pass one accuracy per client")
    if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
        raise MetricInputError(f"ddof must be a non-negative int, got {ddof!r}")
    groups: dict[str, list[float]] = {}
    for c, score in client_scores.items():
        if c not in client_domains:
            raise MetricInputError(f"client_domains has no domain for client {c!r}")
        domain = client_domains[c]
        if not isinstance(domain, str) or not domain:
            raise MetricInputError(f"client_domains[{c!r}] must be a domain name, got {domain!r}")
        groups.setdefault(domain, []).append(check_number(f"client_scores[{c!r}]", score))
    out: dict[str, MeanStd] = {}
    for domain, values in groups.items():
        x = np.asarray(values)
        std = float(x.std(ddof=ddof)) if len(x) > ddof and len(x) > 1 else 0.0
        out[domain] = MeanStd(float(x.mean()), std, len(x))
    return out
