"""Pathological label split: each client holds a few whole classes."""

from __future__ import annotations

import random
from typing import Literal

import numpy as np

from ._common import group_by_client
from ._validate import check_int, check_labels, check_seed

__all__ = ["contiguous_class_blocks", "pathological"]

PFEDMMA_SEED = 2023
"""The seed pFedMMA's released code passes to ``random.seed`` before shuffling classes."""


def contiguous_class_blocks(
    class_ids: np.ndarray, num_clients: int, *, seed: int = PFEDMMA_SEED
) -> list[list[int]]:
    """Return the classes each client owns under pFedMMA's contiguous-block rule.

    Algorithm (pFedMMA, base-to-novel setting): take the sorted distinct class ids,
    shuffle that list with Python's ``random`` seeded with ``seed`` (the paper's
    2023), set ``c = round(C / N)`` (Python's ``round``, which rounds halves to
    even), and give client ``i < N - 1`` the block ``[i*c, (i+1)*c)`` of the
    shuffled list; the last client takes everything from ``(N-1)*c`` on.

    The shuffle uses a local ``random.Random(seed)``, never the global generator;
    ``random.Random(s).shuffle(x)`` gives exactly the permutation of
    ``random.seed(s); random.shuffle(x)`` (same Mersenne Twister state, same
    algorithm), which the tests check.

    Parameters
    ----------
    class_ids : array-like of int
        Class ids, with or without repeats (labels work).
    num_clients : int
        Number of clients ``N``.
    seed : int, default 2023
        Seed of the Python shuffle.

    Returns
    -------
    list of list of int
        The classes of each client, in shuffled order.

    Raises
    ------
    ValueError
        If the rule would leave a client without classes (``c == 0`` or
        ``(N-1)*c >= C``): more clients than the classes allow.

    Examples
    --------
    >>> blocks = contiguous_class_blocks(range(51), 10)
    >>> [len(b) for b in blocks]
    [5, 5, 5, 5, 5, 5, 5, 5, 5, 6]
    """
    ids = check_labels(class_ids, "class_ids")
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    seed = check_seed(seed)
    class_list = [int(c) for c in np.unique(ids)]
    num_classes = len(class_list)
    per_client = round(num_classes / num_clients) if num_classes else 0
    if per_client == 0 or (num_clients - 1) * per_client >= num_classes:
        raise ValueError(
            f"num_clients={num_clients} is more than the {num_classes} classes allow with "
            f"contiguous blocks of round({num_classes}/{num_clients})={per_client}; "
            "lower num_clients"
        )
    random.Random(seed).shuffle(class_list)
    blocks = [class_list[i * per_client : (i + 1) * per_client] for i in range(num_clients - 1)]
    blocks.append(class_list[(num_clients - 1) * per_client :])
    return blocks


def _random_holders(
    num_classes: int, num_clients: int, k: int, rng: np.random.Generator
) -> list[list[int]]:
    """Each client takes ``k`` distinct classes among those with the fewest holders so far."""
    held = np.zeros(num_classes)
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for client in range(num_clients):
        # Ties in holder count are broken at random by the fractional key.
        key = held + rng.random(num_classes)
        chosen = np.argsort(key, kind="stable")[:k]
        held[chosen] += 1
        for c in np.sort(chosen):
            holders[int(c)].append(client)
    return holders


