"""The contract every real-data adapter meets.

An adapter reads one source *kind* (``TaskSpec.source``: ``"llava-tar"``, ``"hf-classification"``,
...) in its native form and converts a task split in two passes:

1. :meth:`Adapter.convert` reads every source row of the split once, applies the task's rule and
   caps, and returns a :class:`Conversion`: the kept rows as light *records* (ids, paths, byte
   offsets: never decoded images), how many rows the rule dropped and why, and every rejected row
   with its reason. Counts reconcile: ``source_rows == len(kept) + sum(dropped) + len(rejected)``.
2. :meth:`Adapter.sample` turns one kept record into a schema sample (loading image bytes then).

Checks that decide whether a row is kept (image decodes, ``<image>`` count matches, the answer is
one of the choices) happen in ``convert``, so the builder can plan shards before writing any.
Adapters never write files and never reach the network except through ``huggingface_hub`` /
``datasets`` calls, which honour ``HF_HUB_OFFLINE`` and a pre-filled ``HF_HOME`` cache.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from drake.specs import TaskSpec

#: Reasons a source row is rejected (listed in ``rejected.jsonl``).
REJECT_REASONS = (
    "unreadable-image",
    "missing-field",
    "choice-not-found",
    "image-token-mismatch",
    "empty-answer",
    "duplicate-id",
)


@dataclass(frozen=True)
class Rejection:
    """One source row the adapter refused, with enough to find it in the source."""

    task: str
    split: str
    source_id: str
    reason: str
    detail: str
    where: str = ""  # file (and member) the row came from

    def __post_init__(self) -> None:
        if self.reason not in REJECT_REASONS:
            raise ValueError(f"rejection reason {self.reason!r} not in {REJECT_REASONS}")

    def to_dict(self) -> dict[str, str]:
        return {"task": self.task, "split": self.split, "source_id": self.source_id,
                "reason": self.reason, "detail": self.detail, "where": self.where}


@dataclass
class Conversion:
    """The outcome of reading one task split from its source."""

    task: str
    split: str
    source_rows: int
    kept: list[Any] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)  # rule name -> rows dropped by it
    rejected: list[Rejection] = field(default_factory=list)

    def reconciles(self) -> bool:
        return self.source_rows == len(self.kept) + sum(self.dropped.values()) + len(self.rejected)

    def counts(self) -> dict[str, Any]:
        return {"source_rows": self.source_rows, "kept": len(self.kept),
                "dropped": dict(sorted(self.dropped.items())),
                "rejected": dict(sorted(Counter(r.reason for r in self.rejected).items()))}


@dataclass(frozen=True)
class AdapterOptions:
    """What the user told ``drake build`` about where the source lives."""

    source_dir: Path | None = None
    revision: str | None = None
    cache_dir: Path | None = None
    seed: int = 0
    strict: bool = False
    #: which file an ambiguous subset id opens: ``released`` (``dataset-<id>.json`` as the
    #: released scenarios open it, which produced the paper's numbers) or ``by-content`` (the
    #: candidate whose records carry the task's image count)
    subsets: str = "released"


class Adapter(ABC):
    """Base class: subclasses set ``kind`` and implement the two passes."""

    kind: ClassVar[str] = ""

    def __init__(self, options: AdapterOptions) -> None:
        self.options = options

    def splits(self, task: TaskSpec) -> Iterable[str]:
        """The splits this task has (``train``/``test`` unless the rule says otherwise)."""
        return ("train", "test")

    @abstractmethod
    def convert(self, task: TaskSpec, split: str) -> Conversion:
        """Read every source row of the split once: kept records, drops and rejections."""

    @abstractmethod
    def sample(self, task: TaskSpec, split: str, record: Any, index: int) -> dict[str, Any]:
        """The schema sample of one kept record (images loaded now)."""


class CoreAdapter(Adapter):
    """An adapter that opens one *core* per task (a loaded source dataset) and delegates to it.

    Subclasses implement :meth:`core`; the core offers ``describe()``, ``convert(split)`` and
    ``sample(split, record, index)``.
    """

    def __init__(self, options: AdapterOptions) -> None:
        super().__init__(options)
        self._cores: dict[str, Any] = {}

    @abstractmethod
    def core(self, task: TaskSpec) -> Any:
        """The task's opened source (cached in ``self._cores``)."""

    def prefetch(self, tasks: list[TaskSpec]) -> None:
        """Download (or find in the cache) and open every task's dataset before converting."""
        for task in tasks:
            self.core(task)

    def describe(self, task: TaskSpec) -> dict[str, Any]:
        """Repo, resolved commit, split rule (and classes or format), for the manifest."""
        return self.core(task).describe()

    def convert(self, task: TaskSpec, split: str) -> Conversion:
        return self.core(task).convert(split)

    def sample(self, task: TaskSpec, split: str, record: Any, index: int) -> dict[str, Any]:
        return self.core(task).sample(split, record, index)
