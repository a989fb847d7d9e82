"""Build the paper-reported entries from the reviewed sources in ``leaderboard/reported/``.

Each source file transcribes one paper's tables in a layout close to the paper, so a reviewer
can hold it against the PDF line by line::

    {"paper": "...", "short": "FedMosaic", "link": "https://..." | null,
     "submitter": "...", "date": "YYYY-MM-DD", "n_seeds": 3 | null, "note": "...",
     "method_names": {"<paper's row name>": "<drake methods name>", ...},
     "tables": [
       {"table": "Tab. 2", "benchmark": "drake", "version": "1.0",
        "scenario": {"name": ..., "order": ..., "models": ..., "partition": {...}},
        "protocol": "self_others",
        "models_per_client": [...] | {"all": "<model>"} | null,
        "note": "..." | null,
        "columns": ["self_a_last", ...],
        "rows": [["sft", "65.79±0.20", ...], ...],
        "omitted": [{"method": ..., "columns": [...], "reason": ...}]}]}

Each entry's ``citation.paper`` is ``"<short> (<paper>)"``, so displays can show the short
name. A cell is ``"mean±std"``, ``"mean"`` (no std printed) or null (left out). Every null cell
must be explained in ``omitted``; a row whose cells are all null produces no entry.
Rows keep the paper's method names; ``method_names`` renames those that `drake methods` runs
under another name (FedMosaic's ``fedit`` is LoRA FedAvg, ``fedavg``), so that a reproduced run
and the paper's row share one method name; the entry's citation note records the paper's name.
``{"all": m}`` repeats model ``m`` for ``partition.n_clients`` clients.

:func:`build_reported_entries` turns the sources into validated ``reported`` entries;
:func:`rebuild` replaces the reported entries of a leaderboard file with them, keeping every
reproduced entry, and writes the file atomically.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from drake.locks import exclusive
from leaderboard.errors import SubmissionError
from leaderboard.jsonio import read_json
from leaderboard.model import SCHEMA_VERSION, Entry, Leaderboard
from leaderboard.submit import SUBMIT_WAIT_SECONDS, entry_sort_key, write_leaderboard
from leaderboard.validate import (
    DEFAULT_LEADERBOARD_PATH,
    check_entry,
    check_leaderboard,
    load_leaderboard,
    parse_entry,
)

REPORTED_DIR = Path(__file__).with_name("reported")
_CELL = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(?:±([0-9]+(?:\.[0-9]+)?))?$")


def parse_cell(cell: str | None, where: str) -> tuple[float, float | None] | None:
    """``"65.79±0.20"`` -> (65.79, 0.2); ``"88.93"`` -> (88.93, None); null -> None."""
    if cell is None:
        return None
    m = _CELL.fullmatch(cell) if isinstance(cell, str) else None
    if not m:
        raise SubmissionError(f"{where}: cell {cell!r} is not 'mean', 'mean±std' or null")
    return float(m.group(1)), (float(m.group(2)) if m.group(2) is not None else None)


def _models(table: dict[str, Any], where: str) -> list[str] | None:
    spec = table.get("models_per_client")
    if isinstance(spec, dict):
        n = table["scenario"]["partition"].get("n_clients")
        if set(spec) != {"all"} or not isinstance(n, int):
            raise SubmissionError(
                f"{where}.models_per_client: use {{'all': m}} with partition.n_clients"
            )
        return [spec["all"]] * n
    return spec


def _table_entries(
    source: dict[str, Any], table: dict[str, Any], where: str, cache: dict[str, Any]
) -> list[Entry]:
    columns = table["columns"]
    omitted = {(o["method"], c) for o in table.get("omitted", []) for c in o["columns"]}
    notes = [n for n in (source.get("note"), table.get("note")) if n]
    renames = source.get("method_names", {})
    entries = []
    for r, row in enumerate(table["rows"]):
        method, cells = row[0], row[1:]
        if len(cells) != len(columns):
            raise SubmissionError(
                f"{where}.rows[{r}]: {len(cells)} cells for {len(columns)} columns"
            )
        metrics = {}
        for column, cell in zip(columns, cells):
            parsed = parse_cell(cell, f"{where}.rows[{r}].{column}")
            if parsed is None:
                if (method, column) not in omitted:
                    raise SubmissionError(
                        f"{where}.rows[{r}].{column}: null cell for {method!r} without a reason "
                        "in 'omitted'"
                    )
                continue
            if (method, column) in omitted:
                raise SubmissionError(
                    f"{where}.rows[{r}].{column}: {method!r} is listed in 'omitted' but has a value"
                )
            mean, std = parsed
            metrics[column] = {"mean": mean, "std": std, "ci95": None, "per_seed": None}
        if not metrics:
            continue
        doc = {
            "benchmark": {
                "name": table["benchmark"],
                "version": table["version"],
                "manifest_sha256": None,
            },
            "scenario": table["scenario"],
            "protocol": table["protocol"],
            "method": {"name": renames.get(method, method), "hyperparameters": {},
                       "config_sha256": None},
            "models_per_client": _models(table, where),
            "seeds": None,
            "n_seeds": source.get("n_seeds"),
            "metrics": metrics,
            "curve": None,
            "cost": None,
            "scoring": None,
            "software": None,
            "submitter": source["submitter"],
            "date": source["date"],
            "link": source.get("link"),
            "provenance": "reported",
            "citation": {
                "paper": f"{source['short']} ({source['paper']})",
                "table": table["table"],
                "note": " ".join(notes + ([
                    f"The paper's {method!r} is `drake methods`' {renames[method]!r}."]
                    if method in renames else [])) or None,
            },
        }
        entry = parse_entry(doc, f"{where}.rows[{r}]")
        check_entry(entry, None, f"{where}.rows[{r}]", cache)
        entries.append(entry)
    return entries


def build_reported_entries(src_dir: Path = REPORTED_DIR) -> list[Entry]:
    """Validated reported entries from every ``*.json`` source in ``src_dir``, sorted.

    Raises
    ------
    SubmissionError
        If a source is malformed or an entry does not validate.
    """
    entries: list[Entry] = []
    cache: dict[str, Any] = {}
    for path in sorted(Path(src_dir).glob("*.json")):
        source = read_json(path)
        for t, table in enumerate(source["tables"]):
            entries.extend(_table_entries(source, table, f"{path.name}: tables[{t}]", cache))
    entries.sort(key=entry_sort_key)
    check_leaderboard(
        Leaderboard(schema_version=SCHEMA_VERSION, entries=entries), None, "reported sources"
    )
    return entries


def rebuild(path: Path = DEFAULT_LEADERBOARD_PATH, src_dir: Path = REPORTED_DIR) -> Leaderboard:
    """Replace the reported entries of the leaderboard at ``path`` with a fresh build.

    Reproduced entries are kept. A missing file is created. The write is atomic.
    """
    path = Path(path)
    with exclusive(path, "rebuild", wait=SUBMIT_WAIT_SECONDS):  # a submit may be merging
        kept = (
            [e for e in load_leaderboard(path).entries if e.provenance == "reproduced"]
            if path.exists()
            else []
        )
        entries = sorted([*build_reported_entries(src_dir), *kept], key=entry_sort_key)
        board = Leaderboard(schema_version=SCHEMA_VERSION, entries=entries)
        check_leaderboard(board)
        write_leaderboard(path, board)
    return board
