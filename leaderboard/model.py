"""Pydantic models of a leaderboard entry and of the leaderboard file.

These models and ``leaderboard/schema.json`` describe the same documents: a document is
accepted by :class:`Entry` exactly when the JSON Schema accepts it (a test validates a
corpus of valid and invalid documents with both and requires equal verdicts). Both check
*structure*: field names and types, patterns, value ranges per metric, which metric names a
protocol admits, and what each provenance requires.

Checks that need more than one document or arithmetic across fields (the benchmark is
known at that version, the scenario follows its benchmark's naming rule, per-seed values
reproduce mean/std/CI, the manifest hash is known, no duplicate identities) live in
:mod:`leaderboard.validate`.

An entry is identified by ``(benchmark name, benchmark version, scenario, method name,
method config hash, provenance)`` (:meth:`Entry.identity`).

Provenance
----------
``reproduced``
    Built by ``drake leaderboard submit`` from results.json files this suite wrote. Carries
    the data-manifest hash, config hash, seeds, per-seed values, cost, scoring, software
    and a link; no citation.
``reported``
    Copied from a paper table. Carries a citation (paper and table); seeds, per-seed values,
    curve, scoring and software are null; manifest and config hashes may be null. ``std``
    is the paper's ± where it prints one, else null; ``ci95`` is null because none of the
    seeded papers report intervals and deriving one would assume how their ± was computed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, model_validator

from leaderboard.fields import (
    BenchmarkName,
    DateStr,
    Finite,
    GitHash,
    HttpsUrl,
    JsonInt,
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
    Text,
    Version,
)
from leaderboard.metrics import ALL_PROTOCOL_METRIC_NAMES, DOMAIN_METRIC_PATTERN, metric_spec

SCHEMA_VERSION = "1.0"
SCHEMA_PATH = Path(__file__).with_name("schema.json")

Protocol = Literal["self_others", "base_novel", "generation", "classification"]
Provenance = Literal["reproduced", "reported"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class BenchmarkRef(_Strict):
    """Which benchmark, at which version, built from which data manifest."""

    name: BenchmarkName
    version: Version
    manifest_sha256: Sha256 | None = Field(
        description="sha256 of the built dataset's manifest.json bytes; null only if reported"
    )


class ScenarioRef(_Strict):
    """The federated scenario: stream order, model mix and partition parameters."""

    name: ScenarioName
    order: Literal["static", "dynamic"]
    models: Literal["homo", "hetero"]
    partition: Params


class MethodRef(_Strict):
    """The method, its hyper-parameters and the hash of the config that ran."""

    name: MethodName
    hyperparameters: Params
    config_sha256: Sha256 | None = Field(description="null only for reported entries")


class MetricStats(_Strict):
    """Summary of one metric over seeds.

    ``mean`` is the mean of ``per_seed``; ``std`` the sample standard deviation (ddof=1,
    0 for one seed); ``ci95`` the two-sided Student-t 95% interval of the mean (null for one
    seed, and for reported entries).
    """

    mean: Finite
    std: NonNeg | None
    ci95: Annotated[list[Finite], Field(min_length=2, max_length=2)] | None
    per_seed: Annotated[list[Finite], Field(min_length=1, max_length=1000)] | None


class Curve(_Strict):
    """Mean over seeds of the Self (and Others) score at each evaluation round."""

    rounds: Annotated[list[NonNegInt], Field(min_length=1, max_length=10000)]
    self: Annotated[list[Pct], Field(min_length=1, max_length=10000)]
    others: Annotated[list[Pct], Field(min_length=1, max_length=10000)] | None


class EntryCost(_Strict):
    """Communication and compute cost, averaged over seeds (peak memory: max over seeds)."""

    comm_bytes_up_total: NonNeg
    comm_bytes_down_total: NonNeg
    rounds: PosInt
    wall_time_s: NonNeg
    peak_rss_mb: NonNeg | None
    flops_extra_pct: Finite | None


class Scoring(_Strict):
    """How answers were scored: multiple choice by generation or log-likelihood, and which
    tasks Self/Others averaged (``started``: those with data arrived by each point)."""

    mc_scoring: Literal["generate", "loglik"]
    bertscore_model: Text(200) | None
    eval_tasks: Literal["started", "all"] | None = None


class EntrySoftware(_Strict):
    """The suite version and commit that produced a reproduced entry."""

    package_version: PackageVersion
    git_hash: GitHash | None


class Citation(_Strict):
    """Where a reported number comes from."""

    paper: Text(300, 1)
    table: Text(60, 1)
    note: Text(2000) | None


class Entry(_Strict):
    """One leaderboard row: a method's scores on one benchmark scenario."""

    benchmark: BenchmarkRef
    scenario: ScenarioRef
    protocol: Protocol
    method: MethodRef
    models_per_client: Annotated[list[ModelName], Field(min_length=1, max_length=10000)] | None
    seeds: Annotated[list[JsonInt], Field(min_length=1, max_length=1000)] | None
    n_seeds: PosInt | None
    metrics: Annotated[dict[str, MetricStats], Field(min_length=1, max_length=64)]
    curve: Curve | None
    cost: EntryCost | None
    scoring: Scoring | None
    software: EntrySoftware | None
    submitter: Text(200, 1)
    date: DateStr
    link: HttpsUrl | None
    provenance: Provenance
    citation: Citation | None

    @property
    def provenance_label(self) -> str:
        """``reported``, or ``reproduced`` with the run preset it used (``reproduced (paper
        preset)``) when its hyper-parameters record one (runs since presets exist)."""
        preset = self.method.hyperparameters.get("preset")
        if self.provenance == "reproduced" and isinstance(preset, str):
            return f"reproduced ({preset} preset)"
        return self.provenance

    @model_validator(mode="after")
    def _structure(self) -> Entry:
        self._check_metric_names_and_ranges()
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: values must be distinct")
        if self.provenance == "reproduced":
            self._check_reproduced()
        else:
            self._check_reported()
        return self

    def _check_metric_names_and_ranges(self) -> None:
        admitted = ALL_PROTOCOL_METRIC_NAMES[self.protocol]
        for name, stats in self.metrics.items():
            domain = self.protocol == "classification" and DOMAIN_METRIC_PATTERN.fullmatch(name)
            if name not in admitted and not domain:
                raise ValueError(
                    f"metrics.{name}: not a metric of protocol {self.protocol!r}; "
                    f"allowed: {', '.join(sorted(admitted))}"
                )
            spec = metric_spec(name)
            values = [("mean", stats.mean)] + [
                (f"per_seed[{i}]", v) for i, v in enumerate(stats.per_seed or [])
            ]
            for label, value in values:
                if not spec.lower <= value <= spec.upper:
                    raise ValueError(
                        f"metrics.{name}.{label}: {value!r} outside [{spec.lower}, "
                        f"{spec.upper}]; metrics are on the 0-100 scale"
                    )

    def _check_reproduced(self) -> None:
        required = {
            "benchmark.manifest_sha256": self.benchmark.manifest_sha256,
            "method.config_sha256": self.method.config_sha256,
            "models_per_client": self.models_per_client,
            "seeds": self.seeds,
            "n_seeds": self.n_seeds,
            "cost": self.cost,
            "scoring": self.scoring,
            "software": self.software,
            "link": self.link,
        }
        for field, value in required.items():
            if value is None:
                raise ValueError(f"{field}: required for provenance 'reproduced'")
        for name, stats in self.metrics.items():
            if stats.std is None or stats.per_seed is None:
                raise ValueError(
                    f"metrics.{name}: std and per_seed are required for provenance 'reproduced'"
                )
        if self.citation is not None:
            raise ValueError("citation: must be null for provenance 'reproduced'")

    def _check_reported(self) -> None:
        if self.citation is None:
            raise ValueError(
                "citation: provenance 'reported' needs the paper and table, e.g. "
                "{'paper': 'FedMosaic', 'table': 'Tab. 2'}"
            )
        for field in ("seeds", "curve", "scoring", "software"):
            if getattr(self, field) is not None:
                raise ValueError(f"{field}: must be null for provenance 'reported'")
        for name, stats in self.metrics.items():
            if stats.per_seed is not None:
                raise ValueError(f"metrics.{name}.per_seed: must be null for 'reported'")

    def identity(self) -> tuple[str, str, str, str, str | None, str]:
        """``(benchmark, version, scenario, method, config hash, provenance)``."""
        return (
            self.benchmark.name,
            self.benchmark.version,
            self.scenario.name,
            self.method.name,
            self.method.config_sha256,
            self.provenance,
        )


class Leaderboard(_Strict):
    """The leaderboard file: a schema version and the accepted entries."""

    schema_version: Literal["1.0"]
    entries: list[Entry]


def json_schema(kind: Literal["leaderboard", "entry"] = "leaderboard") -> dict[str, Any]:
    """``schema.json`` for the whole file, or a schema whose root is one entry."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    if kind == "leaderboard":
        return schema
    return {
        "$schema": schema["$schema"],
        "$id": schema["$id"] + ":entry",
        "$defs": schema["$defs"],
        "$ref": "#/$defs/entry",
    }


def schema_validator(kind: Literal["leaderboard", "entry"] = "leaderboard") -> Draft202012Validator:
    """A draft 2020-12 validator of ``schema.json`` that also asserts ``format: date``."""
    return Draft202012Validator(
        json_schema(kind), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
