"""pathological: random k-class split and pFedMMA's contiguous class blocks."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import base_novel_split, contiguous_class_blocks, pathological


def assert_cover(parts, n):
    flat = np.concatenate(parts)
    assert np.array_equal(np.sort(flat), np.arange(n))


def pfedmma_blocks_inline(num_classes, num_users):
    """Independent re-derivation with the global generator, as pFedMMA's code does it."""
    saved = random.getstate()
    try:
        random.seed(2023)
        class_list = list(range(num_classes))
        random.shuffle(class_list)
    finally:
        random.setstate(saved)
    cpu = round(num_classes / num_users)
    blocks = [class_list[i * cpu : (i + 1) * cpu] for i in range(num_users - 1)]
    return [*blocks, class_list[(num_users - 1) * cpu :]]


@pytest.mark.parametrize(
    ("dataset", "total_classes", "base", "size", "last"),
    [
        ("Flowers102", 102, 51, 5, 6),
        ("OxfordPets", 37, 19, 2, 1),
        ("DTD", 47, 24, 2, 6),
        ("SUN397", 397, 199, 20, 19),
    ],
)
def test_contiguous_golden_pfedmma(dataset, total_classes, base, size, last):
    base_classes, _ = base_novel_split(np.arange(total_classes))
    assert len(base_classes) == base, dataset
    blocks = contiguous_class_blocks(base_classes, 10)
    assert [len(b) for b in blocks] == [size] * 9 + [last]
    assert blocks == pfedmma_blocks_inline(base, 10)
    # And the partition itself gives each client exactly its block's samples.
    labels = np.repeat(base_classes, 3)
    parts = pathological(labels, 10, mode="contiguous")
    assert_cover(parts, len(labels))
    for block, p in zip(blocks, parts, strict=True):
        assert sorted(set(labels[p].tolist())) == sorted(block)
        assert len(p) == 3 * len(block)


def test_blocks_literal():
    # Pinned literally (CPython's seeded shuffle is stable across versions), so a
    # change in the rule or in Python's generator would be noticed.
    assert contiguous_class_blocks(range(51), 10) == [
        [23, 43, 46, 12, 5],
        [30, 26, 18, 3, 9],
        [47, 0, 31, 42, 8],
        [48, 29, 16, 10, 17],
        [38, 15, 27, 41, 32],
        [25, 22, 4, 49, 2],
        [37, 13, 1, 35, 14],
        [11, 45, 33, 34, 19],
        [7, 6, 40, 21, 36],
        [39, 20, 50, 28, 44, 24],
    ]
    assert contiguous_class_blocks(range(19), 10) == [
        [2, 7],
        [3, 0],
        [16, 6],
        [13, 8],
        [4, 11],
        [1, 15],
        [5, 17],
        [9, 10],
        [18, 14],
        [12],
    ]


@pytest.mark.parametrize("seed", [0, 1, 2023, 12345, 2**40 + 3])
@pytest.mark.parametrize("length", [0, 1, 2, 19, 51, 199])
def test_local_random_equals_global_random_shuffle(seed, length):
    # random.Random(s).shuffle(x) and random.seed(s); random.shuffle(x) give the
    # same permutation: both seed a Mersenne Twister the same way and run the same
    # Fisher-Yates loop. The partitioner relies on this to match pFedMMA exactly
    # without touching the global generator.
    saved = random.getstate()
    try:
        random.seed(seed)
        expected = list(range(length))
        random.shuffle(expected)
    finally:
        random.setstate(saved)
    local = list(range(length))
    random.Random(seed).shuffle(local)
    assert local == expected


def test_contiguous_leaves_global_random_alone():
    random.seed(99)
    before = random.getstate()
    pathological(np.repeat(np.arange(20), 2), 4, mode="contiguous")
    contiguous_class_blocks(range(20), 4, seed=5)
    assert random.getstate() == before


def test_contiguous_round_half_to_even():
    # round(2.5) == 2 in Python: 25 classes over 10 clients -> 2 each, last 7.
    blocks = contiguous_class_blocks(range(25), 10)
    assert [len(b) for b in blocks] == [2] * 9 + [7]


def test_contiguous_uses_sorted_distinct_classes():
    labels = np.array([7, 3, 3, 9, 7, 1, 9, 1])
    blocks = contiguous_class_blocks(labels, 2, seed=4)
    saved = random.getstate()
    random.seed(4)
    classes = [1, 3, 7, 9]
    random.shuffle(classes)
    random.setstate(saved)
    assert blocks == [classes[:2], classes[2:]]


