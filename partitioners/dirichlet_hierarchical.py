"""Two-level (Pachinko-style) Dirichlet split over coarse and fine labels (CIFAR-100)."""

from __future__ import annotations

import numpy as np

from ._common import group_by_client
from ._validate import check_alpha, check_int, check_labels, check_same_length, check_seed

__all__ = ["dirichlet_hierarchical"]


def _normalise(weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Weights restricted to ``mask``, summing to 1; uniform on ``mask`` if all underflowed."""
    w = np.where(mask, weights, 0.0)
    total = w.sum()
    if total > 0 and np.isfinite(total):
        return w / total
    return mask / mask.sum()


def dirichlet_hierarchical(
    fine_labels: np.ndarray,
    coarse_labels: np.ndarray,
    num_clients: int,
    alpha_coarse: float,
    alpha_fine: float,
    *,
    seed: int,
) -> list[np.ndarray]:
    """Split samples with a coarse-then-fine Dirichlet, as pFedMMA's CIFAR-100 script does.

    This is the "noniid-labeldir100" split of pFedMMA's ``datasplit.py`` (a
    Pachinko-allocation split in the style of Reddi et al., 2021): the CIFAR-100
    train and test sets are pooled, and every client draws the same number of
    samples from the pool, without replacement, from its own two-level label
    distribution. Clients draw one after another, in client order:

    1. client ``i`` wants ``q_i = n // N`` samples, plus one for the first
       ``n % N`` clients, so all ``n`` samples are handed out;
    2. it draws coarse weights ``w ~ Dir(alpha_coarse * 1_{num_coarse})`` and, for
       each coarse class ``c``, fine weights ``v_c ~ Dir(alpha_fine * 1_{fine in c})``;
    3. it draws its samples one at a time: a coarse class with probability
       proportional to ``w`` among coarse classes that still have samples, then a
       fine class inside it with probability proportional to ``v_c`` among fine
       classes that still have samples, then a sample of that fine class
       uniformly from those left. When a class runs out, the weights are
       renormalised over the classes that still have samples.

    The draws are made in batches: a batch is drawn from the current fixed
    probabilities and cut just after the first draw that empties a class, which
    has exactly the distribution of drawing one at a time. If all remaining
    weights underflow to zero (very small alpha), the choice falls back to
    uniform over the classes that still have samples.

    The indices point into the pooled array; callers split train and test by index
    afterwards (pFedMMA keeps ``idx < 50000`` as train).

    Parameters
    ----------
    fine_labels, coarse_labels : array-like of int, shape (n,)
        Fine and coarse class of every sample. Each fine class must belong to
        exactly one coarse class.
    num_clients : int
        Number of clients ``1 <= N <= n``.
    alpha_coarse : float
        Concentration of the per-client coarse weights (pFedMMA: 0.3), > 0.
    alpha_fine : float
        Concentration of the per-client fine weights within a coarse class
        (pFedMMA: 10), > 0.
    seed : int
        Seed of ``np.random.default_rng`` (pFedMMA's script uses 12345).

    Returns
    -------
    list of numpy.ndarray
        ``N`` ascending int64 index arrays covering ``range(n)`` exactly once;
        client ``i`` has ``q_i`` samples.

    Raises
    ------
    ValueError
        For mismatched lengths, negative or non-integer labels, a fine class under
        two coarse classes, alpha <= 0, or more clients than samples.

    Examples
    --------
    >>> import numpy as np
    >>> fine = np.arange(40) % 8
    >>> coarse = fine // 4
    >>> parts = dirichlet_hierarchical(fine, coarse, 3, 0.3, 10.0, seed=12345)
    >>> [len(p) for p in parts]
    [14, 13, 13]
    """
    fine = check_labels(fine_labels, "fine_labels")
    coarse = check_labels(coarse_labels, "coarse_labels")
    check_same_length(fine, coarse, "fine_labels", "coarse_labels")
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    a_coarse = float(check_alpha(alpha_coarse, "alpha_coarse"))
    a_fine = float(check_alpha(alpha_fine, "alpha_fine"))
    seed = check_seed(seed)
    n = fine.shape[0]
    if num_clients > n:
        raise ValueError(
            f"num_clients={num_clients} is more than the {n} samples allow; "
            "every client needs at least one sample"
        )

    fine_ids, fine_of_sample, fine_sizes = np.unique(fine, return_inverse=True, return_counts=True)
    pairs = np.unique(np.stack([fine_of_sample, coarse], axis=1), axis=0)
    if pairs.shape[0] != fine_ids.shape[0]:
        dup = pairs[np.flatnonzero(np.diff(pairs[:, 0]) == 0)[0], 0]
        parents = sorted(int(c) for c in pairs[pairs[:, 0] == dup, 1])
        raise ValueError(
            f"fine_labels value {int(fine_ids[dup])} appears under several coarse_labels "
            f"{parents}; each fine class must belong to one coarse class"
        )
    coarse_ids, coarse_of_fine = np.unique(pairs[:, 1], return_inverse=True)
    num_fine, num_coarse = fine_ids.shape[0], coarse_ids.shape[0]

    rng = np.random.default_rng(seed)
    # Per fine class, its samples in random order; consumed from the front.
    perm = rng.permutation(n)
    pool = perm[np.argsort(fine_of_sample[perm], kind="stable")]
    start = np.concatenate(([0], np.cumsum(fine_sizes)[:-1]))
    taken = np.zeros(num_fine, dtype=np.int64)
    remaining = fine_sizes.astype(np.int64)
    client_of = np.empty(n, dtype=np.int64)

    base, extra = divmod(n, num_clients)
    for i in range(num_clients):
        need = base + (1 if i < extra else 0)
        w_coarse = rng.dirichlet(np.full(num_coarse, a_coarse))
        w_fine = np.empty(num_fine)
        for c in range(num_coarse):
            members = np.flatnonzero(coarse_of_fine == c)
            w_fine[members] = rng.dirichlet(np.full(members.shape[0], a_fine))
        while need > 0:
            fine_open = remaining > 0
            coarse_open = np.bincount(coarse_of_fine[fine_open], minlength=num_coarse) > 0
            p_coarse = _normalise(w_coarse, coarse_open)
            p = np.zeros(num_fine)
            for c in np.flatnonzero(coarse_open):
                members = np.flatnonzero(coarse_of_fine == c)
                p[members] = p_coarse[c] * _normalise(w_fine[members], fine_open[members])
            p /= p.sum()
            draws = rng.choice(num_fine, size=need, p=p)
            # Cut the batch just after the first draw that empties a class.
            order = np.argsort(draws, kind="stable")
            sorted_draws = draws[order]
            first = np.searchsorted(sorted_draws, sorted_draws, side="left")
            rank = np.arange(need) - first
            emptying = order[rank == remaining[sorted_draws] - 1]
            accepted = draws[: emptying.min() + 1] if emptying.size else draws
            counts = np.bincount(accepted, minlength=num_fine)
            for f in np.flatnonzero(counts):
                lo = start[f] + taken[f]
                client_of[pool[lo : lo + counts[f]]] = i
            taken += counts
            remaining -= counts
            need -= accepted.shape[0]
    return group_by_client(client_of, num_clients)
