"""stream: static round chunks and FedMosaic's task-incremental (dynamic) order."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import Stream, by_task, stream

SIZES = {"A": 7, "B": 10, "C": 3, "D": 12}


def four_task_client():
    tasks = np.concatenate([np.full(n, t) for t, n in SIZES.items()])
    # Interleave the client's array so alignment with it is really tested.
    idx = np.random.default_rng(0).permutation(len(tasks))
    return tasks, idx


def rounds_in_arrival_order(s, client=0):
    return s.rounds[client][s.arrival_order(client)].tolist()


def test_dynamic_golden_4_tasks_x_5_rounds():
    # Client array task by task, so the default task order (first appearance) is A, B, C, D.
    tasks = np.concatenate([np.full(n, t) for t, n in SIZES.items()])
    idx = np.arange(len(tasks))
    s = stream([idx], tasks, order="dynamic", rounds_per_task=5, seed=0)
    # Worked by hand from round r taking task t's shuffled samples
    # [int(n*(r/5 - t)), int(n*((r+1)/5 - t))) in double precision:
    # A (t=0, n=7):  cuts 0, 1, 2, 4, 5, 7      -> rounds 0..4 get 1, 1, 2, 1, 2
    # B (t=1, n=10): 6/5-1 = 0.19999999999999996 -> int(1.99..) = 1; 7/5-1 =
    #     0.3999999999999999 -> 3; 8/5-1 = 0.6000000000000001 -> 6; 9/5-1 = 0.8 -> 8
    #     cuts 0, 1, 3, 6, 8, 10                -> rounds 5..9 get 1, 2, 3, 2, 2
    # C (t=2, n=3):  cuts 0, 0, 1, 1, 2, 3      -> rounds 10..14 get 0, 1, 0, 1, 1
    # D (t=3, n=12): cuts 0, 2, 4, 7, 9, 12     -> rounds 15..19 get 2, 2, 3, 2, 3
    assert rounds_in_arrival_order(s) == [
        0, 1, 2, 2, 3, 4, 4,
        5, 6, 6, 7, 7, 7, 8, 8, 9, 9,
        11, 13, 14,
        15, 15, 16, 16, 17, 17, 17, 18, 18, 19, 19, 19,
    ]  # fmt: skip
    exact = stream([idx], tasks, order="dynamic", rounds_per_task=5, seed=0, boundaries="exact")
    assert rounds_in_arrival_order(exact) == [
        0, 1, 2, 2, 3, 4, 4,
        5, 5, 6, 6, 7, 7, 8, 8, 9, 9,
        11, 13, 14,
        15, 15, 16, 16, 17, 17, 17, 18, 18, 19, 19, 19,
    ]  # fmt: skip
    by_position = tasks[idx][s.arrival_order(0)].tolist()
    assert by_position == [t for t in "ABCD" for _ in range(SIZES[t])]


def test_default_task_order_is_first_appearance():
    tasks, idx = four_task_client()
    s = stream([idx], tasks, order="dynamic", rounds_per_task=5, seed=0)
    order = list(dict.fromkeys(tasks[idx].tolist()))
    assert tasks[idx][s.arrival_order(0)].tolist() == [t for t in order for _ in range(SIZES[t])]


def test_dynamic_golden_with_client_task_order():
    tasks, idx = four_task_client()
    s = stream([idx], tasks, order="dynamic", rounds_per_task=5, seed=0,
               client_task_order=[["A", "B", "C", "D"]])  # fmt: skip
    expected_by_task = {
        "A": [0, 1, 2, 2, 3, 4, 4],
        "B": [5, 6, 6, 7, 7, 7, 8, 8, 9, 9],
        "C": [11, 13, 14],
        "D": [15, 15, 16, 16, 17, 17, 17, 18, 18, 19, 19, 19],
    }
    assert rounds_in_arrival_order(s) == [r for t in "ABCD" for r in expected_by_task[t]]
    for t in "ABCD":
        mine = tasks[idx] == t
        assert sorted(s.rounds[0][mine].tolist()) == expected_by_task[t]


def test_floor_j_r_over_n_is_not_the_code_rule():
    # The tempting closed form t*R + floor(j*R/n) puts the larger chunks first;
    # int(frac * n) cuts put them last. For n=7, R=5 they differ:
    tasks = np.zeros(7, dtype=int)
    s = stream([np.arange(7)], tasks, order="dynamic", rounds_per_task=5, seed=0)
    assert rounds_in_arrival_order(s) == [0, 1, 2, 2, 3, 4, 4]
    assert [(j * 5) // 7 for j in range(7)] == [0, 0, 1, 2, 2, 3, 4]
    # ... while ((j+1)*R - 1) // n, i.e. ceil((j+1)R/n) - 1, is the exact rule.
    assert [((j + 1) * 5 - 1) // 7 for j in range(7)] == [0, 1, 2, 2, 3, 4, 4]


def fedmosaic_reference(task_sizes, per_task):
    """Re-derivation of FedMosaic's loop over rounds: the rounds of each shuffled slot."""
    out = [[None] * n for n in task_sizes]
    for r in range(per_task * len(task_sizes)):
        start, end = r / per_task, (r + 1) / per_task
        t0, t1 = int(start), int(end)
        if t0 == t1:
            n = task_sizes[t0]
            lo, hi = int((start - t0) * n), int((end - t0) * n)
        else:  # the round ends exactly on a task boundary: take the rest of t0
            n = task_sizes[t0]
            lo, hi = int((start - t0) * n), n
        for j in range(lo, hi):
            out[t0][j] = r
    return [r for task in out for r in task]


