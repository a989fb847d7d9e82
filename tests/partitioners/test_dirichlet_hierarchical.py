"""dirichlet_hierarchical: pFedMMA's coarse-then-fine CIFAR-100 split."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import dirichlet_hierarchical


def assert_cover(parts, n):
    flat = np.concatenate(parts)
    assert np.array_equal(np.sort(flat), np.arange(n))


@st.composite
def hierarchy(draw):
    num_coarse = draw(st.integers(1, 4))
    fine_per_coarse = draw(st.lists(st.integers(1, 3), min_size=num_coarse, max_size=num_coarse))
    coarse_of_fine = np.repeat(np.arange(num_coarse), fine_per_coarse)
    num_fine = coarse_of_fine.shape[0]
    fine = np.array(draw(st.lists(st.integers(0, num_fine - 1), min_size=5, max_size=150)))
    return fine, coarse_of_fine[fine]


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    labels=hierarchy(),
    a_coarse=st.floats(0.01, 100),
    a_fine=st.floats(0.01, 100),
    seed=st.integers(0, 2**32 - 1),
)
def test_hierarchical_properties(data, labels, a_coarse, a_fine, seed):
    fine, coarse = labels
    n = len(fine)
    k = data.draw(st.integers(1, min(n, 8)))
    parts = dirichlet_hierarchical(fine, coarse, k, a_coarse, a_fine, seed=seed)
    assert len(parts) == k
    assert_cover(parts, n)
    # Client i draws n // k samples, plus one for the first n % k clients.
    assert [len(p) for p in parts] == [n // k + (i < n % k) for i in range(k)]
    for p in parts:
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    again = dirichlet_hierarchical(fine, coarse, k, a_coarse, a_fine, seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_hierarchical_seed_changes_split():
    fine = np.repeat(np.arange(8), 25)
    coarse = fine // 4
    a = dirichlet_hierarchical(fine, coarse, 4, 0.3, 10.0, seed=1)
    for s in range(2, 6):
        b = dirichlet_hierarchical(fine, coarse, 4, 0.3, 10.0, seed=s)
        assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def coarse_entropy(coarse, parts, num_coarse):
    out = []
    for p in parts:
        freq = np.bincount(coarse[p], minlength=num_coarse) / len(p)
        freq = freq[freq > 0]
        out.append(-(freq * np.log(freq)).sum())
    return float(np.mean(out))


def test_alpha_coarse_controls_coarse_skew():
    fine = np.repeat(np.arange(40), 100)  # 10 coarse x 4 fine, 4000 samples
    coarse = fine // 4
    # 40 clients of 100 samples each: few classes run out, so the skew shows.
    low = coarse_entropy(coarse, dirichlet_hierarchical(fine, coarse, 40, 0.1, 10.0, seed=0), 10)
    high = coarse_entropy(coarse, dirichlet_hierarchical(fine, coarse, 40, 100.0, 10.0, seed=0), 10)
    assert low + 0.8 < high


def sequential_reference(fine, coarse, k, a_coarse, a_fine, rng):
    """One draw at a time, with hierarchical renormalisation (the documented rule)."""
    classes = np.unique(fine)
    pools = {int(f): list(np.flatnonzero(fine == f)) for f in classes}
    coarse_of = {int(f): int(coarse[fine == f][0]) for f in classes}
    coarse_ids = sorted(set(coarse_of.values()))
    out = []
    n = len(fine)
    for i in range(k):
        want = n // k + (i < n % k)
        wc = dict(zip(coarse_ids, rng.dirichlet(np.full(len(coarse_ids), a_coarse)), strict=True))
        wf = {}
        for c in coarse_ids:
            members = [f for f in pools if coarse_of[f] == c]
            wf.update(zip(members, rng.dirichlet(np.full(len(members), a_fine)), strict=True))
        mine = []
        for _ in range(want):
            open_c = [c for c in coarse_ids if any(pools[f] and coarse_of[f] == c for f in pools)]
            pc = np.array([wc[c] for c in open_c])
            c = open_c[rng.choice(len(open_c), p=pc / pc.sum())]
            open_f = [f for f in pools if pools[f] and coarse_of[f] == c]
            pf = np.array([wf[f] for f in open_f])
            f = open_f[rng.choice(len(open_f), p=pf / pf.sum())]
            mine.append(pools[f].pop(rng.integers(len(pools[f]))))
        out.append(mine)
    return out


def test_batched_draws_match_one_at_a_time_in_distribution():
    # Tiny, uneven pools so classes run out often and the renormalisation rule
    # matters: renormalising flat over fine classes instead of coarse-then-fine
    # moves some of these means by 0.2-0.25.
    fine = np.repeat(np.arange(5), [6, 1, 1, 1, 3])
    coarse = np.array([0, 1, 1, 1, 2])[fine]
    runs = 1500
    ours = np.zeros((3, 5))
    ref = np.zeros((3, 5))
    rng = np.random.default_rng(7)
    for s in range(runs):
        for i, p in enumerate(dirichlet_hierarchical(fine, coarse, 3, 1.0, 1.0, seed=s)):
            ours[i] += np.bincount(fine[p], minlength=5)
        for i, p in enumerate(sequential_reference(fine, coarse, 3, 1.0, 1.0, rng)):
            ref[i] += np.bincount(fine[np.array(p, dtype=int)], minlength=5)
    # Mean count of each fine class per client; standard errors are about 0.03.
    assert np.abs(ours / runs - ref / runs).max() < 0.12


@pytest.mark.parametrize(
    ("fine", "coarse", "k", "ac", "af", "match"),
    [
        ([0, 1, 2], [0, 0], 2, 1.0, 1.0, "fine_labels and coarse_labels must have the same length"),
        ([0, 1, 1], [0, 0, 1], 2, 1.0, 1.0, r"fine_labels value 1 appears under several"),
        ([0, 1, 2], [0, 0, 1], 2, 0.0, 1.0, r"alpha_coarse must be > 0 and finite, got 0\.0"),
        ([0, 1, 2], [0, 0, 1], 2, 1.0, -3.0, r"alpha_fine must be > 0 and finite, got -3\.0"),
        ([0, 1, 2], [0, 0, 1], 4, 1.0, 1.0, "num_clients=4 is more than the 3 samples"),
        ([0, -1, 2], [0, 0, 1], 2, 1.0, 1.0, "fine_labels must be non-negative"),
        ([0, 1, 2], [0, 0.5, 1], 2, 1.0, 1.0, "coarse_labels must hold integer class ids"),
    ],
)
def test_hierarchical_bad_input(fine, coarse, k, ac, af, match):
    with pytest.raises(ValueError, match=match):
        dirichlet_hierarchical(fine, coarse, k, ac, af, seed=0)
