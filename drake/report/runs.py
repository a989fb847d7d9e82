"""Read run folders, group their results files by experiment, and summarise each over seeds.

A *group* is one method with one configuration on one benchmark scenario: the results files
that share ``(benchmark, scenario, method, config_sha256)``. The config hash is seed-free
(:mod:`leaderboard.run_result`), so a group's files should be seeds of one experiment; this
module checks that they are (same build, protocol, hyper-parameters, clients and evaluation
rounds, distinct seeds) and refuses the report otherwise. A *panel* is one benchmark
scenario: the groups a table and a plot put side by side, which must share one build (data
manifest) and one protocol, so that the methods are compared on the same data.

Statistics over seeds are those of the leaderboard (:func:`leaderboard.stats.summarize`):
mean, sample std (ddof = 1) and the Student-t 95% interval of the mean.

Examples
--------
>>> runs = load_runs([Path("runs/fedavg-s0"), Path("runs/fedavg-s1")])  # doctest: +SKIP
>>> [(p.benchmark, p.scenario, [g.label for g in p.groups]) for p in panels(runs)]
... # doctest: +SKIP
[('drake-synth', 'dynamic-hetero', ['fedavg'])]
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from drake.errors import DrakeError
from leaderboard.metrics import metric_order
from leaderboard.stats import summarize


class ReportError(DrakeError, ValueError):
    """Runs that cannot be read, or cannot be compared, were given to ``drake report``."""


@dataclass(frozen=True)
class Run:
    """One results file (one seed, one view of a run) and the folder it came from."""

    path: Path
    doc: dict[str, Any]

    @property
    def seed(self) -> int:
        return int(self.doc["seed"])

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(benchmark, scenario, method, config_sha256)``: the group this run belongs to."""
        d = self.doc
        return (d["benchmark"]["name"], d["scenario"]["name"], d["method"]["name"],
                d["method"]["config_sha256"])

    @property
    def name(self) -> str:
        """The run as the user passed it: the folder, and the file when it is not results.json."""
        return str(self.path.parent if self.path.name == "results.json" else self.path)


def results_files(path: Path) -> list[Path]:
    """The results files of ``path``: the file itself, a run folder's ``results.json`` and
    ``results-*.json`` views, or those of every run folder directly inside ``path``."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ReportError(f"{path}: no such run folder or results file; pass the --out folder "
                          f"of `drake eval` (or its results.json)")

    def views(folder: Path) -> list[Path]:
        main = folder / "results.json"
        return ([main] if main.is_file() else []) + sorted(
            f for f in folder.glob("results-*.json") if f.is_file())

    found = views(path) or [f for sub in sorted(p for p in path.iterdir() if p.is_dir())
                            for f in views(sub)]
    if not found:
        raise ReportError(f"{path}: holds no results.json, nor do its sub-folders; pass the "
                          f"--out folder of a finished `drake eval` run")
    return found


def read_run(path: Path) -> Run:
    """Read and validate one results file against :class:`leaderboard.run_result.RunResult`."""
    from pydantic import ValidationError

    from leaderboard.run_result import RunResult

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReportError(f"{path}: not a JSON results file ({err}); pass a results.json "
                          f"written by `drake eval`") from err
    try:
        RunResult.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ReportError(f"{path}: not a valid results file: {where}: {first['msg']}; "
                          f"`drake leaderboard validate {path}` lists every problem") from err
    return Run(path, doc)


def load_runs(paths: Iterable[Path]) -> list[Run]:
    """Every results file under ``paths`` (see :func:`results_files`), read once each."""
    seen: dict[Path, Run] = {}
    for path in paths:
        for file in results_files(Path(path)):
            if file.resolve() not in seen:
                seen[file.resolve()] = read_run(file)
    if not seen:
        raise ReportError("no runs given; pass one or more run folders written by `drake eval`")
    return list(seen.values())


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def _differs(a: Any, b: Any) -> str:
    """What differs between two values, shortly: the keys of two dicts, else both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))
        return ", ".join(f"{k}: {_short(a.get(k, '<absent>'))} vs {_short(b.get(k, '<absent>'))}"
                         for k in keys[:3]) + (" ..." if len(keys) > 3 else "")
    return f"{_short(a)} vs {_short(b)}"


_Getter = Callable[[dict[str, Any]], Any]