@settings(max_examples=80, deadline=None)
@given(
    task_sizes=st.lists(st.integers(0, 40), min_size=1, max_size=6),
    per_task=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_dynamic_matches_fedmosaic_loop(task_sizes, per_task, seed):
    tasks = np.repeat(np.arange(len(task_sizes)), task_sizes)
    s = stream([np.arange(len(tasks))], tasks, order="dynamic", rounds_per_task=per_task,
               seed=seed, client_task_order=[list(range(len(task_sizes)))])  # fmt: skip
    assert rounds_in_arrival_order(s) == fedmosaic_reference(task_sizes, per_task)
    exact = stream([np.arange(len(tasks))], tasks, order="dynamic", rounds_per_task=per_task,
                   seed=seed, client_task_order=[list(range(len(task_sizes)))],
                   boundaries="exact")  # fmt: skip
    closed = [t * per_task + ((j + 1) * per_task - 1) // n
              for t, n in enumerate(task_sizes) for j in range(n)]  # fmt: skip
    assert rounds_in_arrival_order(exact) == closed
    if per_task & (per_task - 1) == 0:  # r / R exact in binary: the rules agree
        assert rounds_in_arrival_order(s) == closed


@settings(max_examples=60, deadline=None)
@given(
    client_tasks=st.lists(
        st.lists(st.integers(0, 30), min_size=0, max_size=5), min_size=1, max_size=4
    ),
    per_task=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_dynamic_properties(client_tasks, per_task, seed):
    # One task per (client, slot), sized by the drawn integers.
    task_of_sample = np.concatenate(
        [
            np.full(n, f"{c}-{t}")
            for c, sizes in enumerate(client_tasks)
            for t, n in enumerate(sizes)
        ]
        + [np.empty(0, dtype="<U8")]
    )
    orders = [[f"{c}-{t}" for t in range(len(sizes))] for c, sizes in enumerate(client_tasks)]
    parts = by_task(
        task_of_sample,
        [[o for o in order if o in set(task_of_sample.tolist())] for order in orders],
    )
    s = stream(parts, task_of_sample, order="dynamic", rounds_per_task=per_task, seed=seed,
               client_task_order=orders)  # fmt: skip
    for c, p in enumerate(parts):
        r, pos = s.rounds[c], s.positions[c]
        assert r.dtype == np.int64 and pos.dtype == np.int64
        assert len(r) == len(pos) == len(p)
        assert sorted(pos.tolist()) == list(range(len(p)))
        assert np.all(np.diff(r[np.argsort(pos)]) >= 0)
        for t, name in enumerate(orders[c]):
            mine = task_of_sample[p] == name
            assert np.all((r[mine] >= t * per_task) & (r[mine] < (t + 1) * per_task))
    again = stream(parts, task_of_sample, order="dynamic", rounds_per_task=per_task, seed=seed,
                   client_task_order=orders)  # fmt: skip
    assert all(np.array_equal(a, b) for a, b in zip(s.positions, again.positions, strict=True))


def test_empty_task_keeps_its_rounds():
    tasks = np.array(["a"] * 4 + ["c"] * 4)
    s = stream([np.arange(8)], tasks, order="dynamic", rounds_per_task=2, seed=0,
               client_task_order=[["a", "dummy", "c"]])  # fmt: skip
    assert rounds_in_arrival_order(s) == [0, 0, 1, 1, 4, 4, 5, 5]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 100), min_size=1, max_size=5),
    rounds=st.integers(1, 25),
    seed=st.integers(0, 2**32 - 1),
)
def test_static_properties(sizes, rounds, seed):
    parts = [np.arange(n) * 3 + 1 for n in sizes]
    s = stream(parts, order="static", rounds=rounds, seed=seed)
    for p, r, pos in zip(parts, s.rounds, s.positions, strict=True):
        n = len(p)
        assert len(r) == len(pos) == n
        assert sorted(pos.tolist()) == list(range(n))
        # np.array_split chunk sizes, in round order along positions.
        expected = np.repeat(
            np.arange(rounds), [len(c) for c in np.array_split(np.arange(n), rounds)]
        )
        assert r[np.argsort(pos)].tolist() == expected.tolist()
    again = stream(parts, order="static", rounds=rounds, seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(s.positions, again.positions, strict=True))


