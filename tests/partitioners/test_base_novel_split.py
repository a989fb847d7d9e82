"""base_novel_split: sorted classes, base = first ceil(n/2) (CoOp / pFedMMA)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from partitioners import base_novel_split


@pytest.mark.parametrize(
    ("n", "expected_base"),
    [(1, 1), (2, 1), (3, 2), (10, 5), (37, 19), (47, 24), (101, 51), (102, 51), (397, 199)],
)
def test_base_size_is_ceil_half(n, expected_base):
    base, novel = base_novel_split(np.arange(n)[::-1])
    assert len(base) == expected_base == math.ceil(n / 2)
    assert base.tolist() == list(range(expected_base))
    assert novel.tolist() == list(range(expected_base, n))


@given(st.sets(st.integers(0, 10_000), min_size=1, max_size=200), st.integers(1, 3))
def test_base_novel_properties(classes, repeats):
    labels = np.repeat(np.array(sorted(classes)), repeats)
    np.random.default_rng(0).shuffle(labels)
    base, novel = base_novel_split(labels)
    assert len(base) == math.ceil(len(classes) / 2)
    assert sorted(classes) == base.tolist() + novel.tolist()
    assert base.dtype == np.int64 and novel.dtype == np.int64
    if len(novel):
        assert base.max() < novel.min()


@pytest.mark.parametrize(
    ("ids", "match"),
    [
        ([], "class_ids is empty"),
        ([0, -1], "class_ids must be non-negative"),
        (["x"], "class_ids must hold integer"),
    ],
)
def test_base_novel_bad_input(ids, match):
    with pytest.raises(ValueError, match=match):
        base_novel_split(ids)
