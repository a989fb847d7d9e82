"""dirichlet: per-class Dirichlet label skew with NIID-Bench's capping rule."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import dirichlet


def assert_cover(parts, n):
    flat = np.concatenate(parts)
    assert np.array_equal(np.sort(flat), np.arange(n))


def mean_label_entropy(labels, parts, num_classes):
    out = []
    for p in parts:
        freq = np.bincount(labels[p], minlength=num_classes) / len(p)
        freq = freq[freq > 0]
        out.append(-(freq * np.log(freq)).sum())
    return float(np.mean(out))


label_lists = st.lists(st.integers(0, 9), min_size=40, max_size=300)


@settings(max_examples=60, deadline=None)
@given(
    labels=label_lists,
    k=st.integers(1, 5),
    alpha=st.floats(0.05, 100),
    min_size=st.integers(0, 3),
    balance=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_dirichlet_properties(labels, k, alpha, min_size, balance, seed):
    labels = np.array(labels)
    n = len(labels)
    kwargs = dict(seed=seed, min_size=min_size, balance=balance, max_retries=20)
    try:
        parts = dirichlet(labels, k, alpha, **kwargs)
    except ValueError as err:  # the documented give-up; its message must say why
        msg = str(err)
        assert f"alpha={alpha}" in msg and f"min_size={min_size}" in msg
        assert "smallest client" in msg and "Lower min_size or raise alpha" in msg
        return
    assert len(parts) == k
    assert_cover(parts, n)
    assert min(len(p) for p in parts) >= min_size
    for p in parts:
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    if balance:
        # A client stops receiving once it holds n/k samples, so it can exceed that
        # by at most one class.
        assert max(len(p) for p in parts) <= n / k + np.bincount(labels).max()
    again = dirichlet(labels, k, alpha, **kwargs)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 2))
def test_dirichlet_seed_changes_split(seed):
    labels = np.repeat(np.arange(5), 40)
    a = dirichlet(labels, 4, 1.0, seed=seed, min_size=1)
    b = dirichlet(labels, 4, 1.0, seed=seed + 1, min_size=1)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_entropy_rises_with_alpha():
    labels = np.repeat(np.arange(10), 2000)
    h = {
        alpha: np.mean(
            [mean_label_entropy(labels, dirichlet(labels, 20, alpha, seed=s), 10) for s in range(4)]
        )
        for alpha in (0.05, 0.5, 100.0)
    }
    # Observed about 0.46, 1.53 and 2.30 nats (maximum ln 10 = 2.30).
    assert h[0.05] + 0.5 < h[0.5]
    assert h[0.5] + 0.4 < h[100.0]
    assert h[100.0] > 0.98 * np.log(10)


def test_per_client_alpha_vector():
    # Without capping, client j's expected share of each class is alpha_j / sum(alpha).
    labels = np.repeat(np.arange(20), 500)
    alpha = np.array([4.0, 1.0, 1.0, 1.0, 1.0])
    shares = []
    for s in range(4):
        parts = dirichlet(labels, 5, alpha, seed=s, min_size=1, balance=False)
        assert_cover(parts, len(labels))
        shares.append([len(p) / len(labels) for p in parts])
    shares = np.mean(shares, axis=0)
    assert 0.42 < shares[0] < 0.58
    assert np.all((shares[1:] > 0.07) & (shares[1:] < 0.18))
    scalar = dirichlet(labels, 5, 1.0, seed=0, min_size=1, balance=False)
    vector = dirichlet(labels, 5, np.ones(5), seed=0, min_size=1, balance=False)
    assert all(np.array_equal(a, b) for a, b in zip(scalar, vector, strict=True))


def test_tiny_alpha_underflow_still_covers():
    labels = np.repeat(np.arange(50), 20)
    parts = dirichlet(labels, 10, 1e-4, seed=3, min_size=0)
    assert_cover(parts, len(labels))
    # In the alpha -> 0 limit every class goes whole to one client.
    owners = [{int(c) for c in np.unique(labels[p])} for p in parts]
    for c in range(50):
        assert sum(c in o for o in owners) == 1


def test_float_labels_with_whole_values_accepted():
    labels = np.repeat(np.arange(3.0), 20)
    parts = dirichlet(labels, 2, 1.0, seed=0, min_size=1)
    assert_cover(parts, 60)


def test_give_up_message():
    labels = np.zeros(300, dtype=int)
    with pytest.raises(ValueError) as info:
        dirichlet(labels, 5, 0.01, seed=0, min_size=50, max_retries=5)
    msg = str(info.value)
    assert "alpha=0.01" in msg and "min_size=50" in msg and "max_retries=5" in msg
    assert "smallest client (client" in msg
    assert "Lower min_size or raise alpha" in msg


@pytest.mark.parametrize(
    ("labels", "k", "alpha", "match"),
    [
        ([0, 1, 2], 2, -1.0, r"alpha must be > 0 and finite, got -1\.0"),
        ([0, 1, 2], 2, 0.0, r"alpha must be > 0 and finite, got 0\.0"),
        ([0, 1, 2], 2, float("nan"), "alpha must be > 0"),
        ([0, 1, 2], 2, float("inf"), "alpha must be > 0"),
        ([0, 1, 2], 2, [1.0, 2.0, 3.0], "alpha has 3 entries but there are 2 clients"),
        ([0, 1, 2], 2, [1.0, -2.0], r"alpha must be > 0 and finite, got -2\.0"),
        ([0, -1, 2], 2, 1.0, "labels must be non-negative, got -1"),
        ([0, 1.5, 2], 2, 1.0, "labels must hold integer class ids, got non-integer value 1.5"),
        (["cat", "dog", "cat"], 2, 1.0, "labels must hold integer class ids"),
        ([0, 1, 2], 4, 1.0, "num_clients=4 is more than the 3 samples"),
        ([0, 1, 2], 0, 1.0, "num_clients must be >= 1"),
        ([[0, 1], [1, 0]], 2, 1.0, "labels must be one-dimensional"),
        ([True, False, True], 2, 1.0, "labels must hold integer class ids, got booleans"),
    ],
)
def test_dirichlet_bad_input(labels, k, alpha, match):
    with pytest.raises(ValueError, match=match):
        dirichlet(labels, k, alpha, seed=0, min_size=0)


def test_min_size_impossible_rejected_up_front():
    with pytest.raises(ValueError, match=r"num_clients \* min_size = 4 \* 10 exceeds the 30"):
        dirichlet(np.zeros(30, dtype=int), 4, 1.0, seed=0, min_size=10)
