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
from drake.adapters.confine import UnsafeSource, check_name
from drake.build import CARD, MANIFEST, REJECTED, sha256_file
from drake.errors import DrakeError, VerifyError
from drake.specs import canonical_sha256

LEGACY_BUILDERS = {"1"}  # manifests from before the digest: their metadata is checked, not sealed


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


_SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_COUNT = {"type": "integer", "minimum": 0}
_FILE = {"type": "object", "required": ["file", "sha256"],
         "properties": {"file": {"type": "string", "minLength": 1}, "sha256": _SHA,
                        "rows": _COUNT}}
#: The shape every reader of a manifest relies on; a manifest outside it is one clear error.
MANIFEST_SCHEMA = {
    "type": "object",
    "required": ["benchmark", "version", "spec", "spec_sha256", "builder_version", "seed",
                 "tasks", "total_rows"],
    "properties": {
        "benchmark": {"type": "string", "minLength": 1},
        "version": {"type": "string"},
        "spec": {"type": "object", "required": ["name", "tasks", "clients"],
                 "properties": {"tasks": {"type": "array", "items": {
                     "type": "object", "required": ["id"]}},
                     "clients": {"type": "array"}}},
        "spec_sha256": _SHA,
        "builder_version": {"type": "string"},
        "seed": _COUNT,
        "image_size": _COUNT,
        "total_rows": _COUNT,
        "tasks": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {
                "type": "object", "required": ["rows", "shards"],
                "properties": {"rows": _COUNT, "images": _COUNT,
                               "shards": {"type": "array",
                                          "items": {**_FILE, "required": ["file", "sha256",
                                                                          "rows"]}}}}}},
        "partitions": {"type": "object", "additionalProperties": _FILE},
        "rejected": {"type": ["object", "null"], "required": ["file", "rows", "sha256"],
                     "properties": {"file": {"type": "string"}, "rows": _COUNT,
                                    "sha256": _SHA}},
        "card": _FILE,
        "digest": _SHA,
    },
}


