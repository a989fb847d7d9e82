"""shard: FedAvg's sort-and-shard split."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import shard


def assert_cover(parts, n):
    flat = np.concatenate(parts)
    assert np.array_equal(np.sort(flat), np.arange(n))


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    labels=st.lists(st.integers(0, 9), min_size=1, max_size=300),
    seed=st.integers(0, 2**32 - 1),
)
def test_shard_properties(data, labels, seed):
    labels = np.array(labels)
    n = len(labels)
    k = data.draw(st.integers(1, n))
    s = data.draw(st.integers(1, n // k))
    parts = shard(labels, k, s, seed=seed)
    assert len(parts) == k
    assert_cover(parts, n)
    lo, hi = n // (k * s), -(-n // (k * s))
    for p in parts:
        assert lo * s <= len(p) <= hi * s
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    again = shard(labels, k, s, seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_fedavg_mnist_like():
    # 10 classes x 60, 20 clients x 2 shards of 15: shards never straddle classes,
    # so every client sees at most 2 classes.
    labels = np.repeat(np.arange(10), 60)
    parts = shard(labels, 20, 2, seed=0)
    assert_cover(parts, 600)
    for p in parts:
        assert len(p) == 30
        assert len(np.unique(labels[p])) <= 2
        # each shard is 15 samples of one class
        assert all(c % 15 == 0 for c in np.bincount(labels[p]))


def test_shard_seed_changes_split():
    labels = np.repeat(np.arange(10), 20)
    a = shard(labels, 10, 2, seed=0)
    b = shard(labels, 10, 2, seed=1)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    ("k", "s", "match"),
    [
        (3, 2, r"num_clients \* shards_per_client = 3 \* 2 = 6 shards is more than the 5"),
        (0, 1, "num_clients must be >= 1"),
        (1, 0, "shards_per_client must be >= 1"),
    ],
)
def test_shard_bad_input(k, s, match):
    with pytest.raises(ValueError, match=match):
        shard(np.arange(5), k, s, seed=0)


def test_shard_bad_labels():
    with pytest.raises(ValueError, match="labels must hold integer class ids"):
        shard([0.5, 1.0], 1, 1, seed=0)
