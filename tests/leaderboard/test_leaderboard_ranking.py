"""Rank groups from overlapping 95% intervals: a hand-worked example and invariants."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard.model import Entry, Leaderboard
from leaderboard.ranking import rank, rank_entries


def entry(
    method: str,
    mean: float | None,
    ci=None,
    *,
    bench="drake",
    scenario="dynamic-hetero",
    metric="self_a_last",
    protocol="self_others",
) -> Entry:
    metrics = {"self_a_auc": {"mean": 1.0, "std": None, "ci95": None, "per_seed": None}}
    if protocol != "self_others":
        metrics = {}
    if mean is not None:
        metrics[metric] = {"mean": mean, "std": None, "ci95": ci, "per_seed": None}
    return Entry.model_validate(
        {
            "benchmark": {"name": bench, "version": "1.0", "manifest_sha256": None},
            "scenario": {
                "name": scenario,
                "order": scenario.split("-")[0] if protocol == "self_others" else "static",
                "models": "hetero" if protocol == "self_others" else "homo",
                "partition": {},
            },
            "protocol": protocol,
            "method": {"name": method, "hyperparameters": {}, "config_sha256": None},
            "models_per_client": None,
            "seeds": None,
            "n_seeds": None,
            "metrics": metrics,
            "curve": None,
            "cost": None,
            "scoring": None,
            "software": None,
            "submitter": "t",
            "date": "2025-01-01",
            "link": None,
            "provenance": "reported",
            "citation": {"paper": "P", "table": "Tab. 1", "note": None},
        }
    )


def test_hand_worked_groups() -> None:
    entries = [
        entry("e", 64.0),  # point interval [64, 64]
        entry("a", 70.0, [68.0, 72.0]),
        entry("g", None),  # no primary metric: unranked, last
        entry("c", 67.5, [67.0, 68.0]),  # upper bound touches a's lower bound: overlaps
        entry("f", 63.9),  # 63.9 < d's lower bound 64: new group
        entry("b", 69.0, [66.0, 72.0]),
        entry("d", 65.0, [64.0, 66.0]),  # 66 < 68 (a's lower bound): new group, d leads
    ]
    rows = rank_entries(entries, "self_a_last", higher_is_better=True)
    assert [(r.entry.method.name, r.group) for r in rows] == [
        ("a", 1),
        ("b", 1),
        ("c", 1),
        ("d", 2),
        ("e", 2),
        ("f", 3),
        ("g", None),
    ]
    assert rows[4].interval == (64.0, 64.0) and rows[-1].interval is None


def test_lower_is_better_mirrors() -> None:
    kw = {"bench": "tap", "scenario": "vilt-fmnist", "metric": "mse", "protocol": "generation"}
    entries = [
        entry("x", 0.60, [0.50, 0.70], **kw),
        entry("y", 0.55, [0.54, 0.56], **kw),
        entry("z", 0.75, [0.71, 0.79], **kw),  # lower bound 0.71 > group 2 leader w's 0.58
        entry("w", 0.58, None, **kw),  # 0.58 > 0.56: new group
    ]
    (board,) = rank(Leaderboard(schema_version="1.0", entries=entries))
    assert board.primary == "mse" and not board.higher_is_better
    assert [(r.entry.method.name, r.group) for r in board.rows] == [
        ("y", 1),
        ("w", 2),
        ("x", 2),
        ("z", 3),
    ]


def test_rank_filters_and_separates_scenarios() -> None:
    entries = [
        entry("a", 60.0),
        entry("b", 50.0, scenario="static-hetero"),
        entry("c", 40.0, bench="hflb"),
    ]
    board = Leaderboard(schema_version="1.0", entries=entries)
    assert [(b.benchmark, b.scenario) for b in rank(board)] == [
        ("drake", "dynamic-hetero"),
        ("drake", "static-hetero"),
        ("hflb", "dynamic-hetero"),
    ]
    assert [b.scenario for b in rank(board, "drake", "static-hetero")] == ["static-hetero"]
    assert rank(board, "tap") == []


scored = st.lists(
    st.tuples(st.floats(0.0, 100.0), st.one_of(st.none(), st.floats(0.0, 10.0))),
    min_size=1,
    max_size=15,
)


@settings(max_examples=150, deadline=None)
@given(scored)
def test_grouping_invariants(values) -> None:
    entries = []
    for i, (mean, half) in enumerate(values):
        ci = None if half is None else [mean - half, mean + half]
        entries.append(entry(f"m{i}", mean, ci))
    rows = rank_entries(entries, "self_a_last", higher_is_better=True)
    means = [r.value for r in rows]
    groups = [r.group for r in rows]
    assert means == sorted(means, reverse=True)
    assert groups[0] == 1
    assert all(b - a in (0, 1) for a, b in zip(groups, groups[1:]))
    leaders = {}
    for r in rows:
        leader = leaders.setdefault(r.group, r)
        assert r.interval[1] >= leader.interval[0]  # every member overlaps its leader
    for g in range(2, groups[-1] + 1):
        assert leaders[g].interval[1] < leaders[g - 1].interval[0]  # a new group does not


def _variant(method: str, mean: float, hyperparameters: dict, config: str | None) -> Entry:
    doc = entry(method, mean).model_dump()
    doc["method"] = {"name": method, "hyperparameters": hyperparameters,
                     "config_sha256": config}
    return Entry.model_validate(doc)


def test_rows_of_one_method_are_told_apart_by_what_differs() -> None:
    a, b = "a" * 64, "b" * 64
    rows = rank_entries(
        [
            _variant("disentafl", 60.0, {"lr": 0.001, "post_steps": 10}, a),
            _variant("disentafl", 50.0, {"lr": 0.001, "post_steps": 0}, b),
            _variant("fedavg", 40.0, {"lr": 0.001}, a),
            _variant("ditto", 30.0, {"lr": 0.001}, a),
            _variant("ditto", 20.0, {"lr": 0.001}, b),
        ],
        "self_a_last",
        True,
    )
    assert [r.label for r in rows] == [
        "disentafl (post_steps=10)",
        "disentafl (post_steps=0)",
        "fedavg",
        "ditto (config aaaaaaaa)",
        "ditto (config bbbbbbbb)",
    ]


def test_a_hyperparameter_only_one_sibling_sets_reads_unset_on_the_other() -> None:
    rows = rank_entries(
        [_variant("tap", 2.0, {"post_steps": 5}, "c" * 64), _variant("tap", 1.0, {}, "d" * 64)],
        "self_a_last",
        True,
    )
    assert [r.label for r in rows] == ["tap (post_steps=5)", "tap (post_steps=unset)"]
