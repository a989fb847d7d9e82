"""The shared split, cap and image rules of the Hub and folder adapters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from drake.adapters.hubdata import capped_order, derived_rows, display_name, image_problem, rgb_png
from drake.errors import BuildError


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 300), frac=st.floats(0.05, 0.95), seed=st.integers(0, 2**31),
       stratify=st.booleans(), n_labels=st.integers(1, 7))
def test_derived_split_is_an_exact_deterministic_cover(n, frac, seed, stratify, n_labels):
    labels = [i % n_labels for i in range(n)] if stratify else None
    rule = {"from": "train", "fraction": frac, "seed": seed, "stratify": stratify}
    train = derived_rows(n, "train", rule, labels=labels, default_seed=0)
    test = derived_rows(n, "test", rule, labels=labels, default_seed=0)
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(n))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
    assert derived_rows(n, "test", rule, labels=labels, default_seed=9).tolist() == test.tolist()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 200), frac=st.floats(0.05, 0.95), seed=st.integers(0, 2**31))
def test_fraction_rule_matches_datasets_train_test_split(n, frac, seed):
    import math

    from datasets import Dataset

    assume(0 < math.ceil(frac * n) < n and math.floor((1 - frac) * n) == n - math.ceil(frac * n))

    ref = Dataset.from_dict({"x": list(range(n))}).train_test_split(test_size=frac, seed=seed)
    rule = {"fraction": frac, "seed": seed}
    assert derived_rows(n, "test", rule, labels=None, default_seed=0).tolist() == \
        sorted(ref["test"]["x"])
    assert derived_rows(n, "train", rule, labels=None, default_seed=0).tolist() == \
        sorted(ref["train"]["x"])


def test_train_count_rule_is_a_shuffle_then_cut():
    perm = np.random.default_rng(42).permutation(10)
    rule = {"train_count": 7, "seed": 42}
    assert derived_rows(10, "train", rule, labels=None, default_seed=0).tolist() == \
        sorted(perm[:7].tolist())
    with pytest.raises(BuildError, match="train_count=10 must lie strictly between"):
        derived_rows(10, "train", {"train_count": 10}, labels=None, default_seed=0)


def test_capped_order_is_source_order_unless_the_cap_cuts():
    assert capped_order(5, None, seed=0, key="t/train") == [0, 1, 2, 3, 4]
    assert capped_order(5, 5, seed=0, key="t/train") == [0, 1, 2, 3, 4]
    cut = capped_order(50, 10, seed=0, key="t/train")
    assert sorted(cut) == list(range(50)) and cut != list(range(50))
    assert cut == capped_order(50, 10, seed=0, key="t/train")
    assert cut != capped_order(50, 10, seed=0, key="t/test")


def test_images_and_names():
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (28, 28), 7).save(buf, format="PNG")
    assert image_problem(buf.getvalue()) is None
    assert image_problem(buf.getvalue()[:40]) is not None
    out = rgb_png(buf.getvalue(), 64)
    assert out == rgb_png(buf.getvalue(), 64)
    assert Image.open(io.BytesIO(out)).size == (64, 64)
    assert display_name("Faces", {"faces": "face"}) == "face"
    assert display_name("ice_cream") == "ice cream"
