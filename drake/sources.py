"""Where a task's samples come from: source adapters behind one small interface.

A source knows how many rows a task split has (or ``None`` when it streams) and yields
schema samples for a row range. The builder shards, validates and writes; sources only read.
Real sources talk to the Hugging Face Hub; the synthetic source draws with PIL and needs nothing.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from drake.errors import BuildError, NetworkUnavailable
from drake.specs import BenchmarkSpec, TaskSpec

HUB_HOST = "huggingface.co"
OFFLINE_HINT = "`drake build --benchmark drake-synth` builds DRAKE's offline twin with no network"


class TaskSource(Protocol):
    """What the builder needs from a source adapter."""

    def num_rows(self, task: TaskSpec, split: str) -> int:
        """Rows the split will have after caps."""

    def rows(self, task: TaskSpec, split: str, start: int, stop: int) -> Iterator[dict[str, Any]]:
        """Schema samples ``start..stop-1`` of the split, in order."""


class SynthSource:
    """Procedural samples from :mod:`drake.synth`; row ``i`` depends only on (seed, task, split, i)."""

    def __init__(self, seed: int, image_size: int = 64) -> None:
        self.seed = seed
        self.image_size = image_size

    def num_rows(self, task: TaskSpec, split: str) -> int:
        return int(task.caps.get(split, 0))

    def rows(self, task: TaskSpec, split: str, start: int, stop: int) -> Iterator[dict[str, Any]]:
        from drake.synth import generate_sample

        generator = task.source_args.get("generator", task.id)
        for index in range(start, stop):
            sample = generate_sample(generator, split, index, self.seed, self.image_size)
            if generator != task.id:
                sample["task"] = task.id
            yield sample


def hub_reachable(timeout: float = 4.0) -> bool:
    """True when the Hub answers a TCP connection within ``timeout`` seconds.

    DNS lookups can hang far longer than a socket timeout, so the probe runs in a daemon thread
    and is abandoned at the deadline: the caller learns "no network" in seconds, never minutes.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((HUB_HOST, 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def source_for(spec: BenchmarkSpec, seed: int, image_size: int = 64) -> TaskSource:
    """The source adapter that builds ``spec``.

    Raises
    ------
    NetworkUnavailable
        For a Hub-backed benchmark when the Hub cannot be reached (checked first, in seconds).
    BuildError
        For a Hub-backed benchmark whose adapter this version does not ship yet.
    """
    kinds = {t.source for t in spec.tasks}
    if kinds == {"synth"}:
        return SynthSource(seed, image_size)
    if not hub_reachable():
        raise NetworkUnavailable(
            f"benchmark {spec.name!r} is read from the Hugging Face Hub ({spec.source_note}), "
            f"which cannot be reached from here; {OFFLINE_HINT}"
        )
    raise BuildError(
        f"benchmark {spec.name!r} needs the source adapter(s) {sorted(kinds)}, which this version "
        f"of the suite does not ship yet; {OFFLINE_HINT}"
    )
