"""Where builds are, and what a build holds, in the words the CLI prints.

A build is a folder holding ``manifest.json`` (``drake build --out DIR`` writes ``DIR/<name>``;
the quickstart writes ``OUT/data/drake-synth``). A command given a folder that is not a build
names the build it finds near it, one level up or one or two levels down, instead of advising a
new build there (which would nest a duplicate in, or next to, the user's build).

Counts: a build holds ``total_rows`` *samples* (the task shards' rows, train and test); its
scenario *partition files* hold one row per assigned sample each. `drake verify` re-counts
both, so its row total is the two added; :func:`verified_summary` and :func:`sample_summary`
say which is which.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from drake.errors import DrakeError

MANIFEST = "manifest.json"


class BuildNotFound(DrakeError, FileNotFoundError):
    """A folder given as a build holds no manifest.json; the message names builds nearby."""


def _benchmark_of(folder: Path) -> str | None:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    name = manifest.get("benchmark") if isinstance(manifest, dict) else None
    return name if isinstance(name, str) else None


def find_builds(path: Path, benchmark: str | None = None) -> list[Path]:
    """Build folders near ``path``, nearest first: ``path`` itself, one level up, one level down,
    two levels down; only builds of ``benchmark`` when given.

    Example
    -------
    ``find_builds(Path("drake-quickstart"))`` → ``[drake-quickstart/data/drake-synth]``.
    """
    path = Path(path)
    candidates = [path, path.parent]
    for pattern in (f"*/{MANIFEST}", f"*/*/{MANIFEST}"):
        if path.is_dir():
            candidates += sorted(m.parent for m in path.glob(pattern))
    found: list[Path] = []
    for folder in candidates:
        if folder in found or not (folder / MANIFEST).is_file():
            continue
        name = _benchmark_of(folder)
        if name is not None and (benchmark is None or name == benchmark):
            found.append(folder)
    return found


def _names(folders: Sequence[Path]) -> str:
    shown = [str(f) for f in folders[:3]]
    more = f" and {len(folders) - 3} more" if len(folders) > 3 else ""
    return ", ".join(shown) + more


def require_build(folder: Path, command: str) -> Path:
    """``folder`` if it holds a manifest.json, else :class:`BuildNotFound` naming the builds
    nearby and the ``command`` (e.g. ``drake info``) run on the first of them."""
    folder = Path(folder)
    if (folder / MANIFEST).is_file():
        return folder
    near = [f for f in find_builds(folder) if f != folder]
    if near:
        raise BuildNotFound(f"{folder} is not a DRAKE build (no {MANIFEST}); the build near it "
                            f"is {_names(near)}: run `{command} {near[0]}`")
    raise BuildNotFound(f"{folder} is not a DRAKE build (no {MANIFEST}), and none is one level "
                        f"up or down from it; `drake build --benchmark NAME --out DIR` writes "
                        f"one to DIR/NAME")


def eval_build(data: Path, benchmark: str | None) -> Path:
    """The build `drake eval --data DATA [--benchmark NAME]` runs on: ``DATA/NAME``, or ``DATA``
    without ``--benchmark``. If it holds no manifest.json, :class:`BuildNotFound` names the
    ``--data`` that works (a build of ``NAME`` near ``DATA``), else the build command, never
    inside an existing build."""
    data = Path(data)
    root = data / benchmark if benchmark else data
    if (root / MANIFEST).is_file():
        return root
    near: list[Path] = []
    for start in (root, data):
        near += [f for f in find_builds(start, benchmark) if f not in near and f != root]
    if near:
        raise BuildNotFound(f"{root} holds no built benchmark (no {MANIFEST}); the build of "
                            f"{benchmark or 'a benchmark'} near it is {_names(near)}: pass "
                            f"`--data {near[0]}` (without --benchmark)")
    out = data
    if (out / MANIFEST).is_file() or (out.parent / MANIFEST).is_file():
        out = data.resolve()  # never build into an existing build: the first folder above it
        while ((out / MANIFEST).is_file() or (out.parent / MANIFEST).is_file()) \
                and out.parent != out:
            out = out.parent
    name = benchmark or "drake-synth"
    raise BuildNotFound(f"{root} holds no built benchmark (no {MANIFEST}), and no build of "
                        f"{benchmark or 'any benchmark'} is one level up or down; build it with "
                        f"`drake build --benchmark {name} --out {out}`, then pass "
                        f"`--data {out / name}`")


def _split_counts(manifest: Mapping[str, Any]) -> str:
    splits: dict[str, int] = {}
    for task_splits in manifest["tasks"].values():
        for split, entry in task_splits.items():
            splits[split] = splits.get(split, 0) + int(entry["rows"])
    order = ["train", "test", *sorted(set(splits) - {"train", "test"})]
    return ", ".join(f"{splits[split]} {split}" for split in order if split in splits)


def sample_summary(manifest: Mapping[str, Any]) -> str:
    """``16000 samples (13520 train, 2480 test)``: the task shards' rows, by split."""
    return f"{manifest['total_rows']} samples ({_split_counts(manifest)})"


def verified_summary(report: Any, manifest: Mapping[str, Any]) -> str:
    """What an ok :class:`drake.verify.VerifyReport` checked, samples and partition rows apart:
    ``111 files match DIR/manifest.json: 16000 samples (13520 train, 2480 test) in
    109 task shards, and 16000 rows in 2 scenario partition files``."""
    shards = sum(len(s["shards"]) for t in manifest["tasks"].values() for s in t.values())
    partitions = manifest.get("partitions", {})
    part_rows = sum(int(p["rows"]) for p in partitions.values())
    parts = (f", and {part_rows} rows in {len(partitions)} scenario partition file"
             f"{'s' if len(partitions) != 1 else ''}" if partitions else "")
    return (f"{report.files_checked} files match {Path(report.root) / MANIFEST}: "
            f"{sample_summary(manifest)} in {shards} task shards{parts}")