@settings(max_examples=50, deadline=None)
@given(
    data=st.data(),
    classes=st.sets(st.integers(0, 500), min_size=1, max_size=60),
    per_class=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_contiguous_mode_properties(data, classes, per_class, seed):
    labels = np.repeat(np.array(sorted(classes)), per_class)
    np.random.default_rng(seed % 1000).shuffle(labels)
    c = len(classes)
    n_clients = data.draw(st.integers(1, c))
    per = round(c / n_clients)
    if per == 0 or (n_clients - 1) * per >= c:
        with pytest.raises(ValueError, match="more than the"):
            pathological(labels, n_clients, mode="contiguous", seed=seed)
        return
    parts = pathological(labels, n_clients, mode="contiguous", seed=seed)
    blocks = contiguous_class_blocks(labels, n_clients, seed=seed)
    assert_cover(parts, len(labels))
    assert [len(b) for b in blocks[:-1]] == [per] * (n_clients - 1)
    assert sorted(x for b in blocks for x in b) == sorted(classes)
    for block, p in zip(blocks, parts, strict=True):
        assert set(labels[p].tolist()) == set(block)
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    again = pathological(labels, n_clients, mode="contiguous", seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_contiguous_seed_changes_blocks():
    assert contiguous_class_blocks(range(51), 10, seed=2023) != contiguous_class_blocks(
        range(51), 10, seed=2024
    )


@settings(max_examples=50, deadline=None)
@given(
    data=st.data(),
    num_classes=st.integers(1, 12),
    per_class=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_mode_properties(data, num_classes, per_class, seed):
    labels = np.repeat(np.arange(num_classes), per_class)
    k = data.draw(st.integers(1, num_classes))
    max_clients = max(1, (num_classes * per_class) // k)
    n_clients = data.draw(st.integers(1, min(max_clients, 10)))
    try:
        parts = pathological(labels, n_clients, k, mode="random", seed=seed)
    except ValueError as err:
        assert "got no samples" in str(err)
        return
    held = [set(labels[p].tolist()) for p in parts]
    for h in held:
        assert 1 <= len(h) <= k
    counts = np.bincount([c for h in held for c in h], minlength=num_classes)
    if n_clients * k >= num_classes:
        assert_cover(parts, len(labels))
    flat = np.concatenate(parts)
    assert len(np.unique(flat)) == len(flat)  # disjoint
    if all(per_class >= c for c in counts):
        # Every holder got a non-empty slice: k classes each, holders spread evenly.
        assert all(len(h) == k for h in held)
        assert counts.max() - counts[counts > 0].min() <= 1 or n_clients * k < num_classes
    for p in parts:
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    again = pathological(labels, n_clients, k, mode="random", seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_random_mode_balanced_holders_and_even_split():
    labels = np.repeat(np.arange(10), 12)
    parts = pathological(labels, 10, 3, mode="random", seed=0)
    assert_cover(parts, 120)
    holders = np.zeros(10, dtype=int)
    for p in parts:
        classes = np.unique(labels[p])
        assert len(classes) == 3
        holders[classes] += 1
    assert np.all(holders == 3)  # 30 slots over 10 classes
    for p in parts:
        assert len(p) == 12  # each class of 12 split 4/4/4


def test_random_mode_seed_changes_split():
    labels = np.repeat(np.arange(20), 10)
    a = pathological(labels, 8, 2, mode="random", seed=1)
    b = pathological(labels, 8, 2, mode="random", seed=2)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_random_mode_fewer_slots_than_classes_leaves_classes_out():
    labels = np.repeat(np.arange(10), 5)
    parts = pathological(labels, 2, 2, mode="random", seed=0)
    used = {int(c) for p in parts for c in labels[p]}
    assert len(used) == 4
    assert sum(len(p) for p in parts) == 20


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            dict(num_clients=2, classes_per_client=4, mode="random"),
            "classes_per_client=4 is more than the 3 classes",
        ),
        (dict(num_clients=2, mode="random"), "classes_per_client is required"),
        (dict(num_clients=4, mode="contiguous"), "num_clients=4 is more than the 3 classes allow"),
        (
            dict(num_clients=2, classes_per_client=1, mode="contiguous"),
            "classes_per_client=1 does not match",
        ),
        (
            dict(num_clients=2, classes_per_client=1, mode="blocks"),
            "mode must be 'random' or 'contiguous'",
        ),
        (dict(num_clients=0, classes_per_client=1, mode="random"), "num_clients must be >= 1"),
        (
            dict(num_clients=10, classes_per_client=1, mode="random"),
            "num_clients=10 is more than the 9 samples",
        ),
    ],
)
def test_pathological_bad_input(kwargs, match):
    labels = np.repeat(np.arange(3), 3)
    with pytest.raises(ValueError, match=match):
        pathological(labels, **kwargs)


def test_pathological_bad_labels():
    with pytest.raises(ValueError, match="labels must hold integer class ids"):
        pathological(["a", "b"], 1, 1, mode="random", seed=0)
    with pytest.raises(ValueError, match="labels must be non-negative"):
        pathological([0, -2], 1, 1, mode="random", seed=0)