def load_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the build in ``root``, checked against :data:`MANIFEST_SCHEMA`."""
    import jsonschema

    path = Path(root) / MANIFEST
    if not path.is_file():
        raise VerifyError(f"{path} not found: {root} is not a DRAKE build (run `drake build`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise VerifyError(f"{path} is not valid JSON{where}; rebuild the folder or download it "
                          f"again") from None
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(MANIFEST_SCHEMA).iter_errors(manifest))
    if error is not None:
        field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise VerifyError(f"{path}: field {field}: {error.message[:200]}; the manifest is "
                          f"damaged: rebuild the folder or download it again")
    return manifest


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
    named = {MANIFEST}
    for entry in manifest_files(manifest):
        rel = entry["file"]
        try:
            check_name(rel, str(root))
        except UnsafeSource as exc:
            report.problems.append(f"{root / MANIFEST}: {exc}; rebuild the folder")
            continue
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
    report.problems += check_metadata(root, manifest, named)
    for path in sorted(p for p in root.rglob("*") if not p.is_dir() or p.is_symlink()):
        if path.relative_to(root).as_posix() not in named:
            # `datasets.load_dataset(<folder>)` would read a stray data file; push would publish it
            report.problems.append(f"{path}: not in the manifest; remove it or rebuild")
    for task, splits in manifest["tasks"].items():
        for split, info in splits.items():
            total = sum(s["rows"] for s in info["shards"])
            if total != info["rows"]:
                report.problems.append(f"manifest: task {task} {split} rows {info['rows']} != "
                                       f"sum of its shards {total}")
    report.problems += check_accounting(root, manifest)
    return report


def check_metadata(root: Path, manifest: dict[str, Any], named: set[str]) -> list[str]:
    """Problems with what the manifest says about itself: its digest (builder 2 on), the spec's
    fingerprint, the total row count, the dataset card, and (drake-synth) that the seed the
    manifest states regenerates its shards. Adds the card and rejection list to ``named``."""
    from drake.build import manifest_digest

    where = root / MANIFEST
    problems = []
    if "digest" in manifest and manifest_digest(manifest) != manifest["digest"]:
        problems.append(f"{where}: its digest does not match its content; the manifest was "
                        f"edited (seed, spec or counts): rebuild the folder")
    elif "digest" not in manifest and manifest["builder_version"] not in LEGACY_BUILDERS:
        problems.append(f"{where}: no digest; builder {manifest['builder_version']} writes one")
    if canonical_sha256(manifest["spec"]) != manifest["spec_sha256"]:  # as its fingerprint
        problems.append(f"{where}: spec_sha256 is not the sha256 of its spec; rebuild the folder")
    declared = {t["id"] for t in manifest["spec"]["tasks"]}
    if set(manifest["tasks"]) - declared:
        problems.append(f"{where}: tasks {sorted(set(manifest['tasks']) - declared)} are not in "
                        f"its spec")
    total = sum(split["rows"] for splits in manifest["tasks"].values()
                for split in splits.values())
    if total != manifest["total_rows"]:
        problems.append(f"{where}: total_rows {manifest['total_rows']} != {total}, the sum of its "
                        f"task splits")
    card = manifest.get("card")
    if card is not None:
        named.add(card["file"])
        path = root / card["file"]
        if card["file"] != CARD:
            problems.append(f"{where}: card {card['file']!r} is not {CARD}")
        elif not path.is_file():
            problems.append(f"{path}: missing (the manifest lists it)")
        elif sha256_file(path) != card["sha256"]:
            problems.append(f"{path}: sha256 differs from the manifest's; the dataset card was "
                            f"changed: rebuild the folder")
    elif (root / CARD).is_file():
        named.add(CARD)  # builder 1 did not hash its card
    if manifest.get("rejected"):
        named.add(manifest["rejected"]["file"])
    if not problems:
        problems += check_seed(root, manifest)
    return problems


def check_seed(root: Path, manifest: dict[str, Any]) -> list[str]:
    """drake-synth: regenerate the smallest shard from the manifest's spec and seed and compare
    its sha256, so a manifest whose seed was changed (digest and all) is caught."""
    from drake.registry import SYNTHETIC

    if manifest["benchmark"] not in SYNTHETIC or "image_size" not in manifest:
        return []
    import tempfile

    from drake.build import ShardPlan, _write_shard, plan_shards
    from drake.registry import get_benchmark
    from drake.scenarios import spec_from_manifest
    from drake.sources import source_for

    try:
        spec = spec_from_manifest(manifest, get_benchmark)
    except DrakeError:  # built by another version of the suite: it cannot regenerate the shard
        return []
    source = source_for(spec, manifest["seed"], manifest["image_size"])
    shards = {s["file"]: s for splits in manifest["tasks"].values() for split in splits.values()
              for s in split["shards"]}
    plans = [p for p in plan_shards(spec, source, _shard_rows(manifest)) if p.relpath in shards]
    if not plans:
        return [f"{root / MANIFEST}: no shard of its spec and seed matches the shards it lists"]
    plan: ShardPlan = min(plans, key=lambda p: (p.stop - p.start, p.relpath))
    with tempfile.TemporaryDirectory(prefix="drake-verify-") as tmp:
        got = _write_shard(spec, source, plan, tmp)["sha256"]
    if got != shards[plan.relpath]["sha256"]:
        return [f"{root / plan.relpath}: seed {manifest['seed']} does not regenerate this shard; "
                f"the manifest's seed or spec was changed: rebuild the folder"]
    return []


def _shard_rows(manifest: dict[str, Any]) -> int:
    """The shard size the build used: the rows of its fullest shard (every shard but a task
    split's last one is full)."""
    return max(s["rows"] for splits in manifest["tasks"].values() for split in splits.values()
               for s in split["shards"]) or 1


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
