"""Rows of a built benchmark, read by id from memory-mapped Arrow copies of its parquet shards.

A run touches a small part of a benchmark (the batches it draws, the test samples it scores),
so holding every row in memory makes a ``large`` build cost what it weighs. Instead, each shard a
run needs is converted once into an Arrow IPC file in the cache (``$DRAKE_CACHE/arrow``, named by
the shard's sha256 from the manifest, so builds and runs share them and a changed shard gets a
new file) and memory-mapped: reading a row touches only its pages. Only the ``id`` and ``task``
columns are read up front, to index the rows. The manifest's sha256 is trusted as the name:
:class:`~drake.runtime.data.FederatedData` verifies every shard against it first (unless told
``check=False``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from drake.errors import DrakeError


def arrow_cache_dir() -> Path:
    """``$DRAKE_CACHE/arrow`` (else next to the model cache: ``~/.cache/drake/arrow``)."""
    from drake.models.zoo import cache_dir

    return cache_dir().parent / "arrow"


def arrow_copy(parquet: Path, sha256: str, cache: Path) -> Path:
    """The Arrow IPC copy of a parquet shard, written (atomically, batch by batch) if missing."""
    target = cache / f"{sha256}.arrow"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    source = pq.ParquetFile(parquet)
    with pa.OSFile(str(tmp), "wb") as sink, ipc.new_file(sink, source.schema_arrow) as writer:
        for batch in source.iter_batches(batch_size=512):
            writer.write_batch(batch)
    os.replace(tmp, target)
    return target


class RowStore:
    """Rows of some shards of a built benchmark, addressed by sample id.

    Parameters
    ----------
    root : Path
        The built benchmark folder.
    shards : list of mapping
        Manifest shard entries (``file``, ``sha256``) to serve.
    cache : Path, optional
        Where the Arrow copies live (default :func:`arrow_cache_dir`).
    """

    def __init__(self, root: Path, shards: Sequence[Mapping[str, Any]],
                 cache: Path | None = None) -> None:
        self.root = Path(root)
        self.cache = Path(cache) if cache is not None else arrow_cache_dir()
        self.shards = list(shards)
        self._tables: dict[int, pa.Table] = {}
        self._where: dict[str, tuple[int, int]] = {}
        self.task_of: dict[str, str] = {}
        #: each shard's ids in row order, by the shard's manifest ``file``
        self.shard_ids: dict[str, list[str]] = {}
        for i, shard in enumerate(self.shards):
            index = pq.read_table(self.root / shard["file"], columns=["id", "task"])
            ids = self.shard_ids[shard["file"]] = index["id"].to_pylist()
            for j, (sid, task) in enumerate(zip(ids, index["task"].to_pylist())):
                if sid in self._where:
                    other = self.shards[self._where[sid][0]]["file"]
                    raise DrakeError(f"sample id {sid!r} appears in {shard['file']} and {other}; "
                                     f"ids must be unique, rebuild the benchmark")
                self._where[sid] = (i, j)
                self.task_of[sid] = task

    def __contains__(self, sid: str) -> bool:
        return sid in self._where

    def __len__(self) -> int:
        return len(self._where)

    def ids(self) -> Iterable[str]:
        """Every id, in shard order."""
        return iter(self._where)

    def _table(self, i: int) -> pa.Table:
        if i not in self._tables:
            shard = self.shards[i]
            path = arrow_copy(self.root / shard["file"], shard["sha256"], self.cache)
            self._tables[i] = ipc.open_file(pa.memory_map(str(path), "r")).read_all()
        return self._tables[i]

    def get(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The rows of ``ids``, in that order (a repeated id gives equal rows)."""
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for pos, sid in enumerate(ids):
            if sid not in self._where:
                raise KeyError(f"no sample {sid!r} in the shards this run reads")
            shard, row = self._where[sid]
            by_shard.setdefault(shard, []).append((pos, row))
        out: list[dict[str, Any]] = [{}] * len(ids)
        for shard, wanted in by_shard.items():
            rows = self._table(shard).take([r for _, r in wanted]).to_pylist()
            for (pos, _), row in zip(wanted, rows):
                out[pos] = row
        return out


class LazyRows(Sequence):
    """A read-only sequence of rows of a :class:`RowStore`, read only when indexed or sliced
    (a method that uses the first 256 of 20 000 public samples reads 256)."""

    def __init__(self, store: RowStore, ids: Sequence[str]) -> None:
        self.store = store
        self.ids = list(ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.store.get(self.ids[index])
        return self.store.get([self.ids[index]])[0]

    def __iter__(self):
        for start in range(0, len(self.ids), 256):
            yield from self.store.get(self.ids[start:start + 256])
