"""IID split: a uniform random partition into near-equal client shards."""

from __future__ import annotations

import numpy as np

from ._validate import check_int, check_seed

__all__ = ["iid"]


def iid(n: int, num_clients: int, *, seed: int) -> list[np.ndarray]:
    """Split ``range(n)`` uniformly at random into ``num_clients`` near-equal parts.

    Algorithm: draw one random permutation of ``0..n-1`` with
    ``np.random.default_rng(seed)`` and cut it with :func:`numpy.array_split`, so
    the first ``n % num_clients`` clients get one sample more than the others.
    Each client's indices are then sorted ascending.

    Parameters
    ----------
    n : int
        Number of samples (indices ``0..n-1``).
    num_clients : int
        Number of clients, ``1 <= num_clients <= n``.
    seed : int
        Seed of the generator; the same seed gives the same split.

    Returns
    -------
    list of numpy.ndarray
        One ascending int64 index array per client; together they cover
        ``range(n)`` exactly once.

    Raises
    ------
    ValueError
        If ``num_clients < 1`` or ``num_clients > n`` (a client would be empty).

    Examples
    --------
    >>> parts = iid(10, 3, seed=0)
    >>> [len(p) for p in parts]
    [4, 3, 3]
    >>> sorted(int(i) for p in parts for i in p) == list(range(10))
    True
    """
    n = check_int(n, "n", minimum=0)
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    seed = check_seed(seed)
    if num_clients > n:
        raise ValueError(
            f"num_clients={num_clients} is more than the {n} samples allow; "
            "every client needs at least one sample"
        )
    perm = np.random.default_rng(seed).permutation(n).astype(np.int64)
    return [np.sort(p) for p in np.array_split(perm, num_clients)]
