"""The build pipeline: a benchmark spec in, a verified parquet folder with a manifest out.

Guarantees
----------
* **Bounded memory.** Samples are generated and written one shard at a time; at most
  ``num_proc`` shards are in memory.
* **Atomic.** Everything is written under ``.<name>.partial`` beside the target and renamed into
  place at the very end, so a crash never leaves a folder that looks complete.
* **Resumable.** Each finished shard is journalled with its sha256; a re-run skips shards whose
  file still hashes to the journalled value, and discards the journal if the spec, seed or
  builder version changed.
* **Idempotent.** The same spec and seed give byte-identical shards and manifest (no clocks or
  paths are written).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import multiprocessing as mp
import os
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from drake import __version__
from drake.errors import BuildError, SchemaError
from drake.schema import features, to_row, validate_sample
from drake.sources import source_for
from drake.specs import SPLITS, BenchmarkSpec

log = logging.getLogger(__name__)

BUILDER_VERSION = "1"
MANIFEST = "manifest.json"
JOURNAL = ".journal.jsonl"
SHARD_ROWS = 500


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def shard_name(split: str, k: int, total: int) -> str:
    return f"{split}-{k:05d}-of-{total:05d}.parquet"


@dataclass(frozen=True)
class ShardPlan:
    """One shard to write: rows ``start..stop-1`` of a task split."""

    task: str
    split: str
    index: int
    total: int
    start: int
    stop: int

    @property
    def relpath(self) -> str:
        return f"tasks/{self.task}/{shard_name(self.split, self.index, self.total)}"


def plan_shards(spec: BenchmarkSpec, source, shard_rows: int = SHARD_ROWS) -> list[ShardPlan]:
    """Cut every task split into shards of at most ``shard_rows`` rows."""
    plans = []
    for task in spec.tasks:
        for split in SPLITS:
            n = source.num_rows(task, split)
            if n <= 0:
                continue
            total = math.ceil(n / shard_rows)
            for k in range(total):
                plans.append(ShardPlan(task.id, split, k, total, k * shard_rows,
                                       min(n, (k + 1) * shard_rows)))
    return plans


def arrow_schema() -> pa.Schema:
    """The Arrow schema with the `datasets` feature metadata, so load_dataset decodes images."""
    return features().arrow_schema


def _write_shard(spec: BenchmarkSpec, source, plan: ShardPlan, root: str) -> dict[str, Any]:
    task = spec.task(plan.task)
    rows = []
    images = 0
    for sample in source.rows(task, plan.split, plan.start, plan.stop):
        try:
            validate_sample(sample, where=f"task {plan.task} split {plan.split}")
        except SchemaError as exc:
            raise BuildError(str(exc)) from None
        if sample["task"] != plan.task:
            raise BuildError(f"sample {sample['id']!r} says task {sample['task']!r}, "
                             f"expected {plan.task!r}")
        rows.append(to_row(sample))
        images += len(sample["images"])
    if len(rows) != plan.stop - plan.start:
        raise BuildError(f"{plan.relpath}: source gave {len(rows)} rows, planned "
                         f"{plan.stop - plan.start}")
    table = pa.Table.from_pylist(rows, schema=arrow_schema())
    target = Path(root) / plan.relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", row_group_size=100)
    digest = sha256_file(tmp)
    os.replace(tmp, target)
    return {"file": plan.relpath, "rows": len(rows), "images": images, "sha256": digest,
            "ids": [r["id"] for r in rows]}


def _read_ids(path: Path) -> list[str]:
    return pq.read_table(path, columns=["id"]).column("id").to_pylist()


def build_key(spec: BenchmarkSpec, seed: int, image_size: int) -> str:
    blob = json.dumps({"spec": spec.fingerprint(), "seed": seed, "image_size": image_size,
                       "builder": BUILDER_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _load_journal(partial: Path, key: str) -> dict[str, dict[str, Any]]:
    journal = partial / JOURNAL
    if not journal.exists():
        return {}
    done: dict[str, dict[str, Any]] = {}
    for line in journal.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash: its shard is simply rebuilt
        if rec.get("key") != key:
            log.info("discarding partial build %s: spec, seed or builder changed", partial)
            shutil.rmtree(partial)
            return {}
        done[rec["file"]] = rec
    return done


def package_versions() -> dict[str, str]:
    import datasets
    import numpy
    import PIL

    return {"drake": __version__, "datasets": datasets.__version__, "pyarrow": pa.__version__,
            "numpy": numpy.__version__, "pillow": PIL.__version__}


def target_dir(out: Path, name: str) -> Path:
    return Path(out) / name


def build(
    spec: BenchmarkSpec,
    out: Path,
    *,
    seed: int = 0,
    num_proc: int = 1,
    image_size: int = 64,
    shard_rows: int = SHARD_ROWS,
    overwrite: bool = False,
    progress: Callable[[Iterable, int], Iterable] | None = None,
    _stop_after: int | None = None,
) -> Path:
    """Build ``spec`` into ``out/<spec.name>`` and return that folder.

    Parameters
    ----------
    spec : BenchmarkSpec
        What to build (``drake.registry.get_benchmark``).
    out : Path
        Parent folder; the benchmark lands in ``out/<spec.name>``.
    seed : int
        Seeds every random draw; the same seed gives byte-identical shards.
    num_proc : int
        Worker processes writing shards in parallel.
    image_size : int
        Side of generated images (synthetic sources).
    overwrite : bool
        Replace an existing complete build; otherwise an existing one is an error.
    progress : callable, optional
        Wraps the shard iterator (e.g. a tqdm bar): ``progress(iterable, total)``.
    _stop_after : int, optional
        Testing hook: stop (as a crash would) after this many newly written shards.
    """
    final = target_dir(out, spec.name)
    if (final / MANIFEST).exists() and not overwrite:
        raise BuildError(f"{final} already holds a build; pass --overwrite to replace it, or "
                         f"`drake verify {final}` to check it")
    if final.exists() and not (final / MANIFEST).exists() and any(final.iterdir()):
        raise BuildError(f"{final} exists and is not a DRAKE build (no {MANIFEST}); remove it or "
                         f"choose another --out")
    source = source_for(spec, seed, image_size)
    partial = final.parent / f".{final.name}.partial"
    key = build_key(spec, seed, image_size)
    done = _load_journal(partial, key)
    partial.mkdir(parents=True, exist_ok=True)
    plans = plan_shards(spec, source, shard_rows)
    todo, results = [], {}
    for plan in plans:
        rec = done.get(plan.relpath)
        path = partial / plan.relpath
        if rec and path.exists() and sha256_file(path) == rec["sha256"]:
            results[plan.relpath] = {**rec, "ids": _read_ids(path)}
        else:
            todo.append(plan)
    if done:
        log.info("resuming %s: %d of %d shards already done", spec.name, len(results), len(plans))
    with open(partial / JOURNAL, "a") as journal:
        written = 0
        for res in _run(spec, source, todo, partial, num_proc, progress):
            results[res["file"]] = res
            rec = {k: v for k, v in res.items() if k != "ids"}
            journal.write(json.dumps({"key": key, **rec}) + "\n")
            journal.flush()
            written += 1
            if _stop_after is not None and written >= _stop_after:
                raise BuildError(f"build stopped after {written} shards (test hook)")
    _check_unique_ids(plans, results)
    manifest = make_manifest(spec, seed, image_size, plans, results)
    from drake.scenarios import write_scenario

    for scenario in spec.scenarios:
        manifest["partitions"][scenario.name] = write_scenario(spec, scenario, partial,
                                                               manifest, seed)
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    from drake.card import write_card

    write_card(spec, manifest, partial)
    (partial / JOURNAL).unlink()
    _swap_into_place(partial, final)
    return final


def _run(spec, source, todo, partial, num_proc, progress):
    items: Iterable = todo
    if num_proc <= 1:
        gen = (_write_shard(spec, source, p, str(partial)) for p in items)
    else:
        # spawn, not fork: forking a process that already runs Arrow's thread pool can deadlock
        pool = ProcessPoolExecutor(max_workers=num_proc, mp_context=mp.get_context("spawn"))
        futures = [pool.submit(_write_shard, spec, source, p, str(partial)) for p in items]
        gen = _results_then_shutdown(pool, futures)
    yield from (progress(gen, len(todo)) if progress else gen)


def _results_then_shutdown(pool, futures):
    try:
        for fut in futures:
            yield fut.result()
    finally:
        pool.shutdown(cancel_futures=True)


def _check_unique_ids(plans: list[ShardPlan], results: dict[str, dict[str, Any]]) -> None:
    seen: dict[str, str] = {}
    for plan in plans:
        for sid in results[plan.relpath]["ids"]:
            if sid in seen:
                raise BuildError(f"sample id {sid!r} appears in both {seen[sid]} and "
                                 f"{plan.relpath}; ids must be unique within a benchmark")
            seen[sid] = plan.relpath


def make_manifest(spec, seed, image_size, plans, results) -> dict[str, Any]:
    tasks: dict[str, dict[str, Any]] = {}
    for plan in plans:
        res = results[plan.relpath]
        entry = tasks.setdefault(plan.task, {}).setdefault(
            plan.split, {"rows": 0, "images": 0, "shards": []})
        entry["rows"] += res["rows"]
        entry["images"] += res["images"]
        entry["shards"].append({"file": plan.relpath, "rows": res["rows"],
                                "sha256": res["sha256"]})
    return {
        "format": "drake-manifest/1",
        "benchmark": spec.name,
        "version": spec.version,
        "spec": spec.to_dict(),
        "spec_sha256": spec.fingerprint(),
        "builder_version": BUILDER_VERSION,
        "packages": package_versions(),
        "seed": seed,
        "image_size": image_size,
        "tasks": tasks,
        "partitions": {},
        "total_rows": sum(s["rows"] for t in tasks.values() for s in t.values()),
    }


def _swap_into_place(partial: Path, final: Path) -> None:
    """Rename the finished partial folder onto ``final``; an old build is removed only after."""
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.old"
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(partial, final)
    if old is not None:
        shutil.rmtree(old)
