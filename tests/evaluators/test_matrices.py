"""Self/Others (plain and anytime) and personalised vs global: hand-computed values."""

from __future__ import annotations

import math

import pytest

from evaluators import (
    MetricInputError,
    a_auc,
    personalised_vs_global,
    self_others,
    self_others_curves,
)

TASKS = [["a", "b"], ["c"], ["d", "e"]]
SCORES = {
    0: {"a": 80, "b": 60, "c": 30, "d": 20, "e": 10},
    1: {"a": 40, "b": 20, "c": 90, "d": 50, "e": 30},
    2: {"a": 10, "b": 30, "c": 50, "d": 70, "e": 90},
}


def test_self_others_hand_computed():
    r = self_others(SCORES, TASKS)
    # Self: (80+60)/2 = 70, 90, (70+90)/2 = 80 -> 80
    assert r.per_client_self == {0: 70.0, 1: 90.0, 2: 80.0}
    assert r.self_score == pytest.approx(80.0)
    # Others: c0 on c,d,e = 20; c1 on a,b,d,e = 35; c2 on a,b,c = 30 -> 85/3
    assert r.per_client_others == {0: 20.0, 1: 35.0, 2: 30.0}
    assert r.others_score == pytest.approx(85 / 3)


def test_self_others_keyed_by_name_and_list_of_rows():
    named = {f"client{k}": v for k, v in SCORES.items()}
    tasks = {f"client{k}": t for k, t in enumerate(TASKS)}
    assert self_others(named, tasks).others_score == pytest.approx(85 / 3)
    assert self_others([SCORES[0], SCORES[1], SCORES[2]], TASKS).self_score == pytest.approx(80)


def test_anytime_first_k_tasks():
    r = self_others(SCORES, TASKS, started=1)
    # Self on a, c, d: 80, 90, 70 -> 80. Others: c0 on c,d = 25; c1 on a,d = 45; c2 on a,c = 30
    assert r.self_score == pytest.approx(80.0)
    assert r.per_client_others == {0: 25.0, 1: 45.0, 2: 30.0}
    assert r.others_score == pytest.approx(100 / 3)


def test_anytime_started_task_set():
    r = self_others(SCORES, TASKS, started={"a", "c", "d", "e"})
    # Self: 80, 90, 80. Others: c0 on c,d,e = 20; c1 on a,d,e = 40; c2 on a,c = 30
    assert r.self_score == pytest.approx(250 / 3)
    assert r.others_score == pytest.approx(30.0)


def test_curves_feed_a_auc():
    later = {c: {t: s + 10 for t, s in row.items()} for c, row in SCORES.items()}
    self_curve, others_curve = self_others_curves(
        [SCORES, later], TASKS, started_per_point=[1, None]
    )
    assert self_curve == pytest.approx([80.0, 90.0])
    assert others_curve == pytest.approx([100 / 3, 85 / 3 + 10])
    assert a_auc(self_curve, [5, 10]) == pytest.approx(85.0)


def test_self_others_bad_input():
    with pytest.raises(MetricInputError, match="at least two clients"):
        self_others({0: {"a": 1}}, [["a"]])
    missing = {0: dict(SCORES[0]), 1: dict(SCORES[1]), 2: dict(SCORES[2])}
    del missing[1]["d"]
    with pytest.raises(MetricInputError, match="scores\\[1\\] has no score for task 'd'"):
        self_others(missing, TASKS)
    nan = {0: dict(SCORES[0]), 1: dict(SCORES[1]), 2: dict(SCORES[2])}
    nan[2]["a"] = math.nan
    with pytest.raises(MetricInputError, match=r"scores\[2\]\['a'\] is nan"):
        self_others(nan, TASKS)
    none = {0: dict(SCORES[0]), 1: dict(SCORES[1]), 2: dict(SCORES[2])}
    none[0]["b"] = None
    with pytest.raises(MetricInputError, match=r"scores\[0\]\['b'\] is None"):
        self_others(none, TASKS)
    with pytest.raises(MetricInputError, match="length mismatch"):
        self_others([SCORES[0]], TASKS)
    with pytest.raises(MetricInputError, match="no row for client 2"):
        self_others({0: SCORES[0], 1: SCORES[1]}, TASKS)
    with pytest.raises(MetricInputError, match="client 1 has no started task"):
        self_others(SCORES, TASKS, started={"a", "d"})
    with pytest.raises(MetricInputError, match=r"client_tasks\[1\] must be a non-empty list"):
        self_others(SCORES, [["a"], [], ["d"]])
    with pytest.raises(MetricInputError, match="client_tasks is empty"):
        self_others({}, [])
    with pytest.raises(MetricInputError, match="evaluation point 1"):
        self_others_curves([SCORES, missing], TASKS)


def test_personalised_vs_global():
    r = personalised_vs_global({"a": 80, "b": 60}, {"a": 70, "b": 50}, {"a": 3, "b": 1})
    assert r == {"personalised": 75.0, "global": 65.0, "gap": 10.0}
    assert personalised_vs_global({"a": 80, "b": 60}, {"a": 70, "b": 50})["global"] == 60.0
    with pytest.raises(MetricInputError, match="different clients"):
        personalised_vs_global({"a": 1}, {"b": 1})
    with pytest.raises(MetricInputError, match=r"global_scores\['a'\] is None"):
        personalised_vs_global({"a": 1}, {"a": None})
    with pytest.raises(MetricInputError, match="positive sum"):
        personalised_vs_global({"a": 1}, {"a": 1}, {"a": 0})
    with pytest.raises(MetricInputError, match="empty"):
        personalised_vs_global({}, {})


def test_anytime_started_per_client():
    r = self_others(SCORES, TASKS, started={0: {"a"}, 1: {"c"}, 2: {"d", "e"}})
    # Self: 80, 90, 80. Others: c0 on c,d,e = 20; c1 on a,d,e = 40; c2 on a,c = 30
    assert r.per_client_self == {0: 80.0, 1: 90.0, 2: 80.0}
    assert r.others_score == pytest.approx(30.0)
    # a task another client has not started yet stays out of Others
    r = self_others(SCORES, TASKS, started={0: {"a"}, 1: {"c"}, 2: {"d"}})
    assert r.per_client_others == {0: 25.0, 1: 45.0, 2: 30.0}
    with pytest.raises(MetricInputError, match="no entry for client 2"):
        self_others(SCORES, TASKS, started={0: {"a"}, 1: {"c"}})
