"""Quantity skew: clients of random sizes (FediLoRA's "randomly assigned sizes")."""

from __future__ import annotations

import numpy as np

from ._validate import check_alpha, check_fraction, check_int, check_seed

__all__ = ["quantity_skew"]


def quantity_skew(
    n: int,
    num_clients: int,
    *,
    seed: int,
    min_size: int = 1,
    alpha: float | None = None,
    global_test: bool = False,
    global_test_fraction: float | None = None,
) -> list[np.ndarray]:
    """Split ``range(n)`` into disjoint random subsets of random sizes.

    FediLoRA partitions each dataset "into 11 subsets with randomly assigned
    sizes (one for global test set)"; the paper does not give the size law, so
    this function fixes one and documents it. With ``K`` the number of subsets
    whose size is random and ``m`` the samples they share:

    1. proportions ``q ~ Dir(alpha * 1_K)`` (``alpha`` defaults to 1, i.e.
       uniform on the simplex; larger alpha gives more equal sizes);
    2. sizes ``min_size + Multinomial(m - K * min_size, q)``, so every subset has
       at least ``min_size`` samples and the sizes add up to ``m``;
    3. one random permutation of ``range(n)`` is cut into consecutive pieces of
       those sizes (clients in order, then the global test set), and each piece is
       sorted ascending.

    The global test set, when asked for, is returned as one extra, last array:

    * ``global_test=True`` (FediLoRA): ``K = num_clients + 1`` subsets share all
      ``m = n`` samples and the last one is the global test set;
    * ``global_test_fraction=f``: the test set has exactly ``int(f * n)``
      samples, and the ``K = num_clients`` clients share the other ``m`` samples.

    Draws, all from ``np.random.default_rng(seed)``, happen in the order ``q``,
    multinomial, permutation.

    Parameters
    ----------
    n : int
        Number of samples.
    num_clients : int
        Number of clients ``N >= 1`` (FediLoRA: 10).
    seed : int
        Seed of the generator.
    min_size : int, default 1
        Smallest size of any returned subset (the global test set included).
    alpha : float, optional
        Concentration of the size proportions; default 1.0.
    global_test : bool, default False
        Draw a global test set as an extra subset of random size.
    global_test_fraction : float, optional
        Size of the global test set as a fraction of ``n``, in (0, 1).
        Exclusive with ``global_test``.

    Returns
    -------
    list of numpy.ndarray
        ``N`` client arrays, plus the global test array last when asked for; all
        ascending int64 and together covering ``range(n)`` exactly once.

    Raises
    ------
    ValueError
        If the subsets cannot all reach ``min_size``, if both global-test options
        are given, or for bad counts, alpha or fraction.

    Examples
    --------
    >>> parts = quantity_skew(100, 10, seed=666, global_test=True)
    >>> len(parts), sum(len(p) for p in parts)
    (11, 100)
    """
    n = check_int(n, "n", minimum=0)
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    seed = check_seed(seed)
    min_size = check_int(min_size, "min_size", minimum=0)
    a = 1.0 if alpha is None else float(check_alpha(alpha))
    if global_test and global_test_fraction is not None:
        raise ValueError(
            "give either global_test=True (random test-set size) or global_test_fraction "
            "(fixed test-set size), not both"
        )
    n_test = 0
    if global_test_fraction is not None:
        frac = check_fraction(
            global_test_fraction, "global_test_fraction", low_open=True, high_open=True
        )
        n_test = int(frac * n)
        if n_test < max(min_size, 1):
            raise ValueError(
                f"global_test_fraction={frac} gives int({frac} * {n}) = {n_test} test samples, "
                f"fewer than max(min_size, 1) = {max(min_size, 1)}; raise it"
            )
    k = num_clients + (1 if global_test else 0)
    shared = n - n_test
    if k * max(min_size, 1) > shared:
        raise ValueError(
            f"{k} subsets of at least max(min_size, 1) = {max(min_size, 1)} samples need "
            f"{k * max(min_size, 1)} samples but only {shared} are available; lower "
            "num_clients or min_size"
        )
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(k, a))
    sizes = min_size + rng.multinomial(shared - k * min_size, q)
    if n_test:
        sizes = np.append(sizes, n_test)
    perm = rng.permutation(n).astype(np.int64)
    return [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]
