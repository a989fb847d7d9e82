"""`drake quickstart`: drake-synth end to end, offline, in one command.

Builds a small drake-synth, loads the tiny model families (the pretrained weights shipped with
the suite, or pretrains them into ``out/models`` with ``pretrain=True``), runs ``sft``,
``fedavg`` and ``ditto`` on the dynamic heterogeneous scenario for a few rounds, and prints a
Self/Others table. Data, model cache and run folders all go under one folder:
``out/data/drake-synth`` (the build), ``out/runs/<method>`` and, with ``pretrain``,
``out/models``.

The run settings live in :data:`QUICKSTART` only: `drake quickstart` takes its defaults from it,
its table names them, and the README's `drake eval` command repeats them (tests check both), so
that a method run by hand scores on the quickstart's scale. It says what it does as it goes, a
line at least every ``every`` seconds (:class:`drake.runtime.progress.RoundProgress`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drake.errors import VerifyError

log = logging.getLogger(__name__)

DEFAULT_METHODS = ("sft", "fedavg", "ditto")


@dataclass(frozen=True)
class QuickstartSettings:
    """The settings of the quickstart's runs, which differ from `drake eval`'s defaults (a
    small budget that fits minutes on two cores, and option-likelihood scoring for the tiny
    models)."""

    scenario: str = "dynamic"
    rounds: int = 4
    compute_budget: int = 12
    eval_per_task: int = 8
    eval_every: int = 2
    mc_scoring: str = "loglik"

    def eval_args(self) -> list[str]:
        """The `drake eval` arguments that run a method with these settings."""
        return ["--scenario", self.scenario, "--rounds", str(self.rounds), "--compute-budget",
                str(self.compute_budget), "--eval-per-task", str(self.eval_per_task),
                "--eval-every", str(self.eval_every), "--mc-scoring", self.mc_scoring]


#: The one definition of the quickstart's run settings.
QUICKSTART = QuickstartSettings()


def quickstart(out: Path, *, methods: Sequence[str] = DEFAULT_METHODS, size: str = "small",
               rounds: int = QUICKSTART.rounds, seed: int = 0,
               eval_per_task: int = QUICKSTART.eval_per_task,
               eval_every: int = QUICKSTART.eval_every,
               compute_budget: int = QUICKSTART.compute_budget,
               mc_scoring: str = QUICKSTART.mc_scoring,
               pretrain: dict[str, Any] | None = None,
               progress: Callable[[Iterable, int], Iterable] | None = None,
               say: Callable[[str], None] = print, every: float = 10.0) -> list[dict[str, Any]]:
    """Run the quickstart under ``out`` and return the results of each method.

    Multiple-choice answers are scored by option likelihood by default (``mc_scoring``): the
    tiny models answer in the public split's formats until training teaches them the tasks',
    so greedy generation mostly measures format. The first method's run also scores the
    models before any training (its ``metrics.jsonl`` round 0), the reference row.

    ``pretrain``: None loads the shipped pretrained weights; a dict pretrains both families
    into ``out/models`` first, with these arguments of :func:`drake.models.pretrain_many`
    (``{}``: the defaults, which reproduce the shipped weights).

    Progress goes through ``say``: a line at least every ``every`` seconds (1.25 ``every`` at
    most) while the runs go on, and about as often while the build does (unless ``progress``
    wraps its shards instead, e.g. a tqdm bar) and the models pretrain; the verification of
    the build, and the time each method took.
    """
    from drake.build import build
    from drake.layout import verified_summary
    from drake.models.pretrain import pretrain_many
    from drake.progress import LineProgress, format_seconds
    from drake.registry import get_benchmark
    from drake.runtime import LocalRuntime, RunConfig
    from drake.runtime.progress import RoundProgress
    from drake.verify import verify

    out = Path(out)
    data = out / "data"
    spec = get_benchmark("drake-synth", size=size)
    folder = data / spec.name
    manifest = folder / "manifest.json"
    report = verify(folder) if manifest.exists() else None
    if report is not None and report.ok and \
            json.loads(manifest.read_text())["spec_sha256"] == spec.fingerprint():
        say(f"[1/3] drake-synth already built at {folder}; "
            f"verified: {verified_summary(report, json.loads(manifest.read_text()))}")
    else:
        say(f"[1/3] building drake-synth ({size}) into {folder}")
        t0 = time.monotonic()
        build(spec, data, seed=seed, overwrite=True,
              progress=progress or LineProgress(say, every).wrap("      building", "shard"))
        report = verify(folder)
        if not report.ok:
            raise VerifyError(f"the new build in {folder} fails `drake verify`: "
                              f"{report.problems[0]} ({len(report.problems)} problem(s))")
        say(f"      built in {format_seconds(time.monotonic() - t0)}; "
            f"verified: {verified_summary(report, json.loads(manifest.read_text()))}")
    models = None
    if pretrain is not None:
        models = out / "models"
        say(f"[2/3] pretraining the tiny models (cached in {models})")
        todo = []
        for name in sorted(set(spec.models())):
            done = models / name / "pretrain_report.json"
            if done.exists() and json.loads(done.read_text()).get("seed") == seed:
                say(f"      {name}: cached")
            else:
                todo.append(name)
        if todo:
            lines = LineProgress(say, every)

            def step_line(name: str, step: int, steps: int, loss: float) -> None:
                lines.update(f"      {name}: step {step}/{steps}, loss {loss:.3f} "
                             f"({format_seconds(lines.elapsed())} elapsed)", force=step == steps)

            pretrain_many(todo, out_dir=models, seed=seed, **{"progress": step_line, **pretrain})
    else:
        say("[2/3] tiny models: the pretrained weights shipped with drake "
            "(`drake models pretrain` rebuilds them)")
    results = []
    for i, method in enumerate(methods):
        say(f"[3/3] {method} ({i + 1}/{len(methods)}): {rounds} rounds, {QUICKSTART.scenario} "
            f"hetero" + (", scoring the models before training first" if i == 0 else ""))
        t0 = time.monotonic()
        cfg = RunConfig(data=str(folder), scenario=QUICKSTART.scenario, method=method,
                        out=str(out / "runs" / method), seed=seed, rounds=rounds,
                        compute_budget=compute_budget, eval_per_task=eval_per_task,
                        eval_every=eval_every, mc_scoring=mc_scoring,
                        eval_initial=i == 0, model_cache=None if models is None else str(models))
        hook = RoundProgress(say, f"      {method} ", every=every)
        with hook.keepalive():  # a line at least every ~every s, even while one client is slow
            results.append(LocalRuntime(cfg, hooks=[hook]).run())
        say(f"      {method} took {format_seconds(time.monotonic() - t0)}")
    if methods:
        _report([out / "runs" / m for m in methods], out / "report", say)
    return results


def _report(runs: Sequence[Path], folder: Path, say: Callable[[str], None]) -> None:
    """`drake report` of the quickstart's runs (curves, the client x task heatmaps, cost); a
    missing plotting extra is said in one line, and the table is printed all the same."""
    from drake.report import ReportError, write_report

    try:
        summary = write_report(runs, folder)
    except ReportError as err:
        say(f"report: not written ({err})")
        return
    say(f"report: {summary.index} (plots of the curves, the client x task scores and the "
        f"cost; `drake report` takes more seeds)")
