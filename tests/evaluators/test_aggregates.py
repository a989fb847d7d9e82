"""Base/novel HM, mean ± std over seeds, bootstrap CIs and per-domain accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import (
    MetricInputError,
    base_novel_hm,
    bootstrap_ci,
    mean_std,
    per_domain_accuracy,
)

ACC = st.floats(0.5, 100)


# ---------------------------------------------------------------- base / novel HM


def test_hm_three_terms_hand_computed():
    # 3 / (1/90 + 1/60 + 1/45) = 3 / (0.05) = 60
    assert base_novel_hm(90.0, 60.0, 45.0) == pytest.approx(60.0)
    # pFedMMA-like row: 97.17 local, 80 base, 78 novel
    expected = 3 / (1 / 97.17 + 1 / 80 + 1 / 78)
    assert base_novel_hm(97.17, 80, 78) == pytest.approx(expected)


def test_hm_two_terms_hand_computed():
    assert base_novel_hm(None, 60.0, 40.0, terms=2) == pytest.approx(48.0)
    assert base_novel_hm(99.0, 60.0, 40.0, terms=2) == pytest.approx(48.0)  # local unused


def test_hm_zero_term_is_zero():
    assert base_novel_hm(90.0, 0.0, 50.0) == 0.0


@given(ACC, ACC, ACC)
def test_hm_between_min_and_arithmetic_mean(local, base, novel):
    hm = base_novel_hm(local, base, novel)
    assert min(local, base, novel) - 1e-9 <= hm <= (local + base + novel) / 3 + 1e-9


def test_hm_bad_input():
    with pytest.raises(MetricInputError, match="local is None"):
        base_novel_hm(None, 50, 50)
    with pytest.raises(MetricInputError, match="novel is nan"):
        base_novel_hm(50, 50, math.nan)
    with pytest.raises(MetricInputError, match="base = 120.0 is outside"):
        base_novel_hm(50, 120, 50)
    with pytest.raises(MetricInputError, match="terms must be 3"):
        base_novel_hm(50, 50, 50, terms=4)


# ---------------------------------------------------------------- seeds


def test_mean_std_hand_computed():
    r = mean_std([60.0, 62.0, 64.0])
    assert (r.mean, r.std, r.n) == (62.0, 2.0, 3)
    assert str(r) == "62.00 ± 2.00"
    assert mean_std([60.0, 62.0, 64.0], ddof=0).std == pytest.approx(math.sqrt(8 / 3))
    assert mean_std([55.5]).std == 0.0


def test_mean_std_bad_input():
    with pytest.raises(MetricInputError, match="values is empty"):
        mean_std([])
    with pytest.raises(MetricInputError, match=r"values\[1\] is nan"):
        mean_std([1.0, math.nan])
    with pytest.raises(MetricInputError, match=r"values\[0\] is None"):
        mean_std([None, 1.0])


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_is_reproducible_and_seeded():
    data = [[100, 0, 100, 100, 0], [0, 100, 0, 0], [100, 100, 100, 0, 100, 100]]
    a = bootstrap_ci(data, n_resamples=300, seed=7)
    b = bootstrap_ci(data, n_resamples=300, seed=7)
    c = bootstrap_ci(data, n_resamples=300, seed=8)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    # the estimate is the mean of client means: (60 + 25 + 500/6) / 3
    assert a.estimate == pytest.approx((60 + 25 + 500 / 6) / 3)
    assert a.low <= a.estimate <= a.high


def test_bootstrap_constant_scores_collapse():
    ci = bootstrap_ci([[70.0] * 5, [70.0] * 3], n_resamples=50)
    assert ci.low == ci.high == ci.estimate == 70.0


def test_bootstrap_width_matches_binomial_theory():
    # one client, 400 samples of 0/100 with p = 0.5: CI half-width ~ 1.96 * sqrt(.25/400) * 100
    rng = np.random.default_rng(0)
    scores = (rng.permutation(np.repeat([0.0, 100.0], 200))).tolist()
    ci = bootstrap_ci([scores], n_resamples=2000, seed=3)
    assert (ci.high - ci.low) / 2 == pytest.approx(1.96 * math.sqrt(0.25 / 400) * 100, rel=0.15)


def test_bootstrap_client_level_spread_widens_interval():
    # the same samples, once as one client and once split into clients of very different means
    clients = [[90.0] * 20, [10.0] * 20, [80.0] * 20, [20.0] * 20]
    pooled = bootstrap_ci([sum(clients, [])], n_resamples=500, seed=0)
    split = bootstrap_ci(clients, n_resamples=500, seed=0)
    assert (split.high - split.low) > 2 * (pooled.high - pooled.low)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.floats(0, 100), min_size=1, max_size=8), min_size=1, max_size=5))
def test_bootstrap_bounds(data):
    ci = bootstrap_ci(data, n_resamples=100, seed=1)
    lo = min(min(c) for c in data)
    hi = max(max(c) for c in data)
    assert lo - 1e-9 <= ci.low <= ci.high <= hi + 1e-9


def test_bootstrap_bad_input():
    with pytest.raises(MetricInputError, match="per_client_scores is empty"):
        bootstrap_ci([])
    with pytest.raises(MetricInputError, match=r"per_client_scores\[1\] is empty"):
        bootstrap_ci([[1.0], []])
    with pytest.raises(MetricInputError, match=r"per_client_scores\[0\]\[1\] is nan"):
        bootstrap_ci([[1.0, math.nan]])
    with pytest.raises(MetricInputError, match="level"):
        bootstrap_ci([[1.0]], level=95)
    with pytest.raises(MetricInputError, match="n_resamples"):
        bootstrap_ci([[1.0]], n_resamples=0)


# ---------------------------------------------------------------- per-domain


def test_per_domain_hand_computed():
    scores = {"c0": 70, "c1": 90, "c2": 50, "c3": 60, "c4": 80}
    domains = {"c0": "sketch", "c1": "sketch", "c2": "real", "c3": "real", "c4": "real"}
    r = per_domain_accuracy(scores, domains)
    assert list(r) == ["sketch", "real"]
    assert (r["sketch"].mean, r["sketch"].std, r["sketch"].n) == (80.0, 10.0, 2)
    assert r["real"].mean == pytest.approx(63.333333333)
    assert r["real"].std == pytest.approx(np.std([50, 60, 80]))
    assert per_domain_accuracy(scores, domains, ddof=1)["sketch"].std == pytest.approx(
        math.sqrt(200)
    )


def test_per_domain_bad_input():
    with pytest.raises(MetricInputError, match="no domain for client 'c1'"):
        per_domain_accuracy({"c0": 1, "c1": 2}, {"c0": "a"})
    with pytest.raises(MetricInputError, match=r"client_scores\['c0'\] is None"):
        per_domain_accuracy({"c0": None}, {"c0": "a"})
    with pytest.raises(MetricInputError, match="empty"):
        per_domain_accuracy({}, {})
