"""by_task: DRAKE/HFLB task assignment in each client's task order."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import by_task


def test_by_task_golden_order():
    tasks = np.array(["VSR-0", "CIRR-0", "VSR-0", "unseen", "NLVR2-0", "CIRR-0", "VSR-0"])
    parts = by_task(tasks, [["VSR-0", "NLVR2-0"], ["CIRR-0"]])
    assert [p.tolist() for p in parts] == [[0, 2, 6, 4], [1, 5]]
    assert all(p.dtype == np.int64 for p in parts)


@settings(max_examples=60, deadline=None)
@given(
    task_ids=st.lists(st.integers(0, 7), min_size=1, max_size=120),
    data=st.data(),
)
def test_by_task_properties(task_ids, data):
    task_ids = np.array(task_ids)
    present = sorted(set(task_ids.tolist()))
    claimed = data.draw(st.permutations(present))
    cut = data.draw(st.integers(0, len(claimed)))
    claimed = claimed[:cut]
    num_clients = data.draw(st.integers(1, 4))
    owner = data.draw(
        st.lists(st.integers(0, num_clients - 1), min_size=len(claimed), max_size=len(claimed))
    )
    client_tasks = [
        [t for t, o in zip(claimed, owner, strict=True) if o == c] for c in range(num_clients)
    ]
    parts = by_task(task_ids, client_tasks)
    for c, p in enumerate(parts):
        expected = [i for t in client_tasks[c] for i in np.flatnonzero(task_ids == t)]
        assert p.tolist() == expected
    flat = np.concatenate(parts)
    assert len(np.unique(flat)) == len(flat)
    assert set(flat.tolist()) == set(np.flatnonzero(np.isin(task_ids, claimed)).tolist())
    if len(claimed) < len(present):
        with pytest.raises(ValueError, match="claimed by no client"):
            by_task(task_ids, client_tasks, strict=True)


def test_shared_task_rejected_unless_allowed():
    tasks = ["a"] * 5 + ["b"] * 2
    with pytest.raises(ValueError, match=r"task 'a' is claimed by clients \[0, 1\]"):
        by_task(tasks, [["a"], ["a", "b"]])
    parts = by_task(tasks, [["a"], ["b", "a"]], allow_shared=True)
    assert [p.tolist() for p in parts] == [[0, 1, 2], [5, 6, 3, 4]]
    seeded = by_task(tasks, [["a"], ["b", "a"]], allow_shared=True, seed=3)
    assert sorted(seeded[0].tolist() + seeded[1][2:].tolist()) == [0, 1, 2, 3, 4]
    assert [len(p) for p in seeded] == [3, 4]
    assert [p.tolist() for p in by_task(tasks, [["a"], ["b", "a"]], allow_shared=True, seed=3)] == [
        p.tolist() for p in seeded
    ]


@pytest.mark.parametrize(
    ("client_tasks", "kwargs", "match"),
    [
        ([["a", "a"]], {}, r"client_tasks\[0\] lists task 'a' twice"),
        ([["a"], ["zzz"]], {}, r"client_tasks\[1\] claims task 'zzz', which no sample"),
        ([["a"]], dict(strict=True), r"strict=True but tasks \['b'\] are claimed by no client"),
        (["ab"], {}, "must be a list of tasks, got the string"),
        ([], {}, "client_tasks must be a non-empty list"),
    ],
)
def test_by_task_bad_input(client_tasks, kwargs, match):
    with pytest.raises(ValueError, match=match):
        by_task(["a", "b", "a"], client_tasks, **kwargs)
