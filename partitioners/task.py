"""Task assignment: each client gets the samples of its own ordered task list (DRAKE, HFLB)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ._validate import check_seed

__all__ = ["by_task"]


def by_task(
    task_ids: Sequence[Hashable] | np.ndarray,
    client_tasks: Sequence[Sequence[Hashable]],
    *,
    allow_shared: bool = False,
    strict: bool = False,
    seed: int | None = None,
) -> list[np.ndarray]:
    """Give each client the samples of its tasks, in the client's task order.

    This is the DRAKE / HFLB assignment of FedMosaic: every client owns an ordered
    list of tasks (its stream order in the dynamic setting) and holds all the
    training samples of those tasks. Nothing here is random unless shared tasks
    are split with a seed.

    The returned arrays are an *order*, not a sorted set: client ``i``'s array
    lists the samples of its first task, then those of its second, and so on,
    each task's samples by ascending index.

    Tasks no client claims (DRAKE's unseen tasks, for instance) are simply not
    assigned, so the result covers only the claimed tasks; with ``strict=True``
    such tasks raise instead. A task claimed by two clients raises unless
    ``allow_shared=True``; then its samples are split evenly (by
    :func:`numpy.array_split`, claimants in client order) among the clients that
    claim it: in ascending index order when ``seed`` is None, otherwise in the
    order of one ``np.random.default_rng(seed)`` permutation per shared task
    (tasks in sorted order). In DRAKE every task belongs to exactly one client.

    Parameters
    ----------
    task_ids : array-like of hashable, shape (n,)
        Task of every sample, e.g. ``"VSR-0"``.
    client_tasks : sequence of sequences
        ``client_tasks[i]`` is client ``i``'s ordered task list.
    allow_shared : bool, default False
        Allow a task to be claimed by several clients (split among them).
    strict : bool, default False
        Raise when some task in ``task_ids`` is claimed by no client.
    seed : int, optional
        Seed for splitting shared tasks at random; unused otherwise.

    Returns
    -------
    list of numpy.ndarray
        One int64 index array per client, ordered by the client's task order,
        then by ascending index. Disjoint.

    Raises
    ------
    ValueError
        If a client lists a task twice, claims a task no sample has, two clients
        claim one task without ``allow_shared``, or (``strict``) a task is
        unclaimed.

    Examples
    --------
    >>> tasks = ["a", "b", "a", "c", "b", "d"]
    >>> [p.tolist() for p in by_task(tasks, [["b", "a"], ["c"]])]
    [[1, 4, 0, 2], [3]]
    """
    arr = np.asarray(task_ids)
    if arr.ndim != 1:
        raise ValueError(f"task_ids must be one-dimensional, got shape {arr.shape}")
    if isinstance(client_tasks, str | bytes) or len(client_tasks) < 1:
        raise ValueError("client_tasks must be a non-empty list of task lists, one per client")
    if seed is not None:
        seed = check_seed(seed)
    try:
        values, inverse = np.unique(arr, return_inverse=True)
    except TypeError:
        raise ValueError("task_ids must all be of one sortable type (all str or all int)") from None
    order = np.argsort(inverse, kind="stable").astype(np.int64)
    bounds = np.concatenate(([0], np.cumsum(np.bincount(inverse, minlength=values.shape[0]))))
    where = {v: j for j, v in enumerate(values.tolist())}

    claims: dict[Hashable, list[int]] = {}
    for client, tasks in enumerate(client_tasks):
        if isinstance(tasks, str | bytes):
            raise ValueError(
                f"client_tasks[{client}] must be a list of tasks, got the string {tasks!r}"
            )
        seen: set[Hashable] = set()
        for task in tasks:
            if task in seen:
                raise ValueError(f"client_tasks[{client}] lists task {task!r} twice")
            seen.add(task)
            if task not in where:
                raise ValueError(
                    f"client_tasks[{client}] claims task {task!r}, which no sample in task_ids has"
                )
            claims.setdefault(task, []).append(client)

    shared = {t: c for t, c in claims.items() if len(c) > 1}
    if shared and not allow_shared:
        task, owners = next(iter(shared.items()))
        raise ValueError(
            f"task {task!r} is claimed by clients {owners}; each task must belong to one "
            "client (pass allow_shared=True to split it among them)"
        )
    if strict:
        unclaimed = [v for v in values.tolist() if v not in claims]
        if unclaimed:
            raise ValueError(
                f"strict=True but tasks {unclaimed} are claimed by no client in client_tasks"
            )

    rng = np.random.default_rng(seed) if seed is not None else None
    pieces: dict[tuple[Hashable, int], np.ndarray] = {}
    for task in sorted(shared, key=lambda t: where[t]):
        j = where[task]
        members = order[bounds[j] : bounds[j + 1]]
        if rng is not None:
            members = rng.permutation(members)
        for client, piece in zip(
            shared[task], np.array_split(members, len(shared[task])), strict=True
        ):
            pieces[(task, client)] = np.sort(piece)

    out: list[np.ndarray] = []
    for client, tasks in enumerate(client_tasks):
        chunks = []
        for task in tasks:
            if task in shared:
                chunks.append(pieces[(task, client)])
            else:
                j = where[task]
                chunks.append(order[bounds[j] : bounds[j + 1]])
        out.append(np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64))
    return out
