"""Small helpers shared by the partitioners (no randomness, no state)."""

from __future__ import annotations

import numpy as np

__all__ = ["group_by_client"]


def group_by_client(client_of: np.ndarray, num_clients: int) -> list[np.ndarray]:
    """Turn a per-sample client id array into one ascending int64 index array per client.

    ``client_of[i]`` is the client of sample ``i``, or ``-1`` when sample ``i`` goes
    to no client. A stable sort keeps the indices of each client ascending.
    """
    client_of = np.asarray(client_of, dtype=np.int64)
    order = np.argsort(client_of, kind="stable")
    assigned = client_of >= 0
    skip = int(client_of.size - np.count_nonzero(assigned))
    counts = np.bincount(client_of[assigned], minlength=num_clients)
    parts = np.split(order[skip:], np.cumsum(counts)[:-1])
    return [p.astype(np.int64, copy=False) for p in parts]
