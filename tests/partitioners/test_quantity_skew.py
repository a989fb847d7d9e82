"""quantity_skew: random client sizes, optional global test set (FediLoRA)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import quantity_skew


def assert_cover(parts, n):
    flat = np.concatenate(parts)
    assert np.array_equal(np.sort(flat), np.arange(n))


@settings(max_examples=80, deadline=None)
@given(
    data=st.data(),
    n=st.integers(2, 400),
    min_size=st.integers(0, 5),
    alpha=st.none() | st.floats(0.05, 100),
    test_mode=st.sampled_from(["none", "flag", "fraction"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_quantity_properties(data, n, min_size, alpha, test_mode, seed):
    kwargs = dict(seed=seed, min_size=min_size, alpha=alpha)
    if test_mode == "flag":
        kwargs["global_test"] = True
    n_test = 0
    if test_mode == "fraction":
        frac = data.draw(st.floats(0.05, 0.5))
        kwargs["global_test_fraction"] = frac
        n_test = int(frac * n)
    slots = 1 + (test_mode == "flag")
    max_clients = (n - n_test) // max(min_size, 1) - (slots - 1)
    if test_mode == "fraction" and n_test < max(min_size, 1) or max_clients < 1:
        with pytest.raises(ValueError):
            quantity_skew(n, 1, **kwargs)
        return
    k = data.draw(st.integers(1, min(max_clients, 12)))
    parts = quantity_skew(n, k, **kwargs)
    assert len(parts) == k + (test_mode != "none")
    assert_cover(parts, n)
    assert min(len(p) for p in parts) >= min_size
    if test_mode == "fraction":
        assert len(parts[-1]) == n_test
    for p in parts:
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    again = quantity_skew(n, k, **kwargs)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_fedilora_eleven_subsets():
    parts = quantity_skew(10_000, 10, seed=666, global_test=True)
    assert len(parts) == 11
    assert_cover(parts, 10_000)
    sizes = [len(p) for p in parts]
    assert len(set(sizes)) > 5  # sizes really are random


def test_alpha_controls_size_spread():
    even = [len(p) for p in quantity_skew(10_000, 10, seed=0, alpha=1e4)]
    assert max(even) < 1100 and min(even) > 900
    uneven = [len(p) for p in quantity_skew(10_000, 10, seed=0, alpha=0.1)]
    assert max(uneven) > 3000


def test_quantity_seed_changes_split():
    a = quantity_skew(500, 5, seed=0)
    b = quantity_skew(500, 5, seed=1)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((10, 11), {}, "11 subsets of at least max"),
        ((10, 3), dict(min_size=4), "3 subsets of at least max"),
        ((10, 10), dict(global_test=True), "11 subsets"),
        ((10, 2), dict(global_test=True, global_test_fraction=0.2), "not both"),
        ((10, 2), dict(global_test_fraction=1.0), r"global_test_fraction must be in \(0, 1\)"),
        ((10, 2), dict(global_test_fraction=0.05), "gives int"),
        ((10, 2), dict(alpha=0.0), "alpha must be > 0"),
        ((10, 0), {}, "num_clients must be >= 1"),
    ],
)
def test_quantity_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        quantity_skew(*args, seed=0, **kwargs)
