"""Full validation of entries, leaderboard files and results files.

Structure (types, patterns, ranges, protocol metric names, provenance requirements) is
checked by the pydantic models, which agree with ``schema.json``. On top of that this module
checks what needs the registry or arithmetic across fields:

- the benchmark is known at that version and its protocol is the entry's protocol;
- the scenario name follows the benchmark's naming rule and agrees with order/models;
- the metric names fit the benchmark and scenario, and the required ones are present;
- per metric: ``lo <= mean <= hi``; with per-seed values, one value per seed and mean, std
  (ddof=1) and the Student-t CI reproduce to 1e-6; ``n_seeds == len(seeds)``;
- the curve has one value per round and strictly increasing rounds;
- for reproduced entries, the manifest hash is known (when a manifest index is given);
- in a leaderboard, no two entries share an identity.

Every failure raises :class:`~leaderboard.errors.SubmissionError` naming the field.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from leaderboard.benchmarks import BenchmarkInfo, check_benchmark, check_scenario_name
from leaderboard.errors import SubmissionError
from leaderboard.jsonio import MAX_LEADERBOARD_BYTES, MAX_SUBMISSION_BYTES, read_json
from leaderboard.manifests import ManifestIndex
from leaderboard.metrics import check_metric_names
from leaderboard.model import Entry, Leaderboard
from leaderboard.run_result import RunResult
from leaderboard.stats import check_consistent

DEFAULT_LEADERBOARD_PATH = Path(__file__).with_name("leaderboard.json")


_TYPE_TAGS = frozenset({"bool", "int", "float", "str", "list", "dict", "none", "tuple"})


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        part = str(part)
        if part in _TYPE_TAGS or any(c in part for c in "[]()"):
            continue  # pydantic's union-member tags, not field names
        out += f".{part}" if out else part
    return out


def pydantic_message(err: ValidationError, where: str) -> str:
    """One line naming the first failing field, the problem and the offending value."""
    errors = err.errors(include_url=False)
    first = errors[0]
    # a union reports one error per member; prefer our own validators' explanation
    same = [e for e in errors if _loc(tuple(e.get("loc", ()))) == _loc(tuple(first.get("loc", ())))]
    first = next(
        (e for e in same if e.get("type") in ("value_error", "assertion_error")),
        next((e for e in same if not str(e.get("type", "")).endswith("_type")), first),
    )
    msg = str(first.get("msg", "invalid"))
    msg = msg.removeprefix("Value error, ")
    loc = _loc(tuple(first.get("loc", ())))
    value = repr(first.get("input"))
    value = value if len(value) <= 60 else value[:57] + "..."
    more = len({_loc(tuple(e.get("loc", ()))) for e in errors}) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    if first.get("type") in ("value_error", "assertion_error") or not loc:
        return f"{where}: {(loc + ': ') if loc else ''}{msg}{suffix}"
    if any(part in ("hyperparameters", "partition") for part in first.get("loc", ())):
        msg = (
            "values must be JSON scalars or flat lists of scalars; flatten nested configs "
            f"with dotted keys ({msg})"
        )
    return f"{where}: {loc}: {msg} (got {value}){suffix}"


def _parse(model: type[BaseModel], doc: Any, where: str) -> Any:
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        raise SubmissionError(pydantic_message(err, where)) from err


def parse_entry(doc: Any, where: str = "entry") -> Entry:
    """Validate the structure of one entry document."""
    return _parse(Entry, doc, where)


def parse_leaderboard(doc: Any, where: str = "leaderboard") -> Leaderboard:
    """Validate the structure of a leaderboard document."""
    return _parse(Leaderboard, doc, where)


def parse_run_result(doc: Any, where: str = "results.json") -> RunResult:
    """Validate the structure of a results.json document."""
    return _parse(RunResult, doc, where)


def check_entry(
    entry: Entry,
    manifests: ManifestIndex | None = None,
    where: str = "entry",
    cache: dict[str, BenchmarkInfo] | None = None,
) -> None:
    """Semantic checks of one structurally valid entry (see the module docstring).

    Parameters
    ----------
    entry : Entry
        The entry.
    manifests : ManifestIndex, optional
        Known manifests; when None the manifest hash of reproduced entries is not checked
        (used when re-reading a leaderboard that was validated on submission).
    where : str
        Prefix for error messages.
    cache : dict, optional
        Benchmark lookups shared across calls (see :func:`leaderboard.benchmarks.get_benchmark`).
    """
    bench, scen = entry.benchmark, entry.scenario
    try:
        check_not_future(entry.date, "date")
        check_benchmark(bench.name, bench.version, entry.protocol, cache)
        check_scenario_name(bench.name, scen.name, scen.order, scen.models, scen.partition)
        check_metric_names(entry.metrics, entry.protocol, bench.name, scen.name)
        if manifests is not None and (
            entry.provenance == "reproduced" or bench.manifest_sha256 is not None
        ):
            manifests.check(
                bench.name, bench.version, bench.manifest_sha256, "benchmark.manifest_sha256"
            )
        if entry.seeds is not None and entry.n_seeds != len(entry.seeds):
            raise SubmissionError(
                f"n_seeds: {entry.n_seeds} but {len(entry.seeds)} seeds are listed"
            )
        for name, stats in entry.metrics.items():
            check_consistent(
                f"metrics.{name}", stats.mean, stats.std, stats.ci95, stats.per_seed, entry.n_seeds
            )
        if entry.curve is not None:
            _check_curve(entry)
    except SubmissionError as err:
        raise SubmissionError(f"{where}: {err}") from err


FUTURE_SLACK = _dt.timedelta(days=1)  # a date that is already tomorrow in another time zone


def check_not_future(value: str, field: str) -> None:
    """Refuse a date (``YYYY-MM-DD``, or the date of an ISO date-time) after tomorrow (UTC)."""
    day = _dt.date.fromisoformat(value[:10])
    today = _dt.datetime.now(_dt.timezone.utc).date()
    if day > today + FUTURE_SLACK:
        raise SubmissionError(f"{field}: {value} is in the future (today is {today}, UTC); "
                              f"give the date the runs were made")


def _check_curve(entry: Entry) -> None:
    curve = entry.curve
    assert curve is not None
    rounds = curve.rounds
    if any(b <= a for a, b in zip(rounds, rounds[1:])):
        raise SubmissionError(f"curve.rounds: must be strictly increasing, got {rounds}")
    for field in ("self", "others"):
        values = getattr(curve, field)
        if values is not None and len(values) != len(rounds):
            raise SubmissionError(f"curve.{field}: {len(values)} points for {len(rounds)} rounds")


def check_leaderboard(
    board: Leaderboard, manifests: ManifestIndex | None = None, where: str = "leaderboard"
) -> None:
    """Check every entry and refuse duplicate identities."""
    seen: dict[tuple[Any, ...], int] = {}
    cache: dict[str, BenchmarkInfo] = {}
    for i, entry in enumerate(board.entries):
        check_entry(entry, manifests, f"{where}: entries[{i}]", cache)
        key = entry.identity()
        if key in seen:
            raise SubmissionError(
                f"{where}: entries[{i}] duplicates entries[{seen[key]}] (identity {key}); keep one"
            )
        seen[key] = i


def load_leaderboard(
    path: Path = DEFAULT_LEADERBOARD_PATH, manifests: ManifestIndex | None = None
) -> Leaderboard:
    """Read, parse and fully check a leaderboard file."""
    path = Path(path)
    board = parse_leaderboard(read_json(path, MAX_LEADERBOARD_BYTES), str(path))
    check_leaderboard(board, manifests, str(path))
    return board


def validate_file(path: Path, manifests: ManifestIndex | None = None) -> tuple[str, int]:
    """Validate a leaderboard file, a single entry, or a results.json, detected by its keys.

    Returns
    -------
    (kind, count)
        ``kind`` is ``"leaderboard"``, ``"entry"`` or ``"results"``; ``count`` the number of
        entries (1 for an entry or results file).
    """
    path = Path(path)
    doc = read_json(path, MAX_LEADERBOARD_BYTES)
    if isinstance(doc, dict) and "entries" in doc:
        board = parse_leaderboard(doc, str(path))
        check_leaderboard(board, manifests, str(path))
        return "leaderboard", len(board.entries)
    if path.stat().st_size > MAX_SUBMISSION_BYTES:
        raise SubmissionError(f"{path}: exceeds the size limit of {MAX_SUBMISSION_BYTES} bytes")
    if isinstance(doc, dict) and "provenance" in doc:
        check_entry(parse_entry(doc, str(path)), manifests, str(path))
        return "entry", 1
    if isinstance(doc, dict) and "seed" in doc:
        from leaderboard.submit import check_run

        check_run(parse_run_result(doc, str(path)), manifests, str(path))
        return "results", 1
    raise SubmissionError(
        f"{path}: not a leaderboard (no 'entries'), entry (no 'provenance') or results.json "
        "(no 'seed')"
    )
