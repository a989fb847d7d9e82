"""Submitting seeds of a drake-synth run: entry values, merging, ranking."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from leaderboard.errors import SubmissionError
from leaderboard.ranking import rank
from leaderboard.submit import build_entry, load_run, submit
from leaderboard.validate import load_leaderboard, validate_file

LINK = "https://github.com/example/drake-runs"
_P = 0.975
T_2 = (2 * _P - 1) / math.sqrt(2 * _P * (1 - _P))  # closed-form t quantile, 2 dof


def _submit(runs, board, data_dir, **kw):
    return submit(
        runs,
        submitter="Jane Doe",
        link=LINK,
        leaderboard_path=board,
        data_dirs=[data_dir],
        date="2025-06-02",
        **kw,
    )


def test_three_seeds_submit_and_rank(three_runs, empty_board, data_dir, make_result) -> None:
    entry = _submit(three_runs, empty_board, data_dir)
    docs = [make_result(s) for s in (0, 1, 2)]
    per_seed = [d["metrics"]["self_a_last"] for d in docs]
    stats = entry.metrics["self_a_last"]
    assert stats.per_seed == per_seed
    assert stats.mean == pytest.approx(np.mean(per_seed), abs=1e-12)
    assert stats.std == pytest.approx(np.std(per_seed, ddof=1), abs=1e-12)
    half = T_2 * np.std(per_seed, ddof=1) / math.sqrt(3)
    assert stats.ci95 == pytest.approx([np.mean(per_seed) - half, np.mean(per_seed) + half])
    assert entry.seeds == [0, 1, 2] and entry.n_seeds == 3
    assert entry.curve.rounds == [4, 8, 12, 16]
    assert entry.curve.self == pytest.approx(np.mean([d["curves"]["self"] for d in docs], axis=0))
    assert entry.cost.comm_bytes_up_total == 16 * 1001  # mean over seeds of 16 x (1000 + seed)
    assert entry.cost.comm_bytes_down_total == 16 * 2000
    assert entry.cost.rounds == 16
    assert entry.cost.wall_time_s == 11.0 and entry.cost.peak_rss_mb == 502.0
    assert entry.cost.flops_extra_pct is None
    assert entry.provenance == "reproduced" and entry.citation is None
    assert entry.date == "2025-06-02" and entry.link == LINK

    board = load_leaderboard(empty_board)
    assert [e.identity() for e in board.entries] == [entry.identity()]
    (ranked,) = rank(board, "drake-synth", "dynamic-hetero")
    assert ranked.primary == "self_a_last" and ranked.rows[0].group == 1
    assert validate_file(empty_board, None) == ("leaderboard", 1)


def test_seed_order_does_not_matter(three_runs, tmp_path, data_dir) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        path.write_text('{"schema_version": "1.0", "entries": []}')
    _submit(three_runs, a, data_dir)
    _submit(three_runs[::-1], b, data_dir)
    assert a.read_bytes() == b.read_bytes()


def test_duplicate_refused_then_replaced(
    three_runs, empty_board, data_dir, make_result, write_run, tmp_path
) -> None:
    _submit(three_runs, empty_board, data_dir)
    before = empty_board.read_bytes()
    with pytest.raises(SubmissionError, match="already on the leaderboard; pass --replace"):
        _submit(three_runs, empty_board, data_dir)
    assert empty_board.read_bytes() == before
    # same identity, a fourth seed: replace
    extra = write_run(tmp_path / "runs" / "seed3", make_result(3))
    entry = _submit([*three_runs, extra], empty_board, data_dir, replace=True)
    board = load_leaderboard(empty_board)
    assert len(board.entries) == 1 and board.entries[0].seeds == [0, 1, 2, 3] == entry.seeds


def test_methods_rank_with_ci_groups(
    tmp_path, empty_board, data_dir, make_result, write_run
) -> None:
    # three methods: two close ones (overlapping CIs) and one far below
    for method, level in (("fedavg", 60.0), ("fedprox", 60.5), ("sft", 20.0)):
        runs = [
            write_run(tmp_path / method / str(s), make_result(s, method, level)) for s in range(3)
        ]
        _submit(runs, empty_board, data_dir)
    (ranked,) = rank(load_leaderboard(empty_board))
    methods = [r.entry.method.name for r in ranked.rows]
    groups = [r.group for r in ranked.rows]
    means = [r.value for r in ranked.rows]
    assert means == sorted(means, reverse=True)
    assert methods[-1] == "sft" and groups == [1, 1, 2]


def test_submit_into_seeded_board_keeps_reported_entries(
    three_runs, seeded_board, data_dir
) -> None:
    before = json.loads(seeded_board.read_text())["entries"]
    _submit(three_runs, seeded_board, data_dir)
    after = json.loads(seeded_board.read_text())["entries"]
    assert [e for e in after if e["provenance"] == "reported"] == before
    assert len(after) == len(before) + 1


def test_single_seed(three_runs, empty_board, data_dir) -> None:
    entry = _submit(three_runs[:1], empty_board, data_dir)
    stats = entry.metrics["self_a_last"]
    assert stats.std == 0.0 and stats.ci95 is None and entry.n_seeds == 1


def test_manifest_known_from_the_known_list(
    three_runs, empty_board, tmp_path, manifest_sha
) -> None:
    known = tmp_path / "known.json"
    known.write_text(
        json.dumps({"schema_version": "1.0", "manifests": {"drake-synth": {"1.0": [manifest_sha]}}})
    )
    submit(
        three_runs,
        submitter="Jane",
        link=LINK,
        leaderboard_path=empty_board,
        known_manifests_path=known,
    )
    assert len(load_leaderboard(empty_board).entries) == 1


def test_local_manifest_must_match_and_be_of_the_benchmark(
    three_runs, empty_board, tmp_path, make_result, write_run
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text('{"name": "drake-synth", "version": "1.0", "seed": 1}')
    with pytest.raises(SubmissionError, match="matches no known manifest of drake-synth 1.0"):
        submit(
            three_runs, submitter="J", link=LINK, leaderboard_path=empty_board, data_dirs=[other]
        )
    # a manifest that declares another benchmark cannot vouch for a drake-synth run
    raw = b'{"name": "synth-cls", "version": "1.0"}'
    (other / "manifest.json").write_bytes(raw)
    doc = make_result(0)
    doc["benchmark"]["manifest_sha256"] = hashlib.sha256(raw).hexdigest()
    run = write_run(tmp_path / "run", doc)
    with pytest.raises(SubmissionError, match="is the manifest of benchmark 'synth-cls'"):
        submit([run], submitter="J", link=LINK, leaderboard_path=empty_board, data_dirs=[other])
    with pytest.raises(SubmissionError, match="no manifest.json found"):
        submit(
            [run],
            submitter="J",
            link=LINK,
            leaderboard_path=empty_board,
            data_dirs=[tmp_path / "run"],
        )


def test_runs_of_different_experiments_are_refused(
    tmp_path, empty_board, data_dir, make_result, write_run
) -> None:
    a = write_run(tmp_path / "a", make_result(0))
    b = write_run(tmp_path / "b", make_result(1, method="fedprox"))
    with pytest.raises(SubmissionError, match="method: seed 1 has .* but seed 0 has"):
        _submit([a, b], empty_board, data_dir)
    c = write_run(tmp_path / "c", make_result(0))
    with pytest.raises(SubmissionError, match="duplicate seeds"):
        _submit([a, c], empty_board, data_dir)


def test_submitter_and_link_required(three_runs, empty_board, data_dir) -> None:
    with pytest.raises(SubmissionError, match="submitter: required"):
        submit(
            three_runs,
            submitter=None,
            link=LINK,
            leaderboard_path=empty_board,
            data_dirs=[data_dir],
        )
    with pytest.raises(SubmissionError, match="link: required"):
        submit(
            three_runs, submitter="J", link="", leaderboard_path=empty_board, data_dirs=[data_dir]
        )


def test_build_entry_from_results_file_path(three_runs) -> None:
    runs = [load_run(p / "results.json") for p in three_runs]
    entry = build_entry(runs, submitter="J", link=LINK, date="2025-01-01")
    assert entry.method.config_sha256 == runs[0].method.config_sha256
    assert entry.models_per_client == runs[0].models_per_client


def test_results_from_drake_eval_shape_are_accepted(
    tmp_path, empty_board, data_dir, make_result, write_run
) -> None:
    """The layout the local runtime writes: sorted keys, nested partition flattened, no flops."""
    runs = []
    for s in range(3):
        doc = make_result(s)
        doc["scenario"]["partition"] = {
            "n_clients": 10,
            "rounds_per_task": 5,
            "rule": "by_task",
            "stream_rounds": 20,
        }
        del doc["cost"]["flops_extra_pct"]
        doc["scoring"] = {"bertscore_model": None, "mc_scoring": "generate"}
        folder = tmp_path / f"eval{s}"
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        runs.append(folder)
    entry = _submit(runs, empty_board, data_dir)
    assert entry.scoring.mc_scoring == "generate" and entry.cost.flops_extra_pct is None


def test_default_date_is_today(three_runs, empty_board, data_dir) -> None:
    import datetime as dt

    entry = submit(
        three_runs, submitter="J", link=LINK, leaderboard_path=empty_board, data_dirs=[data_dir]
    )
    assert (
        abs(dt.date.fromisoformat(entry.date) - dt.datetime.now(dt.timezone.utc).date()).days <= 1
    )


def test_run_dir_without_results(tmp_path: Path, empty_board, data_dir) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SubmissionError, match="results.json: cannot read"):
        _submit([tmp_path / "empty"], empty_board, data_dir)


def test_drake_build_manifest_version_must_match(
    tmp_path, empty_board, make_result, write_run
) -> None:
    """``drake build`` writes {"benchmark": name, "version": v, ...} at the top level."""
    data = tmp_path / "data" / "drake-synth"
    data.mkdir(parents=True)
    raw = json.dumps({"benchmark": "drake-synth", "version": "2.0", "seed": 0}).encode()
    (data / "manifest.json").write_bytes(raw)
    doc = make_result(0)
    doc["benchmark"]["manifest_sha256"] = hashlib.sha256(raw).hexdigest()
    run = write_run(tmp_path / "run", doc)
    with pytest.raises(SubmissionError, match="manifest of drake-synth version '2.0'"):
        submit(
            [run],
            submitter="J",
            link=LINK,
            leaderboard_path=empty_board,
            data_dirs=[tmp_path / "data"],
        )
