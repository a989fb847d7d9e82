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
* **Accounted.** For real sources every task split reconciles, and the manifest says so:
  ``source_rows = kept + dropped-by-rule + rejected-with-reason`` (``manifest["sources"]``); each
  rejected source row is one line of ``rejected.jsonl`` (hashed in ``manifest["rejected"]``).
  ``strict=True`` makes any rejection fatal before a shard is written.
* **Never short in silence.** A real task split that keeps no row, or fewer than
  :data:`SHORT_BELOW` of the count its spec expects (``TaskSpec.expected``), stops the build
  before a shard is written, naming the task and why its rows went; ``allow_short=True`` builds
  it anyway and records the shortfall in ``manifest["shortfalls"]``.
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from drake import __version__
from drake.errors import BuildError, SchemaError, UnknownNameError
from drake.locks import exclusive
from drake.schema import features, to_row, validate_sample
from drake.sources import AdapterSource, source_for
from drake.specs import SPLITS, BenchmarkSpec, ClientSpec, canonical_sha256
from drake.workers import exit_with_parent

log = logging.getLogger(__name__)

BUILDER_VERSION = "2"  # 2: the manifest holds its card's sha256 and a digest of itself
MANIFEST = "manifest.json"
CARD = "README.md"
JOURNAL = ".journal.jsonl"
REJECTED = "rejected.jsonl"
SHARD_ROWS = 500
STRICT_SHOWN = 10  # rejections a --strict error spells out
SHORT_BELOW = 0.9  # a split keeping less than this share of its expected rows is short


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


