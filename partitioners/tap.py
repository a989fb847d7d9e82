"""TAP's client layout: three groups of ten clients with fixed task and modality sets.

TAP's public code (not its paper, which gives no table) hand-codes the 30 clients: client
``g * 10 + k`` is pattern ``k`` of group ``g``. Every group has the same ten patterns; a pattern
holds one or two datasets, and a dataset shared by several patterns is cut between them by fixed
fractions of the group's slice. Each dataset's training rows are shuffled once, cut into three
contiguous group slices (the last takes the remainder), and each slice is cut again at
``int(fraction * size)``.

:data:`TAP_LAYOUTS` holds the two setups (FLAVA's eight datasets, ViLT's six), written from
that code: pattern -> ``(task, start fraction, end fraction)`` per dataset. ViLT replaces
tiny-ImageNet and CIFAR-100 with Fashion-MNIST reconstruction, so its patterns 0, 7 and 8 share
Fashion-MNIST in thirds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ._validate import check_int, check_seed

__all__ = ["TAP_LAYOUTS", "task_groups", "split_among_holders"]

Layout = tuple[tuple[tuple[str, float, float], ...], ...]

_FLAVA: Layout = (
    (("tiny-imagenet", 0.0, 1.0),),
    (("ag-news", 0.0, 0.33),),
    (("ag-news", 0.33, 0.66),),
    (("caltech256", 0.0, 0.5),),
    (("vqav2-small", 0.0, 0.5),),
    (("vqav2-small", 0.5, 1.0),),
    (("mmlu", 0.0, 1.0),),
    (("cifar100", 0.0, 1.0), ("ag-news", 0.66, 1.0)),
    (("common-gen", 0.0, 0.5), ("fashion-mnist", 0.0, 1.0)),
    (("common-gen", 0.5, 1.0), ("caltech256", 0.5, 1.0)),
)
_VILT: Layout = (
    (("fashion-mnist", 0.0, 0.33),),
    *_FLAVA[1:7],
    (("fashion-mnist", 0.33, 0.66), ("ag-news", 0.66, 1.0)),
    (("common-gen", 0.0, 0.5), ("fashion-mnist", 0.66, 1.0)),
    _FLAVA[9],
)
#: TAP's ten client patterns per group, per backbone setup
TAP_LAYOUTS: Mapping[str, Layout] = {"flava": _FLAVA, "vilt": _VILT}


def task_groups(
    task_of_sample: Sequence[str] | np.ndarray,
    layout: Layout,
    *,
    groups: int = 3,
    seed: int,
    unshuffled: Sequence[str] = (),
) -> list[np.ndarray]:
    """Training rows of each of ``groups * len(layout)`` clients (client ``g * len(layout) + k``
    is pattern ``k`` of group ``g``).

    For every task a layout names: its rows (ascending index) are permuted by
    ``np.random.default_rng([seed, t])`` (``t`` the task's position in sorted order; tasks in
    ``unshuffled`` keep index order, as TAP's Fashion-MNIST), cut into ``groups`` contiguous
    slices of ``size // groups`` rows (the last slice takes the remainder), and each pattern
    takes rows ``[int(lo * n), int(hi * n))`` of its group's slice of ``n`` rows. Rows of tasks
    no pattern names stay unassigned. Returns ascending index arrays.

    Examples
    --------
    >>> tasks = np.array(["a"] * 9 + ["b"] * 6)
    >>> parts = task_groups(tasks, ((("a", 0.0, 1.0),), (("b", 0.0, 1.0),)), seed=0)
    >>> [len(p) for p in parts]
    [3, 2, 3, 2, 3, 2]
    """
    tasks = np.asarray(task_of_sample).astype(str)
    groups = check_int(groups, "groups", minimum=1)
    seed = check_seed(seed)
    names = sorted({t for pattern in layout for t, _, _ in pattern})
    missing = [t for t in names if not (tasks == t).any()]
    if missing:
        raise ValueError(f"the layout names tasks with no rows: {missing}")
    slices: dict[str, list[np.ndarray]] = {}
    for t, name in enumerate(names):
        rows = np.flatnonzero(tasks == name)
        if name not in unshuffled:
            rows = rows[np.random.default_rng([seed, t]).permutation(rows.size)]
        per = rows.size // groups
        slices[name] = [rows[g * per:(g + 1) * per if g < groups - 1 else rows.size]
                        for g in range(groups)]
    parts = []
    for g in range(groups):
        for pattern in layout:
            own = []
            for name, lo, hi in pattern:
                piece = slices[name][g]
                own.append(piece[int(lo * piece.size):int(hi * piece.size)])
            parts.append(np.sort(np.concatenate(own)).astype(np.int64))
    return parts


def split_among_holders(
    task_of_sample: Sequence[str] | np.ndarray,
    holders: Mapping[str, Sequence[int]],
    num_clients: int,
    *,
    seed: int,
) -> list[np.ndarray]:
    """Each task's rows dealt evenly to the clients that hold the task (a seeded permutation
    per task, tasks in sorted order, :func:`numpy.array_split` over the holders in client
    order); rows of tasks nobody holds stay unassigned. Returns ascending index arrays."""
    tasks = np.asarray(task_of_sample).astype(str)
    seed = check_seed(seed)
    out: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for t, name in enumerate(sorted(holders)):
        rows = np.flatnonzero(tasks == name)
        rows = rows[np.random.default_rng([seed, t]).permutation(rows.size)]
        for client, piece in zip(sorted(holders[name]), np.array_split(rows, len(holders[name]))):
            out[client].append(piece)
    return [np.sort(np.concatenate(p)).astype(np.int64) if p else np.empty(0, np.int64)
            for p in out]
