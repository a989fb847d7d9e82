"""Frozen, typed declarations of tasks, clients and benchmarks.

A benchmark is data, not code: a reader sees every task, its source, answer format and metric,
and the client table in one place (``drake/catalog/``), the way lm-evaluation-harness declares
tasks in YAML. Specs serialise to plain JSON for the build manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from drake.errors import SchemaError
from drake.schema import ANSWER_TYPES

PROTOCOLS = ("self_others", "base_novel", "generation", "classification")
SPLITS = ("train", "test")


class FrozenMap(Mapping):
    """A read-only mapping that pickles (specs cross process boundaries in parallel builds)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(other) == self._data

    def __hash__(self) -> int:
        return hash(json.dumps(self._data, sort_keys=True, default=str))

    def __reduce__(self):
        return (FrozenMap, (self._data,))


def _frozen(mapping: Mapping[str, Any] | None) -> FrozenMap:
    return FrozenMap(mapping)


def _plain(obj: Any) -> dict[str, Any]:
    """Dataclass fields as plain JSON-able values (mappings to dicts, tuples to lists)."""
    out = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out



def canonical_sha256(obj: Any) -> str:
    """sha256 of ``obj``'s canonical JSON (sorted keys, no spaces): spec fingerprints and the
    manifest's digest."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
                          ).hexdigest()

@dataclass(frozen=True)
class TaskSpec:
    """One task: where its samples come from and how they are scored.

    Parameters
    ----------
    id : str
        Stable task id, e.g. ``"VSR-0"`` (real DRAKE ids are ``<Dataset>-<subset_id>``).
    source : str
        The source adapter that produces the samples (``"synth"``, ``"drake-hub"``, ...).
    source_args : mapping
        Adapter arguments: Hub repo and file, subset id, class list, ...
    subgroup : str
        The task family (relation, reasoning, vqa, unseen-task, unseen-domain, ...).
    answer_type : str
        One of :data:`drake.schema.ANSWER_TYPES`.
    metrics : tuple of str
        Metric names from ``evaluators``; the first is the task's primary metric.
    description : str
        What the task asks, in one line.
    num_images : (int, int)
        Minimum and maximum images per sample.
    prompt_template : str
        The prompt pattern (informative; adapters and generators apply it).
    split_rule : str
        How train and test are made.
    caps : mapping
        Maximum rows per split (``{"train": 10000, "test": 2000}``).
    expected : mapping
        Rows a split should keep, where the release's count is known (``{"test": 1000}``); a
        build whose split keeps fewer than :data:`drake.build.SHORT_BELOW` of it (or none at
        all, declared or not) is short and fails unless ``--allow-short``.
    licence, citation : str
        Of the source data.
    twin_of : str or None
        For drake-synth tasks, the real DRAKE task they mirror.
    normalise : str
        How generated text and references are normalised before the task's metrics:
        ``""`` (as written) or ``"evalai"`` (VQA/EvalAI answer processing,
        :func:`evaluators.text.normalise`: lowercase, no punctuation or articles, number words
        as digits; FediLoRA scores Google-BLEU and ROUGE-Lsum so).
    """

    id: str
    source: str
    subgroup: str
    answer_type: str
    metrics: tuple[str, ...]
    description: str
    num_images: tuple[int, int] = (1, 1)
    source_args: FrozenMap = field(default_factory=lambda: _frozen({}))
    prompt_template: str = ""
    split_rule: str = "official"
    caps: FrozenMap = field(default_factory=lambda: _frozen({}))
    licence: str = "see source"
    citation: str = ""
    twin_of: str | None = None
    normalise: str = ""
    expected: FrozenMap = field(default_factory=lambda: _frozen({}))

    def __post_init__(self) -> None:
        if self.normalise not in ("", "evalai"):
            raise SchemaError(f"task {self.id}: normalise {self.normalise!r} must be '' or "
                              f"'evalai'")
        if not self.id or "/" in self.id or self.id.startswith("."):
            raise SchemaError(f"task id {self.id!r} must be non-empty, without '/' or a leading '.'")
        if self.answer_type not in ANSWER_TYPES:
            raise SchemaError(f"task {self.id}: answer_type {self.answer_type!r} not in {ANSWER_TYPES}")
        if not self.metrics:
            raise SchemaError(f"task {self.id}: declare at least one metric")
        lo, hi = self.num_images
        if lo < 0 or hi < lo:
            raise SchemaError(f"task {self.id}: num_images {self.num_images} is not a valid range")
        object.__setattr__(self, "source_args", _frozen(dict(self.source_args)))
        object.__setattr__(self, "caps", _frozen(dict(self.caps)))
        bad = {k: v for k, v in dict(self.expected).items()
               if k not in ("train", "test") or not isinstance(v, int) or isinstance(v, bool)
               or v < 1}
        if bad:
            raise SchemaError(f"task {self.id}: expected counts {bad} must be positive ints for "
                              f"the splits train and test")
        object.__setattr__(self, "expected", _frozen(dict(self.expected)))
        object.__setattr__(self, "metrics", tuple(self.metrics))

    def to_dict(self) -> dict[str, Any]:
        out = _plain(self)
        for key in ("normalise", "expected"):  # unset: left out, so existing fingerprints hold
            if not out[key]:
                del out[key]
        return out


@dataclass(frozen=True)
class ClientSpec:
    """A client: its ordered task list (its stream order in the dynamic setting)."""

    id: int
    tasks: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tasks": list(self.tasks)}


@dataclass(frozen=True)
class ScenarioSpec:
    """A cheap view over a built benchmark: a partition rule plus a stream order.

    Parameters
    ----------
    name : str
        e.g. ``"dynamic"``, ``"static"``, ``"alpha0.3"``, ``"pathological-k2"``.
    partition : str
        A partitioner name from ``partitioners`` (``"by_task"``, ``"dirichlet"``, ...).
    params : mapping
        Keyword arguments of the partitioner (alpha, classes_per_client, ...).
    order : str
        ``"static"`` or ``"dynamic"`` (task-incremental).
    rounds : int
        Total federated rounds the stream is cut into.
    rounds_per_task : int or None
        For dynamic streams.
    protocol : str
        The protocol runs on this scenario are scored by, where it is not the benchmark's
        (synth-cls's ``base2novel`` is scored by ``base_novel``); empty for the benchmark's.
    """

    name: str
    partition: str
    order: str = "static"
    rounds: int = 1
    rounds_per_task: int | None = None
    params: FrozenMap = field(default_factory=lambda: _frozen({}))
    protocol: str = ""

    def __post_init__(self) -> None:
        if self.order not in ("static", "dynamic"):
            raise SchemaError(f"scenario {self.name}: order must be static or dynamic")
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise SchemaError(f"scenario name {self.name!r} must be non-empty, without '/'")
        object.__setattr__(self, "params", _frozen(dict(self.params)))
        if self.protocol and self.protocol not in PROTOCOLS:
            raise SchemaError(f"scenario {self.name}: protocol {self.protocol!r} is not one of "
                              f"{PROTOCOLS}")

    def to_dict(self) -> dict[str, Any]:
        out = _plain(self)
        if not out["protocol"]:  # the benchmark's: left out, so existing fingerprints hold
            del out["protocol"]
        return out


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark: tasks, clients with their task order and models, protocol and scenarios.

    ``model_mixes`` maps a variant name (``"hetero-llama-1b-3b"``, ``"homo-llama-3b"``, ...) to the
    model of each client in client order; ``default_mix`` names the one used when none is given.
    """

    name: str
    version: str
    description: str
    protocol: str
    tasks: tuple[TaskSpec, ...]
    clients: tuple[ClientSpec, ...] = ()
    unseen_tasks: tuple[str, ...] = ()
    public_tasks: tuple[str, ...] = ()
    model_mixes: FrozenMap = field(default_factory=lambda: _frozen({}))
    default_mix: str = ""
    scenarios: tuple[ScenarioSpec, ...] = ()
    offline: bool = False
    source_note: str = ""
    citation: str = ""

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise SchemaError(f"benchmark {self.name}: protocol {self.protocol!r} not in {PROTOCOLS}")
        ids = [t.id for t in self.tasks]
        dup = sorted({t for t in ids if ids.count(t) > 1})
        if dup:
            raise SchemaError(f"benchmark {self.name}: task ids repeat: {dup}")
        known = set(ids)
        for c in self.clients:
            bad = [t for t in c.tasks if t not in known]
            if bad:
                raise SchemaError(f"benchmark {self.name}: client {c.id} names unknown tasks {bad}")
        for t in (*self.unseen_tasks, *self.public_tasks):
            if t not in known:
                raise SchemaError(f"benchmark {self.name}: unseen/public task {t!r} is not declared")
        mixes = {k: tuple(v) for k, v in dict(self.model_mixes).items()}
        for mix, models in mixes.items():
            if self.clients and len(models) != len(self.clients):
                raise SchemaError(
                    f"benchmark {self.name}: model mix {mix!r} lists {len(models)} models "
                    f"for {len(self.clients)} clients"
                )
        if mixes and self.default_mix not in mixes:
            raise SchemaError(f"benchmark {self.name}: default_mix {self.default_mix!r} undeclared")
        names = [s.name for s in self.scenarios]
        if len(set(names)) != len(names):
            raise SchemaError(f"benchmark {self.name}: scenario names repeat")
        object.__setattr__(self, "model_mixes", _frozen(mixes))

    def task(self, task_id: str) -> TaskSpec:
        for t in self.tasks:
            if t.id == task_id:
                return t
        from drake.errors import UnknownNameError

        raise UnknownNameError(
            f"benchmark {self.name} has no task {task_id!r}; `drake info` lists its tasks"
        )

    def scenario(self, name: str) -> ScenarioSpec:
        for s in self.scenarios:
            if s.name == name:
                return s
        from drake.errors import UnknownNameError

        raise UnknownNameError(
            f"benchmark {self.name} declares no scenario {name!r}; "
            f"known: {[s.name for s in self.scenarios]}"
        )

    def models(self, mix: str | None = None) -> tuple[str, ...]:
        """The model of each client for a model mix (the default mix when None)."""
        key = mix or self.default_mix
        if key not in self.model_mixes:
            from drake.errors import UnknownNameError

            raise UnknownNameError(
                f"benchmark {self.name} has no model mix {key!r}; known: {sorted(self.model_mixes)}"
            )
        return self.model_mixes[key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "protocol": self.protocol,
            "tasks": [t.to_dict() for t in self.tasks],
            "clients": [c.to_dict() for c in self.clients],
            "unseen_tasks": list(self.unseen_tasks),
            "public_tasks": list(self.public_tasks),
            "model_mixes": {k: list(v) for k, v in self.model_mixes.items()},
            "default_mix": self.default_mix,
            "scenarios": [s.to_dict() for s in self.scenarios],
            "offline": self.offline,
            "source_note": self.source_note,
            "citation": self.citation,
        }

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of the spec: changes whenever the declaration does."""
        return canonical_sha256(self.to_dict())
