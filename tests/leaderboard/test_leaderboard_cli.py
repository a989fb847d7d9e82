"""`drake leaderboard ...` commands: exit codes, one-line errors, outputs."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from leaderboard.cli import add_cli

LINK = "https://github.com/example/drake-runs"


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="drake")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_wired_into_drake_main(capsys, seeded_source) -> None:
    from drake.cli import main

    assert main(["leaderboard", "validate", str(seeded_source)]) == 0
    assert "valid leaderboard (873 entries)" in capsys.readouterr().out


def test_validate_ok_and_refusal(tmp_path, seeded_source, capsys) -> None:
    assert cli("leaderboard", "validate", str(seeded_source)) == 0
    assert capsys.readouterr().out.startswith("ok: ")
    doc = json.loads(seeded_source.read_text())
    doc["entries"][3]["metrics"]["accuracy"]["mean"] = 101.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert cli("leaderboard", "validate", str(bad)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "entries[3]: metrics.accuracy.mean: 101.0 outside" in err


def test_validate_catches_duplicates_and_inconsistent_stats(
    tmp_path, seeded_source, capsys
) -> None:
    doc = json.loads(seeded_source.read_text())
    doc["entries"].append(doc["entries"][0])
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(doc))
    assert cli("leaderboard", "validate", str(dup)) == 1
    assert "duplicates entries[0]" in capsys.readouterr().err


def test_validate_entry_and_results_files(
    tmp_path, three_runs, data_dir, empty_board, capsys
) -> None:
    results = three_runs[0] / "results.json"
    assert cli("leaderboard", "validate", str(results), "--data", str(data_dir)) == 0
    assert "valid results" in capsys.readouterr().out
    assert cli("leaderboard", "validate", str(results)) == 1  # manifest not known without --data
    assert "matches no known manifest" in capsys.readouterr().err
    assert (
        cli(
            "leaderboard",
            "submit",
            str(three_runs[0]),
            "--seeds",
            *map(str, three_runs[1:]),
            "--leaderboard",
            str(empty_board),
            "--data",
            str(data_dir),
            "--submitter",
            "Jane",
            "--link",
            LINK,
        )
        == 0
    )
    assert "submitted fedavg on drake-synth 1.0/dynamic-hetero (3 seeds)" in capsys.readouterr().out
    entry = json.loads(empty_board.read_text())["entries"][0]
    one = tmp_path / "entry.json"
    one.write_text(json.dumps(entry))
    assert cli("leaderboard", "validate", str(one), "--data", str(data_dir)) == 0
    entry["metrics"]["self_a_last"]["mean"] += 0.5
    one.write_text(json.dumps(entry))
    assert cli("leaderboard", "validate", str(one), "--data", str(data_dir)) == 1
    assert "metrics.self_a_last.mean" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text("{}")
    assert cli("leaderboard", "validate", str(other)) == 1
    assert "not a leaderboard" in capsys.readouterr().err


def test_show_filters_and_errors(seeded_source, capsys) -> None:
    assert (
        cli(
            "leaderboard",
            "show",
            "--benchmark",
            "tap",
            "--leaderboard",
            str(seeded_source),
            "--json",
        )
        == 0
    )
    boards = json.loads(capsys.readouterr().out)
    assert len(boards) == 14 and {b["benchmark"] for b in boards} == {"tap"}
    fmnist = next(b for b in boards if b["scenario"] == "vilt-fmnist")
    assert fmnist["primary"] == "mse" and fmnist["higher_is_better"] is False
    # 0.5466 (TAP Tab. 4, TAP without KD) and 0.5467 (Tab. 1), the lowest MSEs
    assert [r["method"] for r in fmnist["rows"][:2]] == ["tap-no-kd", "tap"]
    assert (
        cli(
            "leaderboard",
            "show",
            "--benchmark",
            "drake",
            "--scenario",
            "nope",
            "--leaderboard",
            str(seeded_source),
        )
        == 1
    )
    assert (
        capsys.readouterr().err == "error: no entries for benchmark 'drake' scenario 'nope' in "
        f"{seeded_source}\n"
    )


def test_render_and_seed(tmp_path, seeded_source, capsys) -> None:
    assert (
        cli(
            "leaderboard",
            "render",
            "--out",
            str(tmp_path / "site"),
            "--leaderboard",
            str(seeded_source),
        )
        == 0
    )
    assert (tmp_path / "site" / "index.html").stat().st_size > 10000
    copy = tmp_path / "lb.json"
    shutil.copyfile(seeded_source, copy)
    assert cli("leaderboard", "seed", "--leaderboard", str(copy)) == 0
    assert "rebuilt 873 reported entries" in capsys.readouterr().out
    assert copy.read_bytes() == seeded_source.read_bytes()


def test_render_to_unwritable_place_is_one_line(tmp_path, seeded_source, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert (
        cli(
            "leaderboard",
            "render",
            "--out",
            str(blocker / "site"),
            "--leaderboard",
            str(seeded_source),
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_missing_leaderboard_file(tmp_path: Path, capsys) -> None:
    assert cli("leaderboard", "show", "--leaderboard", str(tmp_path / "none.json")) == 1
    assert "cannot read" in capsys.readouterr().err


def test_subcommand_required() -> None:
    with pytest.raises(SystemExit):
        cli("leaderboard")


def test_error_stays_one_line_for_odd_file_names(tmp_path, capsys) -> None:
    odd = tmp_path / "evil\nname\x1b[31m.json"
    odd.write_text("{")
    assert cli("leaderboard", "validate", str(odd)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "evil\\nname\\x1b[31m.json" in err


def test_show_prints_markup_in_submitted_text_as_written(three_runs, data_dir, empty_board,
                                                          capsys) -> None:
    hostile = "[/oops] [link=https://evil.example]me[/link]"
    assert cli("leaderboard", "submit", str(three_runs[0]), "--seeds",
               *map(str, three_runs[1:]), "--leaderboard", str(empty_board), "--data",
               str(data_dir), "--submitter", hostile, "--link", LINK) == 0
    capsys.readouterr()
    assert cli("leaderboard", "show", "--leaderboard", str(empty_board)) == 0
    out = capsys.readouterr().out
    assert "[/oops]" in out and "[link=https://evil.example]" in out
