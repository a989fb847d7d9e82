"""Label-skew split: per-class Dirichlet proportions (the NIID-Bench / pFedMMA rule)."""

from __future__ import annotations

import numpy as np

from ._common import group_by_client
from ._validate import check_alpha, check_int, check_labels, check_seed

__all__ = ["dirichlet", "dirichlet_train_test"]


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
    test_labels: np.ndarray | None = None,
    test_min_size: int = 0,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Return the client of every sample under the per-class Dirichlet rule.

    Arguments are assumed checked. ``alpha`` has shape ``()`` or ``(num_clients,)``.
    Used by :func:`dirichlet` and, once per domain, by :func:`by_domain`.

    With ``test_labels``, the test samples of each class are cut with the same
    proportions ``p`` as its training samples (pFedMMA's ``datasplit.py``), a draw
    is kept only when every client also has ``test_min_size`` test samples, and the
    pair ``(train clients, test clients)`` is returned. Without, the random stream
    is exactly that of the training-only rule.
    """
    n = labels.shape[0]
    # Group once: a random permutation, then a stable sort by label, puts the
    # samples of each class together in random order (classes ascending).
    perm = rng.permutation(n)
    order = perm[np.argsort(labels[perm], kind="stable")]
    classes, class_sizes = np.unique(labels, return_counts=True)
    paired = test_labels is not None
    if paired:
        unknown = np.setdiff1d(test_labels, classes)
        if unknown.size:
            raise ValueError(f"{context}: test classes {unknown[:5].tolist()} have no training "
                             f"sample, so no proportions to split them by")
        perm_t = rng.permutation(test_labels.shape[0])
        order_t = perm_t[np.argsort(test_labels[perm_t], kind="stable")]
        test_sizes = np.array([int((test_labels == k).sum()) for k in classes], dtype=np.int64)
    alpha_vec = np.broadcast_to(alpha, (num_clients,)).astype(np.float64)
    cap = n / num_clients
    clients = np.arange(num_clients)

    smallest, smallest_client, which = 0, 0, "samples"
    for _ in range(max_retries):
        sizes = np.zeros(num_clients, dtype=np.int64)
        counts = np.empty((class_sizes.shape[0], num_clients), dtype=np.int64)
        if paired:
            test_counts = np.empty_like(counts)
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
            counts[k] = _cut(p, n_k)
            sizes += counts[k]
            if paired:
                test_counts[k] = _cut(p, test_sizes[k])
        smallest_client = int(np.argmin(sizes))
        smallest, which = int(sizes[smallest_client]), "samples"
        ok = smallest >= min_size
        if ok and paired:
            held = test_counts.sum(axis=0)
            if int(held.min()) < test_min_size:
                ok = False
                smallest_client = int(np.argmin(held))
                smallest, which = int(held[smallest_client]), "test samples"
        if ok:
            client_of = np.empty(n, dtype=np.int64)
            client_of[order] = np.repeat(np.tile(clients, class_sizes.shape[0]), counts.ravel())
            if not paired:
                return client_of
            test_of = np.empty(test_labels.shape[0], dtype=np.int64)
            test_of[order_t] = np.repeat(np.tile(clients, class_sizes.shape[0]),
                                         test_counts.ravel())
            return client_of, test_of
    raise ValueError(
        f"{context}: no split with every client >= min_size={min_size}"
        f"{f' (and test_min_size={test_min_size})' if paired else ''} after "
        f"max_retries={max_retries} draws ({_describe_alpha(alpha)}, "
        f"num_clients={num_clients}, {n} samples); in the last draw the smallest client "
        f"(client {smallest_client}) had {smallest} {which}. Lower min_size or raise alpha."
    )


def _cut(p: np.ndarray, n_k: int) -> np.ndarray:
    """Client counts of a class of ``n_k`` samples cut at ``int(cumsum(p)[:-1] * n_k)``."""
    cuts = (np.cumsum(p) * n_k).astype(np.int64)[:-1]
    return np.diff(np.concatenate(([0], cuts, [n_k])))


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


def dirichlet_train_test(
    train_labels: np.ndarray,
    test_labels: np.ndarray,
    num_clients: int,
    alpha: float | np.ndarray,
    *,
    seed: int,
    min_size: int = 10,
    test_min_size: int = 1,
    balance: bool = True,
    max_retries: int = 100,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:func:`dirichlet` over the training samples, with each class's test samples cut by the
    same client proportions, as pFedMMA's ``datasplit.py`` splits CIFAR: client ``j`` gets
    about the same share of class ``k`` in test as in train. A draw is redrawn until every
    client has ``min_size`` training and ``test_min_size`` test samples.

    Returns ``(train_parts, test_parts)``, each ``N`` ascending index arrays covering its
    split exactly once. The random stream differs from :func:`dirichlet`'s (the test
    permutation is drawn after the training one).

    Examples
    --------
    >>> import numpy as np
    >>> train, test = np.repeat(np.arange(3), 40), np.repeat(np.arange(3), 10)
    >>> tr, te = dirichlet_train_test(train, test, 2, 0.5, seed=0, min_size=5)
    >>> sum(map(len, tr)), sum(map(len, te))
    (120, 30)
    """
    labels = check_labels(train_labels)
    tests = check_labels(test_labels)
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    alpha_arr = check_alpha(alpha, size=num_clients)
    seed = check_seed(seed)
    min_size = check_int(min_size, "min_size", minimum=0)
    test_min_size = check_int(test_min_size, "test_min_size", minimum=0)
    max_retries = check_int(max_retries, "max_retries", minimum=1)
    if num_clients * max(min_size, 1) > labels.shape[0]:
        raise ValueError(f"num_clients * min_size = {num_clients} * {min_size} exceeds the "
                         f"{labels.shape[0]} training samples; lower min_size or num_clients")
    rng = np.random.default_rng(seed)
    train_of, test_of = dirichlet_client_of(
        labels, num_clients, alpha_arr, rng, min_size=min_size, balance=bool(balance),
        max_retries=max_retries, test_labels=tests, test_min_size=test_min_size)
    return group_by_client(train_of, num_clients), group_by_client(test_of, num_clients)
