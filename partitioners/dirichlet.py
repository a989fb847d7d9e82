"""Label-skew split: per-class Dirichlet proportions (the NIID-Bench / pFedMMA rule)."""

from __future__ import annotations

import numpy as np

from ._common import group_by_client
from ._validate import check_alpha, check_int, check_labels, check_seed

__all__ = ["dirichlet"]


def _describe_alpha(alpha: np.ndarray) -> str:
    if alpha.ndim == 0:
        return f"alpha={float(alpha)}"
    return f"alpha=per-client vector in [{float(alpha.min())}, {float(alpha.max())}]"


def dirichlet_client_of(
    labels: np.ndarray,
    num_clients: int,
    alpha: np.ndarray,
    rng: np.random.Generator,
    *,
    min_size: int,
    balance: bool,
    max_retries: int,
    context: str = "dirichlet",
) -> np.ndarray:
    """Return the client of every sample under the per-class Dirichlet rule.

    Arguments are assumed checked. ``alpha`` has shape ``()`` or ``(num_clients,)``.
    Used by :func:`dirichlet` and, once per domain, by :func:`by_domain`.
    """
    n = labels.shape[0]
    # Group once: a random permutation, then a stable sort by label, puts the
    # samples of each class together in random order (classes ascending).
    perm = rng.permutation(n)
    order = perm[np.argsort(labels[perm], kind="stable")]
    _, class_sizes = np.unique(labels, return_counts=True)
    alpha_vec = np.broadcast_to(alpha, (num_clients,)).astype(np.float64)
    cap = n / num_clients
    clients = np.arange(num_clients)

    smallest, smallest_client = 0, 0
    for _ in range(max_retries):
        sizes = np.zeros(num_clients, dtype=np.int64)
        counts = np.empty((class_sizes.shape[0], num_clients), dtype=np.int64)
        for k, n_k in enumerate(class_sizes):
            p = rng.dirichlet(alpha_vec)
            if balance:
                p = p * (sizes < cap)
            total = p.sum()
            if total > 0 and np.isfinite(total):
                p = p / total
            else:
                # Every eligible weight underflowed to 0 (tiny alpha): take the
                # alpha -> 0 limit, the whole class to one eligible client.
                eligible = np.flatnonzero(sizes < cap) if balance else clients
                p = np.zeros(num_clients)
                p[rng.choice(eligible)] = 1.0
            cuts = (np.cumsum(p) * n_k).astype(np.int64)[:-1]
            row = np.diff(np.concatenate(([0], cuts, [n_k])))
            counts[k] = row
            sizes += row
        smallest_client = int(np.argmin(sizes))
        smallest = int(sizes[smallest_client])
        if smallest >= min_size:
            client_of = np.empty(n, dtype=np.int64)
            client_of[order] = np.repeat(np.tile(clients, class_sizes.shape[0]), counts.ravel())
            return client_of
    raise ValueError(
        f"{context}: no split with every client >= min_size={min_size} after "
        f"max_retries={max_retries} draws ({_describe_alpha(alpha)}, "
        f"num_clients={num_clients}, {n} samples); in the last draw the smallest client "
        f"(client {smallest_client}) had {smallest} samples. Lower min_size or raise alpha."
    )


def dirichlet(
    labels: np.ndarray,
    num_clients: int,
    alpha: float | np.ndarray,
    *,
    seed: int,
    min_size: int = 10,
    balance: bool = True,
    max_retries: int = 100,
) -> list[np.ndarray]:
    """Split samples across clients with per-class Dirichlet label skew.

    This is the "noniid-labeldir" rule of NIID-Bench (Li et al., 2022) that
    pFedMMA's ``datasplit.py`` and its DomainNet/Office splits use. For each class
    ``k`` in ascending order:

    1. draw client proportions ``p ~ Dir(alpha)``, where ``alpha`` is
       ``alpha * 1_N`` for a number or the given per-client vector;
    2. with ``balance``, set ``p_j = 0`` for every client ``j`` that already holds
       ``>= n / num_clients`` samples and renormalise ``p``;
    3. cut the class's samples (in random order) at
       ``int(cumsum(p)[:-1] * n_k)``, so client ``j`` gets the ``j``-th piece.

    If any client then holds fewer than ``min_size`` samples, the whole draw is
    repeated, up to ``max_retries`` times. If every eligible weight underflows to
    zero (possible for alpha below about 0.01) the class goes whole to one eligible
    client chosen uniformly, the alpha -> 0 limit of the rule.

    Small ``alpha`` gives few classes per client; large ``alpha`` approaches an
    IID split. The whole draw is vectorised per class (one sort of the labels,
    then one Dirichlet draw and one cumulative sum per class), so a million labels
    over a thousand classes and clients take seconds.

    Parameters
    ----------
    labels : array-like of int, shape (n,)
        Class id of every sample, non-negative integers.
    num_clients : int
        Number of clients ``N >= 1``.
    alpha : float or array-like of shape (N,)
        Dirichlet concentration, > 0 and finite. A vector gives each client its
        own; without capping, client ``j``'s expected share of every class is then
        ``alpha_j / sum(alpha)``.
    seed : int
        Seed of ``np.random.default_rng``; the same seed gives the same split.
    min_size : int, default 10
        Every client must end with at least this many samples (NIID-Bench uses 10,
        pFedMMA's DomainNet/Office split 2).
    balance : bool, default True
        Apply the capping rule of step 2.
    max_retries : int, default 100
        Number of full draws tried before giving up.

    Returns
    -------
    list of numpy.ndarray
        ``N`` ascending int64 index arrays covering ``range(n)`` exactly once.

    Raises
    ------
    ValueError
        For bad arguments (naming the argument), or when no draw within
        ``max_retries`` meets ``min_size``; that message names alpha, min_size and
        the smallest client, and suggests lowering min_size or raising alpha.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.repeat(np.arange(4), 50)
    >>> parts = dirichlet(labels, 4, 0.5, seed=0, min_size=5)
    >>> len(parts), sum(len(p) for p in parts)
    (4, 200)
    >>> again = dirichlet(labels, 4, 0.5, seed=0, min_size=5)
    >>> all(np.array_equal(a, b) for a, b in zip(parts, again))
    True
    """
    labels = check_labels(labels)
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    alpha_arr = check_alpha(alpha, size=num_clients)
    seed = check_seed(seed)
    min_size = check_int(min_size, "min_size", minimum=0)
    max_retries = check_int(max_retries, "max_retries", minimum=1)
    n = labels.shape[0]
    if num_clients > n:
        raise ValueError(
            f"num_clients={num_clients} is more than the {n} samples allow; "
            "every client needs at least one sample"
        )
    if num_clients * min_size > n:
        raise ValueError(
            f"num_clients * min_size = {num_clients} * {min_size} exceeds the {n} samples; "
            "lower min_size or num_clients"
        )
    rng = np.random.default_rng(seed)
    client_of = dirichlet_client_of(
        labels,
        num_clients,
        alpha_arr,
        rng,
        min_size=min_size,
        balance=bool(balance),
        max_retries=max_retries,
    )
    return group_by_client(client_of, num_clients)
