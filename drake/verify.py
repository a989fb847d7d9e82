"""Check a built folder against its manifest: every shard present, unmodified and complete.

For real-data builds it also checks the accounting: each task split reconciles
(``source_rows = kept + dropped + rejected``), its kept count is the rows stored, and
``rejected.jsonl`` is unmodified and lists exactly the rejections the manifest counts.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from drake.adapters.base import REJECT_REASONS
from drake.build import MANIFEST, REJECTED, sha256_file
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
    report.problems += check_accounting(root, manifest)
    return report


def check_accounting(root: Path, manifest: dict[str, Any]) -> list[str]:
    """Problems with the source counts and ``rejected.jsonl`` of a real-data build."""
    problems: list[str] = []
    path = Path(root) / REJECTED
    entry = manifest.get("rejected")
    if entry is None:
        if path.exists():
            problems.append(f"{path}: present but the manifest does not account for it; "
                            f"rebuild the folder")
        return problems
    for task, info in manifest.get("sources", {}).items():
        for split, c in info.get("splits", {}).items():
            total = c["kept"] + sum(c["dropped"].values()) + sum(c["rejected"].values())
            if total != c["source_rows"]:
                problems.append(f"manifest: task {task} {split}: source rows {c['source_rows']} "
                                f"!= kept {c['kept']} + dropped {c['dropped']} + rejected "
                                f"{c['rejected']}")
            rows = manifest["tasks"].get(task, {}).get(split, {}).get("rows", 0)
            if rows != c["kept"]:
                problems.append(f"manifest: task {task} {split}: {rows} rows stored but "
                                f"{c['kept']} kept from the source")
    if not path.is_file():
        return problems + [f"{path}: missing (the manifest lists {entry['rows']} rejections)"]
    digest = sha256_file(path)
    if digest != entry["sha256"]:
        problems.append(f"{path}: sha256 {digest[:12]}… differs from the manifest's "
                        f"{entry['sha256'][:12]}…; the file was changed")
    found: Counter = Counter()
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            problems.append(f"{path}:{n}: not a JSON object")
            continue
        missing = [k for k in ("task", "split", "source_id", "reason") if k not in rec]
        if missing or rec.get("reason") not in REJECT_REASONS:
            problems.append(f"{path}:{n}: missing {missing} or unknown reason "
                            f"{rec.get('reason')!r}")
            continue
        found[(rec["task"], rec["split"], rec["reason"])] += 1
    if len(lines) != entry["rows"]:
        problems.append(f"{path}: {len(lines)} rejections, the manifest says {entry['rows']}")
    counted = Counter({(task, split, reason): n
                       for task, info in manifest.get("sources", {}).items()
                       for split, c in info.get("splits", {}).items()
                       for reason, n in c["rejected"].items()})
    for key in sorted(set(found) | set(counted)):
        if found[key] != counted[key]:
            task, split, reason = key
            problems.append(f"{path}: {found[key]} '{reason}' rejections for {task} {split}, "
                            f"the manifest counts {counted[key]}")
    return problems