#: what the runs of one group must share besides the grouping key: they are seeds of one
#: experiment (the config hash says so; these catch hand-edited or mixed-up files)
SAME_IN_GROUP: tuple[tuple[str, _Getter], ...] = (
    ("benchmark.version", lambda d: d["benchmark"]["version"]),
    ("benchmark.manifest_sha256", lambda d: d["benchmark"]["manifest_sha256"]),
    ("protocol", lambda d: d["protocol"]),
    ("method.hyperparameters", lambda d: d["method"]["hyperparameters"]),
    ("scenario.partition", lambda d: d["scenario"]["partition"]),
    ("models_per_client", lambda d: d["models_per_client"]),
    ("curves.rounds", lambda d: d["curves"]["rounds"]),
    ("metrics (names)", lambda d: sorted(d["metrics"])),
)

#: what every group of one panel (benchmark scenario) must share to be compared
SAME_IN_PANEL: tuple[tuple[str, _Getter], ...] = SAME_IN_GROUP[:3]


def _check_same(runs: Sequence[Run], fields: Sequence[tuple[str, _Getter]], what: str,
                fix: str) -> None:
    first = runs[0]
    for run in runs[1:]:
        for name, get in fields:
            if get(run.doc) != get(first.doc):
                raise ReportError(f"runs {first.name} and {run.name} {what} but differ in {name} "
                                  f"({_differs(get(first.doc), get(run.doc))}); {fix}")


