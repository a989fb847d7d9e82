"""``drake leaderboard ...``: validate, submit, show, render and seed.

``drake/cli.py`` calls :func:`add_cli` with its subparsers; each command's handler is set
with ``set_defaults(func=handler)`` and returns the exit code. Library errors
(:class:`~leaderboard.errors.SubmissionError`, and I/O errors while rendering) become one line
on stderr and exit code 1.

Commands::

    drake leaderboard validate FILE [--data DIR]
    drake leaderboard submit RUN_DIR_or_results.json [--seeds RUN_DIR ...] [--replace]
          [--leaderboard FILE] [--data DIR] [--submitter NAME] [--link URL] [--date YYYY-MM-DD]
    drake leaderboard show [--benchmark B] [--scenario S] [--leaderboard FILE] [--json]
    drake leaderboard render --out DIR [--leaderboard FILE]
    drake leaderboard seed [--leaderboard FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from leaderboard.errors import SubmissionError
from leaderboard.manifests import manifest_index
from leaderboard.metrics import metric_order
from leaderboard.ranking import RankedBoard, rank
from leaderboard.validate import DEFAULT_LEADERBOARD_PATH, load_leaderboard, validate_file


def _fail(message: str) -> int:
    """Print one line: non-printable characters (e.g. from file names) are escaped."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    sys.stderr.write(f"error: {line}\n")
    return 1


def _guard(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except SubmissionError as err:
            return _fail(str(err))
        except OSError as err:
            return _fail(f"{getattr(err, 'filename', '') or ''} {err.strerror or err}".strip())

    run.__name__ = handler.__name__
    run.__doc__ = handler.__doc__
    return run


def _validate(args: argparse.Namespace) -> int:
    """Validate a leaderboard file, an entry or a results.json."""
    kind, count = validate_file(Path(args.file), manifest_index(args.data or ()))
    sys.stdout.write(
        f"ok: {args.file} is a valid {kind} ({count} entr{'y' if count == 1 else 'ies'})\n"
    )
    return 0


def _submit(args: argparse.Namespace) -> int:
    """Build an entry from one or more seeds of a run and merge it into the leaderboard."""
    from leaderboard.submit import submit

    entry = submit(
        [Path(args.run), *(Path(p) for p in args.seeds)],
        submitter=args.submitter,
        link=args.link,
        leaderboard_path=Path(args.leaderboard),
        data_dirs=[Path(d) for d in args.data or ()],
        replace=args.replace,
        date=args.date,
    )
    sys.stdout.write(
        f"submitted {entry.method.name} on {entry.benchmark.name} {entry.benchmark.version}/"
        f"{entry.scenario.name} ({entry.n_seeds} seed{'s' if entry.n_seeds != 1 else ''}) "
        f"to {args.leaderboard}\n"
    )
    return 0


def _board_rows(board: RankedBoard) -> list[dict[str, Any]]:
    rows = []
    for row in board.rows:
        e = row.entry
        rows.append(
            {
                "group": row.group,
                "method": e.method.name,
                "label": row.label,
                "provenance": e.provenance,
                "preset": e.method.hyperparameters.get("preset"),
                "value": row.value,
                "interval": list(row.interval) if row.interval else None,
                "std": e.metrics[board.primary].std if board.primary in e.metrics else None,
                "n_seeds": e.n_seeds,
                "source": (
                    f"{e.citation.paper.split(' (', 1)[0]} {e.citation.table}"
                    if e.citation
                    else e.submitter
                ),
                "config_sha256": e.method.config_sha256,
            }
        )
    return rows


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.4f}" if metric == "mse" else f"{value:.2f}"


