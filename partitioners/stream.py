"""Stream order: the round at which each of a client's samples arrives (static or dynamic)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._validate import check_int, check_seed

__all__ = ["Stream", "stream"]


@dataclass(frozen=True)
class Stream:
    """When each sample of each client arrives.

    Both lists have one array per client, aligned element by element with that
    client's index array as passed to :func:`stream` (same length, same order).

    Attributes
    ----------
    rounds : list of numpy.ndarray
        ``rounds[c][i]`` is the (0-based) round at which sample
        ``client_indices[c][i]`` enters client ``c``'s stream. int64.
    positions : list of numpy.ndarray
        ``positions[c][i]`` is the rank of that sample in client ``c``'s arrival
        order: a permutation of ``0..n_c-1``. Position ``p`` arrives before
        ``p + 1``, and rounds never decrease along positions. int64.
    """

    rounds: list[np.ndarray]
    positions: list[np.ndarray]

    def arrival_order(self, client: int) -> np.ndarray:
        """Offsets into client ``client``'s index array, in order of arrival."""
        return np.argsort(self.positions[client], kind="stable")


def _static_client(n: int, rounds: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    arrival = rng.permutation(n)
    positions = np.empty(n, dtype=np.int64)
    positions[arrival] = np.arange(n)
    sizes = np.array([len(c) for c in np.array_split(np.arange(n), rounds)])
    round_of_position = np.repeat(np.arange(rounds, dtype=np.int64), sizes)
    return round_of_position[positions], positions


def _task_boundaries(n_t: int, t: int, per_task: int, rule: str) -> list[int]:
    """Cut points of task ``t``'s shuffled samples into its ``per_task`` rounds."""
    if rule == "exact":
        return [(n_t * k) // per_task for k in range(per_task + 1)]
    # FedMosaic's train_VLM_CL.py: round r covers the fraction
    # [r/R - t, (r+1)/R - t) of the task, cut at int(fraction * n) in double
    # precision. The same float expression is evaluated here on purpose.
    return [int(((t * per_task + k) / per_task - t) * n_t) for k in range(per_task + 1)]


def stream(
    client_indices: Sequence[np.ndarray],
    task_of_sample: Sequence[Hashable] | np.ndarray | None = None,
    *,
    order: Literal["static", "dynamic"],
    rounds: int | None = None,
    rounds_per_task: int | None = None,
    seed: int,
    client_task_order: Sequence[Sequence[Hashable]] | None = None,
    boundaries: Literal["fedmosaic", "exact"] = "fedmosaic",
) -> Stream:
    """Order each client's samples into a stream of rounds.

    ``order="static"`` (FedMosaic's PFL setting): all of a client's samples are
    shuffled and cut into ``rounds`` near-equal consecutive chunks with
    :func:`numpy.array_split` semantics (the first ``n % rounds`` chunks one
    sample longer); chunk ``r`` arrives at round ``r``. FedMosaic's own code uses
    chunks of ``int(n / rounds)`` and drops the last ``n % rounds`` samples; here
    none is dropped. ``task_of_sample`` is not needed.

    ``order="dynamic"`` (task-incremental, FedMosaic's PFCL setting): with
    ``R = rounds_per_task``, the ``t``-th task of the client's task order (from
    0) occupies rounds ``[t*R, (t+1)*R)``. Its ``n_t`` samples are shuffled; with
    ``boundaries="fedmosaic"`` (default) round ``r = t*R + k`` takes the shuffled
    samples ``[int(n_t * (r/R - t)), int(n_t * ((r+1)/R - t)))``: the fraction
    ``[r/R - t, (r+1)/R - t)`` of the task, cut with ``int()`` evaluated in IEEE
    double precision exactly as FedMosaic's ``train_VLM_CL.py`` does.

    * In exact arithmetic the cut points are ``floor(n_t * k / R)``, so the
      ``j``-th shuffled sample arrives at round ``t*R + ((j + 1) * R - 1) // n_t``
      (that is ``ceil((j+1) R / n_t) - 1``), *not* ``t*R + floor(j * R / n_t)``.
      E.g. ``n_t = 7, R = 5`` gives chunk sizes 1, 1, 2, 1, 2.
    * Because ``r/R`` is not exact in binary, a cut that is a whole number in
      exact arithmetic can fall one short: for ``t = 1, R = 5, n_t = 10`` the
      float rule gives chunk sizes 1, 2, 3, 2, 2 where exact arithmetic gives 2
      each. ``boundaries="exact"`` uses ``(n_t * k) // R`` instead. For ``t = 0``
      and for ``R`` a power of two the two rules agree.

    "Position" is the order of arrival within the client's stream, ``0..n_c-1``:
    static, the order of the shuffle; dynamic, task by task in the client's task
    order and, within a task, the order of its shuffle. Rounds never decrease
    along positions. A round may be empty when a task (or client) has fewer
    samples than rounds.

    All shuffles come from one ``np.random.default_rng(seed)``: clients in order
    and, for dynamic, tasks in the client's task order.

    Parameters
    ----------
    client_indices : sequence of int arrays
        Each client's sample indices (e.g. the output of a partitioner).
    task_of_sample : array-like of hashable, optional
        Task of every sample of the whole dataset, indexed by the values in
        ``client_indices``. Required for ``"dynamic"``.
    order : {"static", "dynamic"}
        Which stream.
    rounds : int, optional
        Number of rounds. Required for ``"static"``. For ``"dynamic"`` optional:
        if given, every client's ``len(tasks) * rounds_per_task`` must fit in it
        (a client with fewer tasks idles at the end).
    rounds_per_task : int, optional
        Rounds per task ``R``; required for ``"dynamic"`` (FedMosaic: 5).
    seed : int
        Seed of the generator.
    client_task_order : sequence of sequences, optional
        Each client's ordered task list (dynamic only). A listed task with no
        sample still occupies its ``R`` rounds, as FedMosaic's dummy tasks do.
        Default: the tasks in order of first appearance in the client's array
        (right for the output of :func:`partitioners.by_task`).
    boundaries : {"fedmosaic", "exact"}, default "fedmosaic"
        Float cut points as in FedMosaic's code, or exact integer ones.

    Returns
    -------
    Stream
        ``rounds`` and ``positions`` per client, aligned with ``client_indices``.

    Raises
    ------
    ValueError
        If a required argument is missing or not a positive integer, a client
        has a sample whose task is not in its task order, indices fall outside
        ``task_of_sample``, or the tasks do not fit in ``rounds``.

    Examples
    --------
    >>> import numpy as np
    >>> tasks = np.array(["a"] * 7 + ["b"] * 3)
    >>> s = stream([np.arange(10)], tasks, order="dynamic", rounds_per_task=2, seed=0)
    >>> np.bincount(s.rounds[0]).tolist()
    [3, 4, 1, 2]
    >>> s = stream([np.arange(10)], order="static", rounds=4, seed=0)
    >>> np.bincount(s.rounds[0]).tolist()
    [3, 3, 2, 2]
    """
    seed = check_seed(seed)
    if boundaries not in ("fedmosaic", "exact"):
        raise ValueError(f"boundaries must be 'fedmosaic' or 'exact', got {boundaries!r}")
    clients = [np.asarray(c) for c in client_indices]
    for i, idx in enumerate(clients):
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError(f"client_indices[{i}] must be a 1-D integer array")
    clients = [idx.astype(np.int64, copy=False) for idx in clients]
    rng = np.random.default_rng(seed)

    if order == "static":
        if rounds is None:
            raise ValueError("rounds is required for order='static'")
        rounds = check_int(rounds, "rounds", minimum=1)
        pairs = [_static_client(idx.shape[0], rounds, rng) for idx in clients]
        return Stream([p[0] for p in pairs], [p[1] for p in pairs])

    if order != "dynamic":
        raise ValueError(f"order must be 'static' or 'dynamic', got {order!r}")
    if rounds_per_task is None:
        raise ValueError("rounds_per_task is required for order='dynamic'")
    per_task = check_int(rounds_per_task, "rounds_per_task", minimum=1)
    if rounds is not None:
        rounds = check_int(rounds, "rounds", minimum=1)
    if task_of_sample is None:
        raise ValueError("task_of_sample is required for order='dynamic'")
    task_arr = np.asarray(task_of_sample)
    if client_task_order is not None and len(client_task_order) != len(clients):
        raise ValueError(
            f"client_task_order has {len(client_task_order)} entries but client_indices has "
            f"{len(clients)} clients"
        )

    all_rounds: list[np.ndarray] = []
    all_positions: list[np.ndarray] = []
    for c, idx in enumerate(clients):
        if idx.size and (idx.min() < 0 or idx.max() >= task_arr.shape[0]):
            raise ValueError(
                f"client_indices[{c}] has indices outside task_of_sample (length "
                f"{task_arr.shape[0]})"
            )
        tasks = task_arr[idx].tolist()
        if client_task_order is None:
            task_order = list(dict.fromkeys(tasks))
        else:
            if isinstance(client_task_order[c], str | bytes):
                raise ValueError(f"client_task_order[{c}] must be a list of tasks, not a string")
            task_order = list(client_task_order[c])
            if len(set(task_order)) != len(task_order):
                raise ValueError(f"client_task_order[{c}] lists a task twice: {task_order}")
            missing = set(tasks) - set(task_order)
            if missing:
                raise ValueError(
                    f"client {c} has samples of tasks {sorted(map(str, missing))} that are not "
                    f"in client_task_order[{c}]"
                )
        if rounds is not None and len(task_order) * per_task > rounds:
            raise ValueError(
                f"client {c} has {len(task_order)} tasks x rounds_per_task={per_task} = "
                f"{len(task_order) * per_task} rounds, more than rounds={rounds}"
            )
        members_of: dict[Hashable, list[int]] = {}
        for offset, task in enumerate(tasks):
            members_of.setdefault(task, []).append(offset)
        client_rounds = np.empty(idx.shape[0], dtype=np.int64)
        client_positions = np.empty(idx.shape[0], dtype=np.int64)
        next_position = 0
        for t, task in enumerate(task_order):
            members = np.asarray(members_of.get(task, []), dtype=np.int64)
            n_t = members.shape[0]
            shuffled = members[rng.permutation(n_t)]
            cuts = _task_boundaries(n_t, t, per_task, boundaries)
            sizes = np.diff(cuts)
            client_rounds[shuffled] = t * per_task + np.repeat(np.arange(per_task), sizes)
            client_positions[shuffled] = next_position + np.arange(n_t)
            next_position += n_t
        all_rounds.append(client_rounds)
        all_positions.append(client_positions)
    return Stream(all_rounds, all_positions)