@dataclass
class Group:
    """The seeds of one method and configuration on one benchmark scenario."""

    runs: list[Run]
    label: str = ""

    @property
    def doc(self) -> dict[str, Any]:
        """The first seed's results (what every seed shares)."""
        return self.runs[0].doc

    @property
    def method(self) -> str:
        return self.doc["method"]["name"]

    @property
    def preset(self) -> str:
        """The seed-free config hash that names the method's configuration."""
        return self.doc["method"]["config_sha256"]

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    @cached_property
    def metrics(self) -> dict[str, dict[str, Any]]:
        """Every metric summarised over seeds: ``{"mean", "std", "ci95", "per_seed"}``."""
        names = metric_order(self.doc["metrics"])
        return {m: summarize([r.doc["metrics"][m] for r in self.runs]) for m in names}

    def curve(self, part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(rounds, mean, std)`` over seeds of ``curves.self`` or ``curves.others``."""
        if self.doc["curves"].get(part) is None:
            return None
        values = np.array([r.doc["curves"][part] for r in self.runs], dtype=float)
        std = values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros(values.shape[1])
        return np.array(self.doc["curves"]["rounds"]), values.mean(axis=0), std

    def fast_adapt(self, start: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(iterations, mean, std)`` over seeds of the fast-adaptation mean curve of
        ``start`` (``aggregated`` or ``pretrained``), or None where a seed has none."""
        docs = [r.doc.get("fast_adaptation") for r in self.runs]
        if any(d is None for d in docs) or len({tuple(d["steps"]) for d in docs}) != 1:
            return None
        values = np.array([d["mean"][start] for d in docs], dtype=float)
        std = values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros(values.shape[1])
        return np.array(docs[0]["steps"]), values.mean(axis=0), std

    def last_scores(self) -> tuple[list[str], np.ndarray]:
        """``(tasks, matrix)``: each client's score per task at the last evaluation point,
        the mean over seeds (NaN where a client was not scored on a task)."""
        points = [r.doc["curves"]["scores"][-1] for r in self.runs]
        tasks = sorted({t for point in points for client in point for t in client})
        cube = np.full((len(points), len(points[0]), len(tasks)), np.nan)
        for s, point in enumerate(points):
            for c, client in enumerate(point):
                for t, task in enumerate(tasks):
                    if task in client:
                        cube[s, c, t] = client[task]
        with warnings.catch_warnings():  # a cell no seed scored stays NaN, without a warning
            warnings.simplefilter("ignore", RuntimeWarning)
            return tasks, np.nanmean(cube, axis=0)

    def cost(self) -> dict[str, dict[str, Any]]:
        """Cost per seed summarised like a metric: MB sent up and down per round (the mean
        over rounds), wall time, peak RSS and the extra FLOPs where the runs record them."""
        getters: dict[str, Callable[[dict[str, Any]], float | None]] = {
            "up MB/round": lambda c: float(np.mean(c["comm_bytes_up_per_round"])) / 1e6,
            "down MB/round": lambda c: float(np.mean(c["comm_bytes_down_per_round"])) / 1e6,
            "wall time (s)": lambda c: c["wall_time_s"],
            "peak RSS (MB)": lambda c: c.get("peak_rss_mb"),
            "extra FLOPs (%)": lambda c: c.get("flops_extra_pct"),
        }
        out = {}
        for name, get in getters.items():
            values = [get(r.doc["cost"]) for r in self.runs]
            if all(v is not None and math.isfinite(v) for v in values):
                out[name] = summarize(values)
        return out


@dataclass
class Panel:
    """One benchmark scenario and the groups compared on it."""

    benchmark: str
    scenario: str
    groups: list[Group] = field(default_factory=list)

    @property
    def doc(self) -> dict[str, Any]:
        return self.groups[0].doc

    @property
    def protocol(self) -> str:
        return self.doc["protocol"]

    @property
    def version(self) -> str:
        return self.doc["benchmark"]["version"]

    @property
    def manifest(self) -> str:
        return self.doc["benchmark"]["manifest_sha256"]

    @property
    def title(self) -> str:
        return f"{self.benchmark} {self.version} · {self.scenario}"

    @property
    def metric_names(self) -> list[str]:
        return metric_order({m for g in self.groups for m in g.doc["metrics"]})

    @property
    def primary_name(self) -> str:
        """What ``curves.self`` holds: Self for Self/Others, else the protocol's main number
        (accuracy, HM, or the generation task's first metric, found by its value)."""
        named = {"self_others": "Self", "classification": "accuracy", "base_novel": "hm"}
        if self.protocol in named:
            return named[self.protocol]
        for metric in self.metric_names:
            if all(math.isclose(r.doc["metrics"].get(metric, math.nan),
                                r.doc["curves"]["self"][-1], abs_tol=1e-9)
                   for g in self.groups for r in g.runs):
                return metric
        return "primary score"


def _labels(groups: Sequence[Group]) -> None:
    """Label each group by its method, and a method run with several configurations by the
    hyper-parameters that tell them apart (else the config hash)."""
    by_method: dict[str, list[Group]] = {}
    for g in groups:
        by_method.setdefault(g.method, []).append(g)
    for method, members in by_method.items():
        if len(members) == 1:
            members[0].label = method
            continue
        params = [g.doc["method"]["hyperparameters"] for g in members]
        keys = sorted({k for p in params for k in p
                       if any(q.get(k, "<absent>") != p.get(k, "<absent>") for q in params)})
        for g, p in zip(members, params):
            diff = ", ".join(f"{k}={_short(p.get(k, '-'))}" for k in keys[:3])
            g.label = f"{method} ({diff or 'config ' + g.preset[:8]})"
        if len({g.label for g in members}) < len(members):
            for g in members:
                g.label = f"{method} (config {g.preset[:8]})"


def panels(runs: Sequence[Run]) -> list[Panel]:
    """Group ``runs`` into panels and groups, checking that they can be compared.

    Raises
    ------
    ReportError
        Naming two runs and the field they differ in: runs of one group that are not seeds of
        one experiment, one seed given twice, or methods of one scenario run on different
        builds or protocols.
    """
    by_key: dict[tuple[str, str, str, str], list[Run]] = {}
    for run in runs:
        by_key.setdefault(run.key, []).append(run)
    out: dict[tuple[str, str], Panel] = {}
    for key in sorted(by_key):
        members = sorted(by_key[key], key=lambda r: (r.seed, str(r.path)))
        bench, scen, method, preset = key
        _check_same(members, SAME_IN_GROUP,
                    f"share method {method} and config {preset[:12]} on {bench}/{scen}",
                    "a group's runs must differ only in the seed: rerun the odd one out, or "
                    "report the runs separately")
        for a, b in zip(members, members[1:]):
            if a.seed == b.seed:
                raise ReportError(f"runs {a.name} and {b.name} are both seed {a.seed} of {method} "
                                  f"(config {preset[:12]}) on {bench}/{scen}; pass each seed "
                                  f"once")
        out.setdefault((bench, scen), Panel(bench, scen)).groups.append(Group(members))
    for panel in out.values():
        _check_same([g.runs[0] for g in panel.groups], SAME_IN_PANEL,
                    f"are both on {panel.benchmark}/{panel.scenario}",
                    "methods are compared only on one build and protocol: rerun them on the "
                    "same build, or report them separately")
        _labels(panel.groups)
        panel.groups.sort(key=lambda g: g.label)
    return list(out.values())
