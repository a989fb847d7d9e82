"""Sort-and-shard split of FedAvg (McMahan et al., 2017)."""

from __future__ import annotations

import numpy as np

from ._common import group_by_client
from ._validate import check_int, check_labels, check_seed

__all__ = ["shard"]


def shard(
    labels: np.ndarray, num_clients: int, shards_per_client: int, *, seed: int
) -> list[np.ndarray]:
    """Sort samples by label, cut them into equal shards, deal shards to clients.

    Algorithm (FedAvg's pathological non-IID MNIST split): order the samples by
    label (samples of one class in random order), cut that order into
    ``S = num_clients * shards_per_client`` contiguous shards with
    :func:`numpy.array_split` (the first ``n % S`` shards one sample longer), draw
    a random permutation of the shards and give client ``i`` shards
    ``perm[i*s:(i+1)*s]``. A client thus sees at most about ``2 * s`` classes.
    FedAvg used 100 clients with 2 shards of 300 MNIST images each.

    Parameters
    ----------
    labels : array-like of int, shape (n,)
        Class id of every sample.
    num_clients : int
        Number of clients ``N >= 1``.
    shards_per_client : int
        Shards per client ``s >= 1``; ``N * s`` must not exceed ``n``.
    seed : int
        Seed of ``np.random.default_rng``.

    Returns
    -------
    list of numpy.ndarray
        ``N`` ascending int64 index arrays covering ``range(n)`` exactly once.

    Raises
    ------
    ValueError
        If ``num_clients * shards_per_client > n`` (a shard would be empty), or for
        bad labels or counts.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.repeat(np.arange(5), 8)
    >>> parts = shard(labels, 4, 2, seed=0)
    >>> [len(p) for p in parts]
    [10, 10, 10, 10]
    """
    labels = check_labels(labels)
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    s = check_int(shards_per_client, "shards_per_client", minimum=1)
    seed = check_seed(seed)
    n = labels.shape[0]
    total = num_clients * s
    if total > n:
        raise ValueError(
            f"num_clients * shards_per_client = {num_clients} * {s} = {total} shards is "
            f"more than the {n} samples allow; lower num_clients or shards_per_client"
        )
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    order = perm[np.argsort(labels[perm], kind="stable")]
    shards = np.array_split(order, total)
    deal = rng.permutation(total)
    client_of = np.empty(n, dtype=np.int64)
    for position, shard_id in enumerate(deal):
        client_of[shards[shard_id]] = position // s
    return group_by_client(client_of, num_clients)
