"""The paper-reported seed entries: build from sources, golden values, Tab. 2 order."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pytest

from leaderboard.cli import add_cli
from leaderboard.errors import SubmissionError
from leaderboard.seed import build_reported_entries, parse_cell, rebuild
from leaderboard.validate import DEFAULT_LEADERBOARD_PATH, load_leaderboard, validate_file

REPORTED = Path(__file__).resolve().parents[2] / "leaderboard" / "reported"


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="drake")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


@pytest.fixture(scope="module")
def board():
    return load_leaderboard(DEFAULT_LEADERBOARD_PATH)


def _find(board, benchmark, scenario, method):
    (entry,) = [
        e
        for e in board.entries
        if (e.benchmark.name, e.scenario.name, e.method.name) == (benchmark, scenario, method)
    ]
    return entry


def test_committed_reported_entries_equal_the_build(board) -> None:
    built = [e.model_dump(mode="json") for e in build_reported_entries()]
    committed = [e.model_dump(mode="json") for e in board.entries if e.provenance == "reported"]
    assert committed == built


def test_seeded_leaderboard_validates() -> None:
    assert validate_file(DEFAULT_LEADERBOARD_PATH, None) == ("leaderboard", 380)


def test_entry_counts_per_paper(board) -> None:
    papers = Counter(e.citation.paper.split(" (")[0] for e in board.entries)
    # FedMosaic: Tab. 2 and 12 (8 blocks x 10 methods) + Tab. 13 (2 x 5); pFedMMA: 7 datasets x
    # 6 + CIFAR 2 x 6 alphas x 6 + DomainNet/Office 2 x 5; FediLoRA: 12 x 3; TAP: see omissions.
    assert papers == {"FedMosaic": 90, "pFedMMA": 124, "FediLoRA": 36, "TAP": 130}
    tables = Counter((e.citation.paper.split(" (")[0], e.citation.table) for e in board.entries)
    assert tables[("FedMosaic", "Tab. 2")] == 40 and tables[("FedMosaic", "Tab. 13")] == 10
    assert tables[("TAP", "Tab. 1")] == 12 and tables[("TAP", "Tab. 2")] == 38


# Golden values typed from the papers (not from the sources).
GOLDEN = [
    ("drake", "dynamic-hetero", "fedmosaic", "self_a_last", 67.86, 0.51),
    ("hflb", "static-hetero", "feddat", "others_a_last", 65.86, 0.37),
    ("drake", "static-homo", "sft", "self_a_last", 70.56, 0.27),
    ("hflb", "dynamic-homo", "fedmkt", "others_a_auc", 62.79, 0.86),
    ("drake", "dynamic-hetero-qwen", "fedmosaic", "others_a_auc", 48.51, 0.29),
    ("drake", "dynamic-homo-qwen", "feddpa", "self_a_auc", 60.21, 0.47),
    ("clip-base2novel/dtd", "pathological-16shot", "pfedmma", "hm", 67.35, None),
    ("clip-base2novel/oxford_pets", "pathological-16shot", "fedotp", "novel", 51.22, None),
    ("domainnet", "dir-alpha0.5-2clients-per-domain", "pfedmma", "acc_quickdraw", 61.44, None),
    ("office-caltech10", "dir-alpha0.5-2clients-per-domain", "promptfl", "accuracy", 16.34, None),
    ("cifar100-dir", "dir-alpha0.1", "pfedmma", "accuracy", 81.82, None),
    ("cifar10-dir", "dir-alpha10", "clip-zeroshot", "accuracy", 87.98, None),
    ("fedilora", "sam-llava-missing40-global", "fedilora", "rougeLsum", 25.61, None),
    ("fedilora", "next-preference-missing60-personalized", "flora", "rougeLsum", 29.48, None),
    ("tap", "vilt-vqa", "tap", "bertscore_f1", 72.99, 7.47),
    ("tap", "flava-mmlu", "local", "meteor", 20.89, 2.83),
    ("tap", "flava-caltech256", "feddat+post-train", "mse", 0.3718, 0.0176),
    ("tap", "vilt-agnews", "per-fedavg", "accuracy", 25.00, 0.05),
]


@pytest.mark.parametrize("bench,scen,method,metric,mean,std", GOLDEN)
def test_golden_values(board, bench, scen, method, metric, mean, std) -> None:
    stats = _find(board, bench, scen, method).metrics[metric]
    assert (stats.mean, stats.std, stats.ci95, stats.per_seed) == (mean, std, None, None)


@pytest.mark.parametrize(
    "bench,scen,method,metric",
    [
        ("tap", "vilt-fmnist", "feddat", "mse"),  # Avg. Gen. inconsistent with the cells
        ("tap", "vilt-caltech256", "feddat+post-train", "mse"),
        ("tap", "flava-fmnist", "feddat", "mse"),  # cell duplicates a neighbour
        ("tap", "vilt-fmnist", "per-fedavg", "mse"),  # diverged ("—")
        ("clip-base2novel/dtd", "pathological-16shot", "fedclip-adapter", "hm"),  # Tab. 1 empty
    ],
)
def test_uncertain_cells_are_left_out(board, bench, scen, method, metric) -> None:
    hits = [
        e
        for e in board.entries
        if (e.benchmark.name, e.scenario.name, e.method.name) == (bench, scen, method)
    ]
    assert all(metric not in e.metrics for e in hits)


def test_reported_tables_are_internally_consistent(board) -> None:
    """HM is the harmonic mean of local/base/novel; Avg. is the mean of the domains."""
    for e in board.entries:
        m = {k: v.mean for k, v in e.metrics.items()}
        if e.protocol == "base_novel":
            hm = 3 / (1 / m["local"] + 1 / m["base"] + 1 / m["novel"])
            assert abs(hm - m["hm"]) <= 0.011, e.identity()
        domains = [v for k, v in m.items() if k.startswith("acc_")]
        if domains:
            assert abs(sum(domains) / len(domains) - m["accuracy"]) <= 0.011, e.identity()
        assert e.provenance == "reported" and e.citation is not None
        assert e.citation.table.startswith("Tab. ")


TAB2_DRAKE_DYNAMIC_BY_SELF_A_LAST = [
    "fedmosaic",  # 67.86
    "fedavg",  # 66.11: the paper's FedIT (LoRA FedAvg)
    "sft",  # 65.79
    "takfl",  # 64.54
    "fedsim",  # 63.98
    "feddpa",  # 63.34
    "fedmkt",  # 61.38
    "ditto",  # 59.91
    "perada",  # 59.75
    "feddat",  # 58.47
]


def test_show_reproduces_fedmosaic_tab2_drake_dynamic(capsys) -> None:
    assert (
        cli("leaderboard", "show", "--benchmark", "drake", "--scenario", "dynamic-hetero", "--json")
        == 0
    )
    (board,) = json.loads(capsys.readouterr().out)
    assert board["primary"] == "self_a_last"
    assert [r["method"] for r in board["rows"]] == TAB2_DRAKE_DYNAMIC_BY_SELF_A_LAST
    assert [r["group"] for r in board["rows"]] == list(range(1, 11))  # no CIs: point intervals
    assert {r["source"] for r in board["rows"]} == {"FedMosaic Tab. 2"}


def test_show_table_lists_methods_in_rank_order(capsys) -> None:
    assert cli("leaderboard", "show", "--benchmark", "drake", "--scenario", "dynamic-hetero") == 0
    out = capsys.readouterr().out
    positions = [out.index(f" {m} ") for m in TAB2_DRAKE_DYNAMIC_BY_SELF_A_LAST]
    assert positions == sorted(positions)
    assert "ranked by self_a_last" in out and "FedMosaic Tab. 2" in out


@pytest.mark.parametrize(
    "cell,parsed",
    [
        ("65.79±0.20", (65.79, 0.2)),
        ("88.93", (88.93, None)),
        (None, None),
        ("0.3718±0.0176", (0.3718, 0.0176)),
    ],
)
def test_parse_cell(cell, parsed) -> None:
    assert parse_cell(cell, "c") == parsed


@pytest.mark.parametrize("cell", ["65.79 ± 0.20", "-1", "1e3", "—", "65.79±", 65.79])
def test_parse_cell_refuses(cell) -> None:
    with pytest.raises(SubmissionError):
        parse_cell(cell, "c")


def _source(tmp_path: Path, rows, omitted, **extra) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    doc = json.loads((REPORTED / "fedilora.json").read_text())
    doc["tables"] = [dict(doc["tables"][0], rows=rows, omitted=omitted)]
    doc.update(extra)
    (src / "x.json").write_text(json.dumps(doc))
    return src


def test_null_cells_need_a_reason(tmp_path: Path) -> None:
    with pytest.raises(SubmissionError, match="null cell for 'flora' without a reason"):
        build_reported_entries(_source(tmp_path, [["flora", None, "24.57"]], []))


def test_omitted_cell_with_value_is_refused(tmp_path: Path) -> None:
    omitted = [{"method": "flora", "columns": ["rougeLsum"], "reason": "r"}]
    with pytest.raises(SubmissionError, match="listed in 'omitted' but has a value"):
        build_reported_entries(_source(tmp_path, [["flora", "1.0", "24.57"]], omitted))


def test_rebuild_keeps_reproduced_entries(tmp_path: Path, three_runs, data_dir) -> None:
    from leaderboard.submit import submit

    path = tmp_path / "lb.json"
    path.write_text('{"schema_version": "1.0", "entries": []}')
    submit(
        three_runs,
        submitter="J",
        link="https://example.org",
        leaderboard_path=path,
        data_dirs=[data_dir],
        date="2025-01-01",
    )
    board = rebuild(path)
    assert sum(e.provenance == "reproduced" for e in board.entries) == 1
    assert len(board.entries) == 381
    first = path.read_bytes()
    rebuild(path)
    assert path.read_bytes() == first


def test_reported_methods_that_drake_runs_carry_its_method_names(board, tmp_path: Path) -> None:
    """FedMosaic's FedIT is LoRA FedAvg, which `drake methods` calls fedavg: the board uses that
    name (so a reproduced fedavg run ranks next to the paper's row) and the note keeps the
    paper's."""
    names = {e.method.name for e in board.entries}
    assert "fedit" not in names
    fedavg = _find(board, "drake", "dynamic-hetero", "fedavg")
    assert fedavg.metrics["self_a_last"].mean == 66.11
    assert "'fedit'" in fedavg.citation.note and "'fedavg'" in fedavg.citation.note
    # the renaming is declared in the source, per paper, and applied to every table
    src = json.loads((REPORTED / "fedmosaic.json").read_text())
    assert src["method_names"] == {"fedit": "fedavg"}
    rows = {row[0] for t in src["tables"] for row in t["rows"]}
    assert "fedit" in rows  # the transcription keeps the paper's name
    renamed = build_reported_entries(_source(tmp_path, [["flora", "1.0", "24.57"]], [],
                                             method_names={"flora": "fedavg"}))
    assert [e.method.name for e in renamed] == ["fedavg"]
