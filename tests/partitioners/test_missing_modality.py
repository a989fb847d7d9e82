"""missing_modality: FedMultimodal per-client and FediLoRA per-sample masks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import MissingCode, missing_modality


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 200), min_size=1, max_size=8),
    rate=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_per_sample_properties(sizes, rate, seed):
    masks = missing_modality(sizes, rate, seed=seed, mode="per_sample")
    assert [len(m) for m in masks] == sizes
    for size, m in zip(sizes, masks, strict=True):
        assert m.dtype == np.int8
        assert int((m != 0).sum()) == int(rate * size)  # FediLoRA's int(rate * N)
        assert set(np.unique(m).tolist()) <= {0, 1, 2}
    again = missing_modality(sizes, rate, seed=seed, mode="per_sample")
    assert all(np.array_equal(a, b) for a, b in zip(masks, again, strict=True))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 50), min_size=1, max_size=8),
    rate=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_per_client_properties(sizes, rate, seed):
    masks = missing_modality(sizes, rate, seed=seed, mode="per_client")
    assert [len(m) for m in masks] == sizes
    for m in masks:
        assert m.dtype == np.int8
        assert len(np.unique(m)) <= 1  # one code for the whole client
        assert set(m.tolist()) <= {0, 1, 2, 3}
    again = missing_modality(sizes, rate, seed=seed, mode="per_client")
    assert all(np.array_equal(a, b) for a, b in zip(masks, again, strict=True))


def test_int_rate_truncation_matches_python():
    # 0.29 * 100 == 28.999999999999996 in floating point, so int() gives 28.
    (m,) = missing_modality(100, 0.29, seed=0, mode="per_sample")
    assert int((m != 0).sum()) == 28
    (m,) = missing_modality(10, 0.6, seed=0, mode="per_sample")
    assert int((m != 0).sum()) == 6


def test_per_sample_kinds_are_uniform():
    (m,) = missing_modality(20_000, 0.5, seed=1, mode="per_sample")
    image = int((m == MissingCode.IMAGE_MISSING).sum())
    assert image + int((m == MissingCode.TEXT_MISSING).sum()) == 10_000
    assert 4700 < image < 5300  # Binomial(10000, 1/2): sd 50


def test_per_client_rates():
    masks = missing_modality([1] * 20_000, 0.3, seed=2, mode="per_client")
    codes = np.array([m[0] for m in masks])
    image_gone = np.isin(codes, [1, 3]).mean()
    text_gone = np.isin(codes, [2, 3]).mean()
    both = (codes == MissingCode.BOTH_MISSING).mean()
    assert abs(image_gone - 0.3) < 0.015 and abs(text_gone - 0.3) < 0.015
    assert abs(both - 0.09) < 0.012  # independent drops


def test_rate_extremes():
    assert all(not m.any() for m in missing_modality([5, 6], 0.0, seed=0, mode="per_sample"))
    assert all(m.all() for m in missing_modality([5, 6], 1.0, seed=0, mode="per_sample"))
    assert all((m == 3).all() for m in missing_modality([5, 6], 1.0, seed=0, mode="per_client"))


def test_seed_changes_masks():
    a = missing_modality([100, 100], 0.4, seed=0, mode="per_sample")
    b = missing_modality([100, 100], 0.4, seed=1, mode="per_sample")
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    ("sizes", "rate", "mode", "match"),
    [
        ([10], 1.5, "per_sample", r"rate must be in \[0, 1\], got 1.5"),
        ([10], -0.1, "per_client", r"rate must be in \[0, 1\]"),
        ([10], float("nan"), "per_client", r"rate must be in \[0, 1\]"),
        ([10, -1], 0.5, "per_sample", r"n_or_client_sizes\[1\] must be >= 0"),
        ([10], 0.5, "sometimes", "mode must be 'per_client' or 'per_sample'"),
    ],
)
def test_missing_bad_input(sizes, rate, mode, match):
    with pytest.raises(ValueError, match=match):
        missing_modality(sizes, rate, seed=0, mode=mode)
