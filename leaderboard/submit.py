"""Turn runs into a leaderboard entry and merge it into the leaderboard file.

``submit`` is all-or-nothing. In order:

1. each run's results.json is read under the size limit and parsed strictly
   (:mod:`leaderboard.jsonio`), then validated as a :class:`~leaderboard.run_result.RunResult`;
2. each run is checked against the registry (benchmark, version, protocol), its scenario
   naming rule, the metric names of its protocol, and the known manifests;
3. the runs must be seeds of one experiment: identical benchmark, manifest, scenario,
   method (name, hyper-parameters, config hash), models per client, protocol, scoring,
   software version and commit, metric names and evaluation rounds; distinct seeds;
4. the entry is built (:func:`build_entry`): per metric the per-seed values in seed order,
   their mean, sample std and Student-t 95% CI; the per-round mean Self/Others curve; mean
   communication and wall time, max peak memory;
5. the entry and the existing leaderboard are validated, the entry is merged (a duplicate
   identity is refused unless ``replace``), and the file is rewritten atomically.

Nothing is written unless every step succeeds.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drake.locks import exclusive
from leaderboard.benchmarks import check_benchmark, check_scenario_name
from leaderboard.errors import SubmissionError
from leaderboard.jsonio import MAX_SUBMISSION_BYTES, atomic_write_text, dumps, read_json
from leaderboard.manifests import KNOWN_MANIFESTS_PATH, ManifestIndex, manifest_index
from leaderboard.metrics import check_metric_names
from leaderboard.model import Entry, Leaderboard
from leaderboard.run_result import RunResult
from leaderboard.stats import summarize
from leaderboard.validate import (
    DEFAULT_LEADERBOARD_PATH,
    check_entry,
    check_leaderboard,
    check_not_future,
    load_leaderboard,
    parse_entry,
    parse_run_result,
)

RESULTS_FILENAME = "results.json"
SUBMIT_WAIT_SECONDS = 120  # a submit holds the board for well under a second


def load_run(path: Path) -> RunResult:
    """Read a run directory (its ``results.json``) or a results file, strictly."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILENAME
    return parse_run_result(read_json(path, MAX_SUBMISSION_BYTES), str(path))


def check_run(run: RunResult, manifests: ManifestIndex | None, where: str = "results.json") -> None:
    """Registry, scenario-rule, metric-name and manifest checks of one run."""
    bench, scen = run.benchmark, run.scenario
    try:
        check_not_future(run.created_at, "created_at")
        check_benchmark(bench.name, bench.version, run.protocol)
        check_scenario_name(bench.name, scen.name, scen.order, scen.models, scen.partition)
        check_metric_names(run.metrics, run.protocol, bench.name, scen.name)
        if manifests is not None:
            manifests.check(
                bench.name, bench.version, bench.manifest_sha256, "benchmark.manifest_sha256"
            )
    except SubmissionError as err:
        raise SubmissionError(f"{where}: {err}") from err


_SAME_FIELDS: tuple[tuple[str, Any], ...] = (
    ("benchmark", lambda r: r.benchmark.model_dump()),
    ("scenario", lambda r: r.scenario.model_dump()),
    ("method", lambda r: r.method.model_dump()),
    ("models_per_client", lambda r: r.models_per_client),
    ("protocol", lambda r: r.protocol),
    ("scoring", lambda r: r.scoring.model_dump()),
    ("software.package_version", lambda r: r.software.package_version),
    ("software.git_hash", lambda r: r.software.git_hash),
    ("metrics (names)", lambda r: sorted(r.metrics)),
    ("curves.rounds", lambda r: r.curves.rounds),
    ("cost (number of rounds)", lambda r: len(r.cost.comm_bytes_up_per_round)),
    ("curves.others (present)", lambda r: r.curves.others is not None),
)


