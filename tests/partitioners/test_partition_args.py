"""Shared argument checks: each bad value raises a ValueError naming the argument."""

import numpy as np
import pytest

from partitioners._validate import check_alpha, check_fraction, check_int, check_labels, check_seed


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        (["a", "b"], "labels must hold integer class ids, got dtype <U1"),
        ([0.0, 1.5], "non-integer value 1.5"),
        ([0.0, np.nan], "non-finite"),
        ([0, -3], "labels must be non-negative, got -3"),
        ([[0]], "one-dimensional"),
        ([True], "booleans"),
        ([None, 1], "labels must hold integer class ids"),
    ],
)
def test_check_labels_rejects(labels, match):
    with pytest.raises(ValueError, match=match):
        check_labels(labels)


def test_check_labels_accepts():
    assert check_labels([2.0, 0.0]).tolist() == [2, 0]
    assert check_labels(np.array([1, 2], dtype=np.uint8)).dtype == np.int64
    assert check_labels([]).shape == (0,)


@pytest.mark.parametrize("bad", [-1.0, 0, float("nan"), float("inf"), "big", True, [[1.0]]])
def test_check_alpha_rejects(bad):
    with pytest.raises(ValueError, match="alpha"):
        check_alpha(bad, size=1)


def test_check_alpha_vector_needs_size():
    with pytest.raises(ValueError, match="alpha must be a single number here"):
        check_alpha([1.0, 2.0])


@pytest.mark.parametrize("bad", [None, -1, 1.5, "3", True])
def test_check_seed_rejects(bad):
    with pytest.raises(ValueError, match="seed"):
        check_seed(bad)


def test_check_int_and_fraction():
    assert check_int(np.int32(3), "k") == 3
    with pytest.raises(ValueError, match="k must be >= 2, got 1"):
        check_int(1, "k", minimum=2)
    assert check_fraction(0, "rate") == 0.0
    with pytest.raises(ValueError, match=r"rate must be in \(0, 1\], got 0.0"):
        check_fraction(0, "rate", low_open=True)