def _rich_table(board: RankedBoard) -> Table:
    others = metric_order({m for r in board.rows for m in r.entry.metrics} - {board.primary})
    arrow = "↑" if board.higher_is_better else "↓"
    # every cell is Text, never markup: a submitter named "[/x]" or "[link=...]" is printed
    # as written instead of breaking the table or spoofing a link
    table = Table(
        title=Text(f"{board.benchmark} {board.version} · {board.scenario} — ranked by "
                   f"{board.primary} {arrow}"),
        caption="# = rank group: entries whose 95% CI overlaps the group leader's share it",
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("method", no_wrap=True)
    table.add_column("provenance", no_wrap=True)
    table.add_column(f"{board.primary} {arrow}", justify="right", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True)
    for metric in others:
        table.add_column(metric, justify="right", no_wrap=True)
    table.add_column("seeds", justify="right")
    table.add_column("source", overflow="fold")
    for row, info in zip(board.rows, _board_rows(board)):
        e = row.entry
        primary = e.metrics.get(board.primary)
        main = _fmt(board.primary, primary.mean if primary else None)
        if primary is not None and primary.std is not None:
            main += f" ± {_fmt(board.primary, primary.std)}"
        ci = (
            f"[{_fmt(board.primary, primary.ci95[0])}, {_fmt(board.primary, primary.ci95[1])}]"
            if primary is not None and primary.ci95 is not None
            else "–"
        )
        extra = [_fmt(m, e.metrics[m].mean) if m in e.metrics else "–" for m in others]
        cells = [str(row.group) if row.group is not None else "–", row.label,
                 e.provenance_label,
                 main, ci, *extra, str(e.n_seeds) if e.n_seeds is not None else "–",
                 info["source"]]
        table.add_row(*(Text(str(c)) for c in cells))
    return table


def _show(args: argparse.Namespace) -> int:
    """Print ranked tables per benchmark and scenario."""
    boards = rank(load_leaderboard(Path(args.leaderboard)), args.benchmark, args.scenario)
    if not boards:
        wanted = " ".join(
            f"{k} {v!r}"
            for k, v in (("benchmark", args.benchmark), ("scenario", args.scenario))
            if v
        )
        return _fail(f"no entries for {wanted or 'any benchmark'} in {args.leaderboard}")
    if args.json:
        doc = [
            {
                "benchmark": b.benchmark,
                "version": b.version,
                "scenario": b.scenario,
                "primary": b.primary,
                "higher_is_better": b.higher_is_better,
                "rows": _board_rows(b),
            }
            for b in boards
        ]
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    console = Console(width=max(Console().width, 160))
    for board in boards:
        console.print(_rich_table(board))
    return 0


def _render(args: argparse.Namespace) -> int:
    """Write a static HTML page of the leaderboard."""
    from leaderboard.render import render

    path = render(load_leaderboard(Path(args.leaderboard)), Path(args.out))
    sys.stdout.write(f"wrote {path}\n")
    return 0


def _seed(args: argparse.Namespace) -> int:
    """Rebuild the paper-reported entries from leaderboard/reported/*.json."""
    from leaderboard.seed import rebuild

    board = rebuild(Path(args.leaderboard))
    n_rep = sum(1 for e in board.entries if e.provenance == "reported")
    sys.stdout.write(f"rebuilt {n_rep} reported entries in {args.leaderboard}\n")
    return 0


def add_cli(subparsers: Any) -> None:
    """Add the ``leaderboard`` command and its sub-commands to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "leaderboard",
        help="validate, submit to, show and render the leaderboard",
        description="Validated, traceable leaderboard of PFL results.",
    )
    sub = parser.add_subparsers(dest="leaderboard_command", metavar="COMMAND", required=True)
    default = str(DEFAULT_LEADERBOARD_PATH)

    p = sub.add_parser("validate", help="validate a leaderboard file, entry or results.json")
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--data", action="append", metavar="DIR", help="folder with built manifest.json files"
    )
    p.set_defaults(func=_guard(_validate))

    p = sub.add_parser("submit", help="submit a run (and more seeds of it) to the leaderboard")
    p.add_argument("run", metavar="RUN_DIR_or_results.json")
    p.add_argument(
        "--seeds",
        nargs="+",
        action="extend",
        default=[],
        metavar="RUN_DIR",
        help="more runs of the same experiment with other seeds",
    )
    p.add_argument(
        "--replace", action="store_true", help="overwrite an entry with the same identity"
    )
    p.add_argument("--leaderboard", default=default, metavar="FILE")
    p.add_argument(
        "--data", action="append", metavar="DIR", help="folder with the built manifest.json"
    )
    p.add_argument("--submitter", help="who submits (required)")
    p.add_argument("--link", help="https URL of the paper or code (required)")
    p.add_argument("--date", help="submission date YYYY-MM-DD (default: today, UTC)")
    p.set_defaults(func=_guard(_submit))

    p = sub.add_parser("show", help="print ranked tables")
    p.add_argument("--benchmark")
    p.add_argument("--scenario")
    p.add_argument("--leaderboard", default=default, metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_guard(_show))

    p = sub.add_parser("render", help="write a static HTML page")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--leaderboard", default=default, metavar="FILE")
    p.set_defaults(func=_guard(_render))

    p = sub.add_parser("seed", help="rebuild the paper-reported entries from leaderboard/reported/")
    p.add_argument("--leaderboard", default=default, metavar="FILE")
    p.set_defaults(func=_guard(_seed))
