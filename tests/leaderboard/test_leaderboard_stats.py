"""Per-seed summaries: golden values and invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard.errors import SubmissionError
from leaderboard.stats import check_consistent, summarize

# Closed-form Student-t quantiles (Hill 1970 / the standard special cases), p = 0.975:
#   nu = 2: t = (2p - 1) / sqrt(2 p (1 - p))                                  (= 4.3027)
#   nu = 4: a = 4 p (1 - p), q = cos(arccos(sqrt(a)) / 3) / sqrt(a), t = 2 sqrt(q - 1)  (= 2.7764)
_P = 0.975
T_2 = (2 * _P - 1) / math.sqrt(2 * _P * (1 - _P))
_A = 4 * _P * (1 - _P)
T_4 = 2 * math.sqrt(math.cos(math.acos(math.sqrt(_A)) / 3) / math.sqrt(_A) - 1)


def test_closed_form_quantiles_match_tables() -> None:
    assert round(T_2, 4) == 4.3027 and round(T_4, 4) == 2.7764


def test_three_seeds_golden() -> None:
    s = summarize([1.0, 2.0, 3.0])
    half = T_2 * 1.0 / math.sqrt(3)  # std = 1 exactly
    assert s["mean"] == 2.0
    assert s["std"] == 1.0
    assert s["ci95"] == pytest.approx([2.0 - half, 2.0 + half], abs=1e-12)
    assert s["per_seed"] == [1.0, 2.0, 3.0]


def test_five_seeds_golden() -> None:
    values = [60.0, 62.0, 64.0, 66.0, 68.0]  # mean 64, squared deviations 40, std sqrt(10)
    s = summarize(values)
    assert s["mean"] == 64.0
    assert s["std"] == pytest.approx(math.sqrt(10.0), abs=1e-12)
    half = T_4 * math.sqrt(10.0) / math.sqrt(5)
    assert s["ci95"] == pytest.approx([64.0 - half, 64.0 + half], abs=1e-12)


def test_single_seed_has_zero_std_and_no_interval() -> None:
    assert summarize([42.5]) == {"mean": 42.5, "std": 0.0, "ci95": None, "per_seed": [42.5]}


@pytest.mark.parametrize("bad", [[], [float("nan")], [1.0, float("inf")]])
def test_summarize_refuses(bad: list[float]) -> None:
    with pytest.raises(SubmissionError):
        summarize(bad)


values_strategy = st.lists(
    st.floats(min_value=0.0, max_value=100.0, allow_nan=False), min_size=1, max_size=12
)


@settings(max_examples=200, deadline=None)
@given(values_strategy)
def test_summary_invariants(values: list[float]) -> None:
    s = summarize(values)
    assert min(values) - 1e-9 <= s["mean"] <= max(values) + 1e-9
    assert s["std"] >= 0.0
    if len(values) == 1:
        assert s["ci95"] is None
    else:
        lo, hi = s["ci95"]
        assert lo <= s["mean"] <= hi
        assert hi - s["mean"] == pytest.approx(s["mean"] - lo, abs=1e-9)
    # what summarize produces always passes the consistency check
    check_consistent("m", s["mean"], s["std"], s["ci95"], s["per_seed"], len(values))


@settings(max_examples=100, deadline=None)
@given(values_strategy, st.floats(min_value=0.001, max_value=10.0))
def test_shifted_mean_is_caught(values: list[float], shift: float) -> None:
    s = summarize(values)
    with pytest.raises(SubmissionError, match="mean"):
        check_consistent("m", s["mean"] + shift, s["std"], None, s["per_seed"], len(values))


def test_consistency_failures_name_the_field() -> None:
    s = summarize([1.0, 2.0, 3.0])
    with pytest.raises(SubmissionError, match=r"m\.std"):
        check_consistent("m", 2.0, 0.5, s["ci95"], s["per_seed"], 3)
    with pytest.raises(SubmissionError, match=r"m\.ci95"):
        check_consistent("m", 2.0, 1.0, [1.0, 3.0], s["per_seed"], 3)
    with pytest.raises(SubmissionError, match=r"m\.per_seed.*2 values for 3 seeds"):
        check_consistent("m", 1.5, 0.7071, None, [1.0, 2.0], 3)
    with pytest.raises(SubmissionError, match="contain the mean"):
        check_consistent("m", 5.0, None, [1.0, 3.0], None, None)
    with pytest.raises(SubmissionError, match="single seed"):
        check_consistent("m", 1.0, 0.0, [1.0, 1.0], [1.0], 1)