def test_static_golden_sizes_and_seed():
    s = stream([np.arange(23)], order="static", rounds=5, seed=1)
    assert np.bincount(s.rounds[0]).tolist() == [5, 5, 5, 4, 4]
    t = stream([np.arange(23)], order="static", rounds=5, seed=2)
    assert not np.array_equal(s.positions[0], t.positions[0])


def test_dynamic_seed_changes_order():
    tasks = np.repeat(["a", "b"], 50)
    a = stream([np.arange(100)], tasks, order="dynamic", rounds_per_task=5, seed=0)
    b = stream([np.arange(100)], tasks, order="dynamic", rounds_per_task=5, seed=1)
    assert not np.array_equal(a.positions[0], b.positions[0])


def test_stream_is_frozen():
    s = stream([np.arange(3)], order="static", rounds=1, seed=0)
    assert isinstance(s, Stream)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.rounds = []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(order="static"), "rounds is required for order='static'"),
        (dict(order="static", rounds=0), "rounds must be >= 1"),
        (dict(order="dynamic"), "rounds_per_task is required"),
        (
            dict(order="dynamic", rounds_per_task=2, task_of_sample=None),
            "task_of_sample is required",
        ),
        (
            dict(order="dynamic", rounds_per_task=2, rounds=3),
            r"2 tasks x rounds_per_task=2 = 4 rounds, more than rounds=3",
        ),
        (
            dict(order="dynamic", rounds_per_task=2, client_task_order=[["a"]]),
            r"tasks \['b'\] that are not in client_task_order\[0\]",
        ),
        (
            dict(order="dynamic", rounds_per_task=2, client_task_order=[["a", "b", "a"]]),
            "lists a task twice",
        ),
        (
            dict(order="dynamic", rounds_per_task=2, client_task_order=[["a"], ["b"]]),
            "client_task_order has 2 entries",
        ),
        (dict(order="random", rounds=2), "order must be 'static' or 'dynamic'"),
        (dict(order="static", rounds=2, boundaries="round"), "boundaries must be"),
    ],
)
def test_stream_bad_input(kwargs, match):
    kwargs.setdefault("task_of_sample", np.array(["a", "b", "a"]))
    with pytest.raises(ValueError, match=match):
        stream([np.arange(3)], seed=0, **kwargs)


def test_stream_index_out_of_range():
    with pytest.raises(ValueError, match="indices outside task_of_sample"):
        stream([np.array([0, 5])], ["a", "b"], order="dynamic", rounds_per_task=1, seed=0)


def test_empty_client_as_plain_list():
    s = stream([[], np.array([0, 1])], ["a", "b"], order="dynamic", rounds_per_task=1, seed=0)
    assert s.rounds[0].tolist() == [] and sorted(s.rounds[1].tolist()) == [0, 1]
    with pytest.raises(ValueError, match=r"client_indices\[0\] must be a 1-D integer array"):
        stream([[0.5]], order="static", rounds=1, seed=0)
