"""`drake quickstart`: drake-synth end to end, offline, in one command.

Builds a small drake-synth, loads the tiny model families (the pretrained weights shipped with
the suite, or pretrains them into ``out/models`` with ``pretrain=True``), runs ``sft``,
``fedavg`` and ``ditto`` on the dynamic heterogeneous scenario for a few rounds, and prints a
Self/Others table. Data, model cache and run folders all go under one folder.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_METHODS = ("sft", "fedavg", "ditto")


def quickstart(out: Path, *, methods: Sequence[str] = DEFAULT_METHODS, size: str = "small",
               rounds: int = 4, seed: int = 0, eval_per_task: int = 8, eval_every: int = 2,
               compute_budget: int = 12, mc_scoring: str = "loglik",
               pretrain: dict[str, Any] | None = None, progress=None,
               say=print) -> list[dict[str, Any]]:
    """Run the quickstart under ``out`` and return the results of each method.

    Multiple-choice answers are scored by option likelihood by default (``mc_scoring``): the
    tiny models answer in the public split's formats until training teaches them the tasks',
    so greedy generation mostly measures format. The first method's run also scores the
    models before any training (its ``metrics.jsonl`` round 0), the reference row.

    ``pretrain``: None loads the shipped pretrained weights; a dict pretrains both families
    into ``out/models`` first, with these arguments of :func:`drake.models.pretrain_many`
    (``{}``: the defaults, which reproduce the shipped weights).
    """
    from drake.build import build
    from drake.models.pretrain import pretrain_many
    from drake.registry import get_benchmark
    from drake.runtime import LocalRuntime, RunConfig
    from drake.verify import verify

    out = Path(out)
    data = out / "data"
    spec = get_benchmark("drake-synth", size=size)
    folder = data / spec.name
    if (folder / "manifest.json").exists() and verify(folder).ok and \
            json.loads((folder / "manifest.json").read_text())["spec_sha256"] == spec.fingerprint():
        say(f"[1/3] drake-synth already built at {folder}")
    else:
        say(f"[1/3] building drake-synth ({size}) into {folder}")
        build(spec, data, seed=seed, overwrite=True, progress=progress)
    models = None
    if pretrain is not None:
        models = out / "models"
        say(f"[2/3] pretraining the tiny models (cached in {models})")
        todo = []
        for name in sorted(set(spec.models())):
            report = models / name / "pretrain_report.json"
            if report.exists() and json.loads(report.read_text()).get("seed") == seed:
                say(f"      {name}: cached")
            else:
                todo.append(name)
        if todo:
            pretrain_many(todo, out_dir=models, seed=seed, **pretrain)
    else:
        say("[2/3] tiny models: the pretrained weights shipped with drake "
            "(`drake models pretrain` rebuilds them)")
    results = []
    for i, method in enumerate(methods):
        say(f"[3/3] {method} ({i + 1}/{len(methods)}): {rounds} rounds, dynamic hetero")
        cfg = RunConfig(data=str(folder), scenario="dynamic", method=method,
                        out=str(out / "runs" / method), seed=seed, rounds=rounds,
                        compute_budget=compute_budget, eval_per_task=eval_per_task,
                        eval_every=eval_every, mc_scoring=mc_scoring,
                        eval_initial=i == 0, model_cache=None if models is None else str(models))
        results.append(LocalRuntime(cfg).run())
    return results