def build_key(spec: BenchmarkSpec, seed: int, image_size: int, source: str = "") -> str:
    """Identity of a build for resuming: spec, seed, image size, builder (and real source)."""
    fields = {"spec": spec.fingerprint(), "seed": seed, "image_size": image_size,
              "builder": BUILDER_VERSION}
    if source:
        fields["source"] = source
    blob = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def restrict_spec(spec: BenchmarkSpec, task_ids: Iterable[str]) -> BenchmarkSpec:
    """``spec`` cut down to some of its tasks (``drake build --tasks``).

    Clients keep their selected tasks in order; clients left with none are dropped, with their
    entry in every model mix. Scenarios are kept while a client remains. The benchmark keeps
    its name, and its description says which tasks it holds.
    """
    wanted = list(dict.fromkeys(task_ids))
    known = [t.id for t in spec.tasks]
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise UnknownNameError(f"benchmark {spec.name} has no task(s) {unknown}; its tasks: "
                               f"{', '.join(known)}")
    keep = set(wanted)
    clients, kept = [], []
    for i, client in enumerate(spec.clients):
        tasks = tuple(t for t in client.tasks if t in keep)
        if tasks:
            clients.append(ClientSpec(client.id, tasks))
            kept.append(i)
    mixes = {k: tuple(v[i] for i in kept) for k, v in spec.model_mixes.items()} if clients \
        else {}
    return replace(
        spec,
        description=f"{spec.description} [restricted to {len(keep)} of {len(known)} tasks: "
        f"{', '.join(t for t in known if t in keep)}]",
        tasks=tuple(t for t in spec.tasks if t.id in keep),
        clients=tuple(clients),
        unseen_tasks=tuple(t for t in spec.unseen_tasks if t in keep),
        public_tasks=tuple(t for t in spec.public_tasks if t in keep),
        model_mixes=mixes,
        default_mix=spec.default_mix if mixes else "",
        scenarios=spec.scenarios if clients else (),
    )


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
    source_dir: Path | str | None = None,
    revision: str | None = None,
    cache_dir: Path | str | None = None,
    strict: bool = False,
    allow_short: bool = False,
    subsets: str = "released",
    convert_progress: Callable[[Iterable, int], Iterable] | None = None,
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
    source_dir : path, optional
        Real benchmarks: read the source files from this folder instead of the Hub.
    revision : str, optional
        Real benchmarks: Hub branch, tag or commit of the source repo.
    cache_dir : path, optional
        Real benchmarks: Hugging Face cache (default ``$HF_HOME/hub``).
    strict : bool
        Real benchmarks: fail on the first build that rejects any source row.
    subsets : str
        Real benchmarks: ``released`` (default) opens an ambiguous subset's file as the released
        scenarios do; ``by-content`` matches it by image count (see :mod:`drake.adapters.llava_tar`).
    allow_short : bool
        Real benchmarks: build a task split that keeps no row or far fewer than expected (see
        :func:`shortfalls`) instead of failing; the manifest records the shortfall.
    convert_progress : callable, optional
        Wraps the iterator over task splits being converted (real benchmarks).
    _stop_after : int, optional
        Testing hook: stop (as a crash would) after this many newly written shards.
    """
    final = target_dir(out, spec.name)
    _check_target(final, overwrite)
    from drake.adapters import AdapterOptions

    options = AdapterOptions(source_dir=Path(source_dir) if source_dir else None,
                             revision=revision, cache_dir=Path(cache_dir) if cache_dir else None,
                             seed=seed, strict=strict, subsets=subsets)
    source = source_for(spec, seed, image_size, options=options)
    real = isinstance(source, AdapterSource)
    if real:
        source.fetch()  # downloads (or fails) before anything is written
    key = build_key(spec, seed, image_size, source.fingerprint() if real else "")
    with exclusive(final, "build", advice="wait for that build to finish, or build into another "
                   "--out"):
        recover(final)
        _check_target(final, overwrite)  # a build that held the lock may have just finished
        partial = final.parent / f".{final.name}.partial"
        done = _load_journal(partial, key)
        fresh = not partial.exists()
        partial.mkdir(parents=True, exist_ok=True)
        try:
            return _fill(spec, source, partial, final, done, key, seed=seed, num_proc=num_proc,
                         image_size=image_size, shard_rows=shard_rows, progress=progress,
                         strict=strict, allow_short=allow_short,
                         convert_progress=convert_progress, _stop_after=_stop_after)
        except BaseException:
            if not any(partial.iterdir()) or (fresh and not _journalled(partial)
                                              and not (partial / REJECTED).exists()):
                shutil.rmtree(partial, ignore_errors=True)  # nothing to resume: no leftovers
            raise


def _check_target(final: Path, overwrite: bool) -> None:
    if (final / MANIFEST).exists() and not overwrite:
        raise BuildError(f"{final} already holds a build; pass --overwrite to replace it, or "
                         f"`drake verify {final}` to check it")
    if final.exists() and not (final / MANIFEST).exists() and any(final.iterdir()):
        raise BuildError(f"{final} exists and is not a DRAKE build (no {MANIFEST}); remove it or "
                         f"choose another --out")


def _journalled(partial: Path) -> bool:
    journal = partial / JOURNAL
    return journal.exists() and journal.stat().st_size > 0


def _fill(spec, source, partial, final, done, key, *, seed, num_proc, image_size, shard_rows,
          progress, strict, allow_short, convert_progress, _stop_after) -> Path:
    """Write every shard not yet done into ``partial``, then the manifest and card, and swap the
    finished folder onto ``final``."""
    real = isinstance(source, AdapterSource)
    short: list[dict[str, Any]] = []
    if real:
        rejections = source.prepare(partial, convert_progress)
        _write_rejections(partial, rejections)
        if strict and rejections:
            raise BuildError(_strict_message(rejections, partial / REJECTED))
        short = shortfalls(spec, source.counts)
        if short and not allow_short:
            raise BuildError(_short_message(short, partial / REJECTED))
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
    if real:
        add_source_counts(manifest, source, partial)
        if short:
            manifest["shortfalls"] = short
    from drake.scenarios import write_scenario

    for scenario in spec.scenarios:
        manifest["partitions"][scenario.name] = write_scenario(spec, scenario, partial,
                                                               manifest, seed)
    from drake.card import folder_card

    card = folder_card(spec, manifest).encode()
    manifest["card"] = {"file": CARD, "sha256": hashlib.sha256(card).hexdigest()}
    write_manifest(partial, manifest)
    (partial / CARD).write_bytes(card)
    (partial / JOURNAL).unlink()
    shutil.rmtree(partial / ".sources", ignore_errors=True)
    swap_into_place(partial, final)
    return final


def manifest_digest(manifest: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of every manifest field but ``digest`` itself: any edit to the
    metadata (seed, spec, counts) shows in ``drake verify``, as an edited shard does."""
    return canonical_sha256({k: v for k, v in manifest.items() if k != "digest"})


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Seal ``manifest`` with its digest and replace ``folder/manifest.json`` atomically."""
    manifest["digest"] = manifest_digest(manifest)
    tmp = Path(folder) / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, Path(folder) / MANIFEST)


def _write_rejections(folder: Path, rejections: list[dict[str, str]]) -> None:
    lines = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rejections)
    (folder / REJECTED).write_text(lines, encoding="utf-8")


def _strict_message(rejections: list[dict[str, str]], listing: Path) -> str:
    shown = "; ".join(f"{r['where'] or r['task']}: sample {r['source_id']!r} ({r['task']} "
                      f"{r['split']}): {r['reason']}: {r['detail']}"
                      for r in rejections[:STRICT_SHOWN])
    more = len(rejections) - STRICT_SHOWN
    tail = f"; and {more} more" if more > 0 else ""
    return (f"--strict: {len(rejections)} source row(s) rejected: {shown}{tail}. All are listed "
            f"in {listing}; build without --strict to skip them, or fix the source")


def shortfalls(spec: BenchmarkSpec, counts: dict[str, dict[str, dict[str, Any]]]
               ) -> list[dict[str, Any]]:
    """The short task splits of a conversion: those that kept no row, or fewer than
    :data:`SHORT_BELOW` of ``TaskSpec.expected``; each with its counts and where its rows went."""
    out = []
    for task in spec.tasks:
        for split, c in sorted(counts.get(task.id, {}).items()):
            expected = task.expected.get(split)
            if c["kept"] > 0 and (expected is None or c["kept"] >= SHORT_BELOW * expected):
                continue
            out.append({"task": task.id, "split": split, "kept": c["kept"],
                        "expected": expected, "source_rows": c["source_rows"],
                        "rejected": dict(sorted(c["rejected"].items())),
                        "dropped": dict(sorted(c["dropped"].items()))})
    return out


def _short_message(short: list[dict[str, Any]], listing: Path) -> str:
    def one(s: dict[str, Any]) -> str:
        want = "" if s["expected"] is None else f" of {s['expected']} expected"
        why = ", ".join(f"{n} {r}" for r, n in {**s["rejected"], **s["dropped"]}.items())
        return (f"task {s['task']} {s['split']} keeps {s['kept']}{want} from "
                f"{s['source_rows']} source rows ({why or 'the source file holds none'})")

    shown = "; ".join(one(s) for s in short[:STRICT_SHOWN])
    tail = f"; and {len(short) - STRICT_SHOWN} more" if len(short) > STRICT_SHOWN else ""
    return (f"{len(short)} task split(s) short: {shown}{tail}. The rejected rows and why are in "
            f"{listing}; fix the source, or pass --allow-short to build anyway with the "
            f"shortfall recorded in the manifest")


def add_source_counts(manifest: dict[str, Any], source: AdapterSource, folder: Path) -> None:
    """Record per task split where the rows went, and hash ``rejected.jsonl``.

    Raises BuildError when a split does not reconcile or its kept count differs from the rows
    written (either is a bug, never a data problem).
    """
    sources: dict[str, Any] = {}
    for task, splits in source.counts.items():
        for split, c in splits.items():
            total = c["kept"] + sum(c["dropped"].values()) + sum(c["rejected"].values())
            written = manifest["tasks"].get(task, {}).get(split, {}).get("rows", 0)
            if total != c["source_rows"] or written != c["kept"]:
                raise BuildError(f"task {task} split {split}: source rows {c['source_rows']}, "
                                 f"kept {c['kept']} (written {written}), dropped {c['dropped']}, "
                                 f"rejected {c['rejected']}: the counts do not reconcile")
        sources[task] = {"splits": splits}
        if task in source.origins:
            sources[task]["origin"] = source.origins[task]
    path = Path(folder) / REJECTED
    rows = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    manifest["sources"] = sources
    manifest["rejected"] = {"file": REJECTED, "rows": rows, "sha256": sha256_file(path)}


def _run(spec, source, todo, partial, num_proc, progress):
    items: Iterable = todo
    if num_proc <= 1:
        gen = (_write_shard(spec, source, p, str(partial)) for p in items)
    else:
        # spawn, not fork: forking a process that already runs Arrow's thread pool can deadlock
        pool = ProcessPoolExecutor(max_workers=num_proc, mp_context=mp.get_context("spawn"),
                                   initializer=exit_with_parent)
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


def recover(final: Path) -> None:
    """Finish or undo what a build killed inside :func:`swap_into_place` left beside ``final``.

    Killed after the old build moved aside: the finished partial folder is moved in (it has its
    manifest and no journal); with no finished partial the old build is moved back. Killed while
    the old build was being removed: the rest of it is removed.
    """
    old, partial = _old(final), final.parent / f".{final.name}.partial"
    if not old.exists():
        return
    if not final.exists():
        finished = (partial / MANIFEST).exists() and not (partial / JOURNAL).exists()
        log.warning("%s: finishing the swap a killed build left half done", final)
        os.replace(partial if finished else old, final)
    shutil.rmtree(old, ignore_errors=True)


def _old(final: Path) -> Path:
    return final.parent / f".{final.name}.old"


def swap_into_place(partial: Path, final: Path) -> None:
    """Rename the finished partial folder onto ``final``; an old build is removed only after."""
    old = None
    if final.exists():
        old = _old(final)
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(partial, final)
    if old is not None:
        shutil.rmtree(old)
