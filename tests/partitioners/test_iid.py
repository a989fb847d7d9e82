"""iid: uniform random near-equal split."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import iid


def assert_cover(parts, n):
    flat = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    assert np.array_equal(np.sort(flat), np.arange(n))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_iid_properties(data, n, seed):
    k = data.draw(st.integers(1, n))
    parts = iid(n, k, seed=seed)
    assert len(parts) == k
    assert_cover(parts, n)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    for p in parts:
        assert p.dtype == np.int64
        assert np.all(np.diff(p) > 0)
    again = iid(n, k, seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 2))
def test_iid_seed_changes_split(seed):
    a = iid(200, 4, seed=seed)
    b = iid(200, 4, seed=seed + 1)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    ("n", "k", "match"),
    [(3, 4, "num_clients=4"), (3, 0, "num_clients must be >= 1"), (3, 1.0, "num_clients")],
)
def test_iid_bad_input(n, k, match):
    with pytest.raises(ValueError, match=match):
        iid(n, k, seed=0)


def test_iid_needs_seed():
    with pytest.raises(ValueError, match="seed"):
        iid(10, 2, seed=None)
