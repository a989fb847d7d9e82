"""A_last, A_AUC and forgetting: hand-computed values and bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluators import MetricInputError, a_auc, a_last, forgetting


def test_a_last():
    assert a_last([40.0, 55.0, 61.5]) == 61.5
    assert a_last([12]) == 12.0


def test_a_auc_hand_computed():
    # trapezoids over [5, 10] and [10, 20]: 5 * 50 + 10 * 70 = 950, span 15
    assert a_auc([40.0, 60.0, 80.0], [5, 10, 20]) == pytest.approx(950 / 15)
    # equally spaced default points 0..3: (10+20)/2 + (20+30)/2 + (30+60)/2 = 85, span 3
    assert a_auc([10, 20, 30, 60]) == pytest.approx(85 / 3)
    # FedMosaic-style evaluation every 5 rounds, by samples seen (uneven)
    assert a_auc([50, 70], [1000, 3000]) == pytest.approx(60.0)
    # single point: that value
    assert a_auc([42.0], [5]) == 42.0
    assert a_auc([42.0]) == 42.0


@given(
    st.lists(st.floats(0, 100), min_size=1, max_size=10),
    st.data(),
)
def test_a_auc_lies_between_min_and_max(curve, data):
    steps = data.draw(st.lists(st.floats(0.5, 50), min_size=len(curve), max_size=len(curve)))
    points = [sum(steps[: i + 1]) for i in range(len(curve))]
    value = a_auc(curve, points)
    assert min(curve) - 1e-9 <= value <= max(curve) + 1e-9


def test_a_auc_bad_input():
    with pytest.raises(MetricInputError, match=r"curve\[2\] is nan"):
        a_auc([1.0, 2.0, math.nan], [1, 2, 3])
    with pytest.raises(MetricInputError, match=r"curve\[1\] is None"):
        a_auc([1.0, None])
    with pytest.raises(MetricInputError, match="curve is empty"):
        a_auc([])
    with pytest.raises(MetricInputError, match="length mismatch"):
        a_auc([1, 2], [1, 2, 3])
    with pytest.raises(MetricInputError, match=r"points\[2\] = 2.0 follows points\[1\] = 2.0"):
        a_auc([1, 2, 3], [1, 2, 2])
    with pytest.raises(MetricInputError, match=r"curve\[0\] must be a number"):
        a_last(["61"])
    with pytest.raises(MetricInputError, match="curve is empty"):
        a_last([])


def test_forgetting_hand_computed():
    # a: best 80 then 50 -> 30; b: best 70, final 75 -> -5 (improved); c is the last task
    assert forgetting({"a": [80, 60, 50], "b": [70, 75], "c": [90]}, ["a", "b", "c"]) == 12.5
    # order matters: the last-learnt task is excluded
    assert forgetting({"a": [80, 60, 50], "b": [70, 75]}, ["b", "a"]) == -5.0


def test_forgetting_bad_input():
    with pytest.raises(MetricInputError, match="at least two tasks"):
        forgetting({"a": [1, 2]}, ["a"])
    with pytest.raises(MetricInputError, match="no curve for task 'b'"):
        forgetting({"a": [1, 2]}, ["b", "a"])
    with pytest.raises(MetricInputError, match="needs a score before the final one"):
        forgetting({"a": [1], "b": [1]}, ["a", "b"])
    with pytest.raises(MetricInputError, match=r"task_curves\['a'\]\[1\] is nan"):
        forgetting({"a": [1, math.nan], "b": [1]}, ["a", "b"])
    with pytest.raises(MetricInputError, match="repeats a task"):
        forgetting({"a": [1, 2]}, ["a", "a"])
