"""Check a built folder against its manifest: every shard present, unmodified and complete."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from drake.build import MANIFEST, sha256_file
from drake.errors import VerifyError


@dataclass
class VerifyReport:
    """What `drake verify` found; ``problems`` is empty when the folder is intact."""

    root: Path
    files_checked: int = 0
    rows_checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def load_manifest(root: Path) -> dict[str, Any]:
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise VerifyError(f"{path} not found: {root} is not a DRAKE build (run `drake build`)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise VerifyError(f"{path} is not valid JSON (line {exc.lineno}); rebuild the folder") \
            from None


def manifest_files(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every file the manifest vouches for: task shards and partition files."""
    files = [shard for splits in manifest["tasks"].values() for split in splits.values()
             for shard in split["shards"]]
    files += list(manifest.get("partitions", {}).values())
    return files


def verify(root: Path) -> VerifyReport:
    """Re-hash every file the manifest names and re-count its rows.

    Also flags parquet files under ``tasks/`` or ``partitions/`` that the manifest does not name,
    since `datasets.load_dataset(<folder>)` would silently read them.
    """
    root = Path(root)
    manifest = load_manifest(root)
    report = VerifyReport(root)
    named = set()
    for entry in manifest_files(manifest):
        rel = entry["file"]
        named.add(rel)
        path = root / rel
        if not path.is_file():
            report.problems.append(f"{path}: missing (the manifest lists it)")
            continue
        report.files_checked += 1
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            report.problems.append(f"{path}: sha256 {digest[:12]}… differs from the manifest's "
                                   f"{entry['sha256'][:12]}…; the file was changed or corrupted")
            continue
        rows = pq.ParquetFile(path).metadata.num_rows
        report.rows_checked += rows
        if rows != entry["rows"]:
            report.problems.append(f"{path}: {rows} rows, the manifest says {entry['rows']}")
    for sub in ("tasks", "partitions"):
        for path in sorted((root / sub).rglob("*.parquet")) if (root / sub).exists() else []:
            rel = path.relative_to(root).as_posix()
            if rel not in named:
                report.problems.append(f"{path}: not in the manifest; remove it or rebuild")
    for task, splits in manifest["tasks"].items():
        for split, info in splits.items():
            total = sum(s["rows"] for s in info["shards"])
            if total != info["rows"]:
                report.problems.append(f"manifest: task {task} {split} rows {info['rows']} != "
                                       f"sum of its shards {total}")
    return report
