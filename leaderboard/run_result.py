"""The ``results.json`` a run writes: one seed of one method on one benchmark scenario.

The federated runtime writes this file at the end of a run (``drake eval``), and
``drake leaderboard submit`` turns one or more of them (different seeds, same everything
else) into a leaderboard entry. Unknown fields are refused, so the model is the contract.

Layout (all scores on the 0-100 scale unless the metric says otherwise, see
:mod:`leaderboard.metrics`)::

    {
      "schema_version": "1.0",
      "benchmark": {"name": "drake-synth", "version": "1.0", "manifest_sha256": "<64 hex>"},
      "scenario": {"name": "dynamic-hetero", "order": "dynamic", "models": "hetero",
                   "partition": {"n_clients": 10, "rounds_per_task": 5}},
      "method": {"name": "fedavg", "hyperparameters": {"lr": 0.0002, "lora.r": 8},
                 "config_sha256": "<64 hex>"},
      "models_per_client": ["tiny-llava-llama", ...],      # index = client id
      "seed": 0,
      "protocol": "self_others",
      "metrics": {"self_a_last": 61.2, "self_a_auc": 55.0,
                  "others_a_last": 40.1, "others_a_auc": 38.7},
      "curves": {
        "rounds": [5, 10, 15],                             # evaluation points, increasing
        "self":   [40.0, 52.5, 61.2],                      # mean over clients, own tasks
        "others": [30.0, 36.0, 40.1],                      # mean over clients, others' tasks
        "scores": [[{"task-a": 40.0}, ...], ...]           # scores[point][client][task]
      },
      "cost": {"comm_bytes_up_per_round": [..], "comm_bytes_down_per_round": [..],
               "wall_time_s": 812.4, "peak_rss_mb": 2048.0, "flops_extra_pct": 5.3},
      "scoring": {"mc_scoring": "loglik", "bertscore_model": null},
      "software": {"package_version": "0.1.0", "git_hash": "<7-40 hex>",
                   "python": "3.11.7", "torch": "2.4.0", "transformers": "4.46.0"},
      "created_at": "2025-06-01T12:00:00+00:00",
      "diagnostics": {"edit_checks": 12, "edits": 1},     # optional: what the method counted
      "unseen": [{"task-u": 31.0}, ...],                  # optional: unseen[client][task]
      "fast_adaptation": {"iterations": 200, "every": 25,  # optional: drake eval --fast-adapt
                          "steps": [0, 25, ..., 200],
                          "curves": {"tiny-llava-llama": {"aggregated": {"task-u": [..]},
                                                          "pretrained": {"task-u": [..]}}},
                          "mean": {"aggregated": [..], "pretrained": [..]}}
    }

Conventions the runtime must follow:

- ``manifest_sha256`` is the sha256 of the built dataset's ``manifest.json`` bytes.
- ``config_sha256`` is the sha256 of the canonical run config with the seed removed, so
  runs that differ only in their seed share it.
- ``hyperparameters`` and ``partition`` are flat: nested configs use dotted keys.
- ``curves.self``/``others`` are the mean over clients of the score on the client's own
  tasks / on other clients' tasks at each evaluation point; ``others`` is null for protocols
  with no cross-client evaluation. For ``self_others``, ``self_a_last`` and
  ``others_a_last`` equal the last points of the curves. In ``scores`` a client's dict holds
  the tasks evaluated at that point (tasks not yet seen in a dynamic stream are absent).
- ``comm_bytes_*_per_round`` hold one count per communication round.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from leaderboard.fields import (
    BenchmarkName,
    Finite,
    GitHash,
    MethodName,
    ModelName,
    NonNeg,
    NonNegInt,
    PackageVersion,
    Params,
    Pct,
    PosInt,
    ScenarioName,
    Sha256,
    TaskId,
    Text,
    Version,
)
from leaderboard.metrics import ALL_PROTOCOL_METRIC_NAMES, DOMAIN_METRIC_PATTERN, metric_spec
from leaderboard.model import Protocol

RESULTS_SCHEMA_VERSION = "1.0"
_A_LAST_TOLERANCE = 1e-6


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RunBenchmark(_Strict):
    """Benchmark name, version and the sha256 of the data manifest the run read."""

    name: BenchmarkName
    version: Version
    manifest_sha256: Sha256


class RunScenario(_Strict):
    """Scenario name, stream order, model mix and partition parameters."""

    name: ScenarioName
    order: Literal["static", "dynamic"]
    models: Literal["homo", "hetero"]
    partition: Params


class RunMethod(_Strict):
    """Method name, flat hyper-parameters and the seed-free config hash."""

    name: MethodName
    hyperparameters: Params
    config_sha256: Sha256


class Curves(_Strict):
    """Scores at each evaluation point."""

    rounds: Annotated[list[NonNegInt], Field(min_length=1, max_length=10000)]
    self: Annotated[list[Pct], Field(min_length=1, max_length=10000)]
    others: Annotated[list[Pct], Field(min_length=1, max_length=10000)] | None = None
    scores: Annotated[
        list[
            Annotated[
                list[Annotated[dict[TaskId, NonNeg], Field(max_length=1000)]],
                Field(max_length=10000),
            ]
        ],
        Field(min_length=1, max_length=10000),
    ]

    @model_validator(mode="after")
    def _aligned(self) -> Curves:
        n = len(self.rounds)
        if any(b <= a for a, b in zip(self.rounds, self.rounds[1:])):
            raise ValueError(f"curves.rounds: must be strictly increasing, got {self.rounds}")
        for field in ("self", "others", "scores"):
            values = getattr(self, field)
            if values is not None and len(values) != n:
                raise ValueError(
                    f"curves.{field}: {len(values)} points for {n} rounds; give one per round"
                )
        return self


class RunCost(_Strict):
    """Communication per round (bytes), wall time and optional memory/compute overheads."""

    comm_bytes_up_per_round: Annotated[list[NonNegInt], Field(min_length=1, max_length=100000)]
    comm_bytes_down_per_round: Annotated[list[NonNegInt], Field(min_length=1, max_length=100000)]
    wall_time_s: NonNeg
    peak_rss_mb: NonNeg | None = None
    flops_extra_pct: Finite | None = None

    @model_validator(mode="after")
    def _same_rounds(self) -> RunCost:
        if len(self.comm_bytes_up_per_round) != len(self.comm_bytes_down_per_round):
            raise ValueError(
                "cost: comm_bytes_up_per_round and comm_bytes_down_per_round must have one "
                "value per round each"
            )
        return self


class RunScoring(_Strict):
    """How multiple-choice answers were scored, the BERTScore model if used, and which tasks
    Self/Others averaged at each point (``started``: those with data arrived by then)."""

    mc_scoring: Literal["generate", "loglik"]
    bertscore_model: Text(200) | None = None
    eval_tasks: Literal["started", "all"] | None = None


class RunSoftware(_Strict):
    """Versions that produced the run."""

    package_version: PackageVersion
    git_hash: GitHash | None = None
    python: Text(64, 1)
    torch: Text(64, 1)
    transformers: Text(64, 1)
    #: where the clients ran: ``local`` (one process) or ``flower`` (Flower ClientApps); the
    #: numbers are the same for the same seed
    runtime: Literal["local", "flower"] | None = None
    flwr: Text(64, 1) | None = None


FastAdaptStart = Literal["aggregated", "pretrained"]
_Curve = Annotated[list[NonNeg], Field(min_length=1, max_length=10001)]


class FastAdaptation(_Strict):
    """``drake eval --fast-adapt``: per architecture, start and unseen task, the score after
    each of ``steps`` fine-tuning iterations, and the mean over architectures and tasks."""

    iterations: NonNegInt
    every: PosInt
    steps: Annotated[list[NonNegInt], Field(min_length=1, max_length=10001)]
    curves: Annotated[dict[ModelName, dict[FastAdaptStart, Annotated[
        dict[TaskId, _Curve], Field(max_length=1000)]]], Field(min_length=1, max_length=100)]
    mean: dict[FastAdaptStart, _Curve]

    @model_validator(mode="after")
    def _one_score_per_step(self) -> FastAdaptation:
        n = len(self.steps)
        if self.steps != sorted(set(self.steps)) or self.steps[0] != 0 \
                or self.steps[-1] != self.iterations:
            raise ValueError(f"fast_adaptation.steps must increase from 0 to iterations "
                             f"({self.iterations}), got {self.steps}")
        for arch, starts in self.curves.items():
            for start, tasks in starts.items():
                for task, curve in tasks.items():
                    if len(curve) != n:
                        raise ValueError(f"fast_adaptation.curves.{arch}.{start}.{task}: "
                                         f"{len(curve)} scores for {n} steps")
        for start, curve in self.mean.items():
            if len(curve) != n:
                raise ValueError(f"fast_adaptation.mean.{start}: {len(curve)} scores for {n} "
                                 f"steps")
        return self


class RunResult(_Strict):
    """One run's results.json (see the module docstring for the layout and conventions)."""

    schema_version: Literal["1.0"]
    benchmark: RunBenchmark
    scenario: RunScenario
    method: RunMethod
    models_per_client: Annotated[list[ModelName], Field(min_length=1, max_length=10000)]
    seed: NonNegInt
    protocol: Protocol
    metrics: Annotated[dict[str, Finite], Field(min_length=1, max_length=64)]
    curves: Curves
    cost: RunCost
    scoring: RunScoring
    software: RunSoftware
    created_at: Text(40, 1)
    #: what the method counted over the run (e.g. FediLoRA's edit checks and edits, HetLoRA's
    #: prunes); informative, never ranked
    diagnostics: Params | None = None
    #: each client's score on each unseen task after the last round (``drake eval
    #: --eval-unseen``); ``metrics.unseen_a_last`` is their mean over tasks, then clients
    unseen: Annotated[list[Annotated[dict[TaskId, NonNeg], Field(max_length=1000)]],
                      Field(max_length=10000)] | None = None
    #: ``drake eval --fast-adapt``: FedMosaic's Fig. 5 curves on the unseen tasks
    fast_adaptation: FastAdaptation | None = None

    @field_validator("created_at")
    @classmethod
    def _iso_datetime(cls, value: str) -> str:
        try:
            _dt.datetime.fromisoformat(value)
        except ValueError as err:
            raise ValueError(f"{value!r} is not an ISO 8601 date-time") from err
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RunResult:
        admitted = ALL_PROTOCOL_METRIC_NAMES[self.protocol]
        for name, value in self.metrics.items():
            domain = self.protocol == "classification" and DOMAIN_METRIC_PATTERN.fullmatch(name)
            if name not in admitted and not domain:
                raise ValueError(
                    f"metrics.{name}: not a metric of protocol {self.protocol!r}; "
                    f"allowed: {', '.join(sorted(admitted))}"
                )
            metric_spec(name).check(value, f"metrics.{name}")
        n_clients = len(self.models_per_client)
        for p, point in enumerate(self.curves.scores):
            if len(point) != n_clients:
                raise ValueError(
                    f"curves.scores[{p}]: {len(point)} clients, but models_per_client lists "
                    f"{n_clients}"
                )
        if self.protocol == "self_others":
            if self.curves.others is None:
                raise ValueError("curves.others: required for protocol 'self_others'")
            for metric, curve in (
                ("self_a_last", self.curves.self),
                ("others_a_last", self.curves.others),
            ):
                value = self.metrics.get(metric)
                if value is not None and not math.isclose(
                    value, curve[-1], abs_tol=_A_LAST_TOLERANCE
                ):
                    raise ValueError(
                        f"metrics.{metric}: {value} differs from the last curve point "
                        f"{curve[-1]}; A_last is the score at the last evaluation point"
                    )
        return self