def pathological(
    labels: np.ndarray,
    num_clients: int,
    classes_per_client: int | None = None,
    *,
    mode: Literal["random", "contiguous"],
    seed: int = PFEDMMA_SEED,
) -> list[np.ndarray]:
    """Give each client the samples of a few classes.

    ``mode="random"``: each client ``i`` in turn takes ``classes_per_client``
    distinct classes, chosen uniformly among the classes with the fewest holders
    so far (so holders are spread as evenly as possible and, when
    ``num_clients * classes_per_client >= C``, every class has a holder). The
    samples of a class, in random order, are split evenly among its holders with
    :func:`numpy.array_split` (holders in client order). When
    ``num_clients * classes_per_client < C``, the classes nobody took are left out:
    their samples go to no client and the result is not a cover.
    Draws come from ``np.random.default_rng(seed)``.

    ``mode="contiguous"``: pFedMMA's assignment exactly, see
    :func:`contiguous_class_blocks`: the sorted class list is shuffled with
    Python's ``random`` (seed 2023 by default), client ``i`` gets block
    ``[i*c, (i+1)*c)`` with ``c = round(C/N)`` and the last client the remainder.
    All samples of a class go to its one owner, so the result is a cover. For 51
    Flowers base classes over 10 clients: 5 classes each, 6 for the last.

    Parameters
    ----------
    labels : array-like of int, shape (n,)
        Class id of every sample.
    num_clients : int
        Number of clients ``N``.
    classes_per_client : int or None
        Classes per client; required for ``"random"``. For ``"contiguous"`` it is
        fixed by the rule; pass None or ``round(C/N)``.
    mode : {"random", "contiguous"}
        Which rule.
    seed : int, default 2023
        Seed (numpy generator for "random", Python ``random.Random`` for "contiguous").

    Returns
    -------
    list of numpy.ndarray
        ``N`` ascending int64 index arrays, disjoint.

    Raises
    ------
    ValueError
        If ``classes_per_client`` exceeds the number of classes, if a client would
        get no class or no sample (more clients than classes or samples allow), or
        for bad labels.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.repeat(np.arange(6), 4)
    >>> parts = pathological(labels, 3, 2, mode="random", seed=0)
    >>> [len(set(labels[p].tolist())) for p in parts]
    [2, 2, 2]
    >>> parts = pathological(labels, 3, mode="contiguous")
    >>> sum(len(p) for p in parts)
    24
    """
    labels = check_labels(labels)
    num_clients = check_int(num_clients, "num_clients", minimum=1)
    seed = check_seed(seed)
    n = labels.shape[0]
    if num_clients > n:
        raise ValueError(
            f"num_clients={num_clients} is more than the {n} samples allow; "
            "every client needs at least one sample"
        )
    classes, class_index = np.unique(labels, return_inverse=True)
    num_classes = classes.shape[0]

    if mode == "contiguous":
        blocks = contiguous_class_blocks(classes, num_clients, seed=seed)
        per_client = len(blocks[0])
        if classes_per_client is not None and (
            check_int(classes_per_client, "classes_per_client") != per_client
        ):
            raise ValueError(
                f"classes_per_client={classes_per_client} does not match mode='contiguous', "
                f"which gives round({num_classes}/{num_clients})={per_client} classes per "
                "client (the last takes the remainder); pass None"
            )
        owner = np.empty(num_classes, dtype=np.int64)
        position = {int(c): j for j, c in enumerate(classes)}
        for client, block in enumerate(blocks):
            owner[[position[c] for c in block]] = client
        return group_by_client(owner[class_index], num_clients)

    if mode != "random":
        raise ValueError(f"mode must be 'random' or 'contiguous', got {mode!r}")
    if classes_per_client is None:
        raise ValueError("classes_per_client is required for mode='random'")
    k = check_int(classes_per_client, "classes_per_client", minimum=1)
    if k > num_classes:
        raise ValueError(f"classes_per_client={k} is more than the {num_classes} classes in labels")
    rng = np.random.default_rng(seed)
    holders = _random_holders(num_classes, num_clients, k, rng)
    perm = rng.permutation(n)
    order = perm[np.argsort(class_index[perm], kind="stable")]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(class_index, minlength=num_classes))))
    client_of = np.full(n, -1, dtype=np.int64)
    for c in range(num_classes):
        if not holders[c]:
            continue
        pieces = np.array_split(order[bounds[c] : bounds[c + 1]], len(holders[c]))
        for client, piece in zip(holders[c], pieces, strict=True):
            client_of[piece] = client
    parts = group_by_client(client_of, num_clients)
    empty = [i for i, p in enumerate(parts) if p.size == 0]
    if empty:
        raise ValueError(
            f"client {empty[0]} got no samples: its classes have fewer samples than "
            f"holders; lower num_clients={num_clients} or raise "
            f"classes_per_client={k}"
        )
    return parts