def _check_same_experiment(runs: Sequence[RunResult]) -> None:
    first = runs[0]
    for run in runs[1:]:
        for label, get in _SAME_FIELDS:
            a, b = get(first), get(run)
            if a != b:
                shown_a, shown_b = repr(a), repr(b)
                if len(shown_a) + len(shown_b) > 160:
                    shown_a, shown_b = shown_a[:77] + "...", shown_b[:77] + "..."
                raise SubmissionError(
                    f"{label}: seed {run.seed} has {shown_b} but seed {first.seed} has "
                    f"{shown_a}; submit only seeds of the same experiment together"
                )
    seeds = [r.seed for r in runs]
    if len(set(seeds)) != len(seeds):
        raise SubmissionError(f"seed: duplicate seeds {sorted(seeds)}; each run needs its own seed")


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def build_entry(
    runs: Sequence[RunResult], *, submitter: str, link: str, date: str | None = None
) -> Entry:
    """Build a reproduced entry from the runs of one experiment (see module docstring).

    Parameters
    ----------
    runs : sequence of RunResult
        One per seed, at least one.
    submitter : str
        Who submits.
    link : str
        https URL of the paper or code.
    date : str, optional
        Submission date YYYY-MM-DD; today (UTC) by default.

    Raises
    ------
    SubmissionError
        If the runs are not seeds of one experiment or the entry does not validate.
    """
    if not runs:
        raise SubmissionError("submit: give at least one run")
    _check_same_experiment(runs)
    runs = sorted(runs, key=lambda r: r.seed)
    first = runs[0]
    metrics = {name: summarize([r.metrics[name] for r in runs]) for name in first.metrics}
    curve = {
        "rounds": list(first.curves.rounds),
        "self": [_mean(point) for point in zip(*(r.curves.self for r in runs))],
        "others": (
            [_mean(point) for point in zip(*(r.curves.others for r in runs))]  # type: ignore[misc]
            if first.curves.others is not None
            else None
        ),
    }
    rss = [r.cost.peak_rss_mb for r in runs]
    flops = [r.cost.flops_extra_pct for r in runs]
    doc = {
        "benchmark": first.benchmark.model_dump(),
        "scenario": first.scenario.model_dump(),
        "protocol": first.protocol,
        "method": first.method.model_dump(),
        "models_per_client": list(first.models_per_client),
        "seeds": [r.seed for r in runs],
        "n_seeds": len(runs),
        "metrics": metrics,
        "curve": curve,
        "cost": {
            "comm_bytes_up_total": _mean(
                [float(sum(r.cost.comm_bytes_up_per_round)) for r in runs]
            ),
            "comm_bytes_down_total": _mean(
                [float(sum(r.cost.comm_bytes_down_per_round)) for r in runs]
            ),
            "rounds": len(first.cost.comm_bytes_up_per_round),
            "wall_time_s": _mean([r.cost.wall_time_s for r in runs]),
            "peak_rss_mb": None if None in rss else max(rss),  # type: ignore[type-var]
            "flops_extra_pct": None if None in flops else _mean(flops),  # type: ignore[arg-type]
        },
        "scoring": first.scoring.model_dump(),
        "software": {
            "package_version": first.software.package_version,
            "git_hash": first.software.git_hash,
        },
        "submitter": submitter,
        "date": date or _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
        "link": link,
        "provenance": "reproduced",
        "citation": None,
    }
    return parse_entry(doc, "built entry")


def entry_sort_key(entry: Entry) -> tuple[str, ...]:
    """Stable order of entries in the leaderboard file."""
    return (
        entry.benchmark.name,
        entry.benchmark.version,
        entry.scenario.name,
        entry.provenance,
        entry.method.name,
        entry.method.config_sha256 or "",
    )


def merge(board: Leaderboard, entry: Entry, replace: bool = False) -> Leaderboard:
    """Add ``entry`` to ``board`` (refusing a duplicate identity unless ``replace``)."""
    key = entry.identity()
    kept = [e for e in board.entries if e.identity() != key]
    if len(kept) != len(board.entries) and not replace:
        raise SubmissionError(
            f"duplicate entry: {entry.method.name} on {entry.benchmark.name} "
            f"{entry.benchmark.version}/{entry.scenario.name} ({entry.provenance}, config "
            f"{(entry.method.config_sha256 or 'none')[:12]}) is already on the leaderboard; "
            "pass --replace to overwrite it"
        )
    return Leaderboard(
        schema_version=board.schema_version, entries=sorted([*kept, entry], key=entry_sort_key)
    )


def write_leaderboard(path: Path, board: Leaderboard) -> None:
    """Write a leaderboard file atomically in its canonical form."""
    atomic_write_text(Path(path), dumps(board.model_dump(mode="json")))


def submit(
    run_paths: Sequence[Path],
    *,
    submitter: str | None,
    link: str | None,
    leaderboard_path: Path = DEFAULT_LEADERBOARD_PATH,
    data_dirs: Sequence[Path] = (),
    replace: bool = False,
    date: str | None = None,
    known_manifests_path: Path = KNOWN_MANIFESTS_PATH,
) -> Entry:
    """Validate runs, build their entry and merge it into the leaderboard file atomically.

    Returns
    -------
    Entry
        The entry that was written.

    Raises
    ------
    SubmissionError
        On any problem; the leaderboard file is then left byte-identical.
    """
    if not submitter:
        raise SubmissionError("submitter: required; pass --submitter 'Name <email or handle>'")
    if not link:
        raise SubmissionError("link: required; pass --link https://... (paper or code URL)")
    runs = [load_run(Path(p)) for p in run_paths]
    manifests = manifest_index(data_dirs, known_manifests_path)
    for path, run in zip(run_paths, runs):
        check_run(run, manifests, str(path))
    entry = build_entry(runs, submitter=submitter, link=link, date=date)
    check_entry(entry, manifests, "built entry")
    with exclusive(Path(leaderboard_path), "submit to", wait=SUBMIT_WAIT_SECONDS):
        board = load_leaderboard(Path(leaderboard_path))  # read under the lock: no lost entry
        merged = merge(board, entry, replace)
        check_leaderboard(merged)
        write_leaderboard(Path(leaderboard_path), merged)
    return entry
