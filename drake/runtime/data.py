"""Federated data for a run: a verified build plus one of its scenarios.

Rows are read by id from memory-mapped Arrow copies of the shards (:mod:`drake.runtime.rows`),
and only for the tasks the run uses: the clients' tasks (public rows and unseen tasks' test rows
on first request), so memory does not grow with the size of the build.

Training samples arrive per client by stream round and enter an episodic memory; batches are
drawn from memory, as the FedMosaic code does (every streamed sample is kept: the memory is
effectively unbounded). Test samples are grouped per task for Self/Others evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from drake.errors import DrakeError
from drake.runtime.rows import LazyRows, RowStore
from drake.verify import load_manifest, verify


class DataError(DrakeError):
    """The data folder or scenario cannot serve a run."""


@dataclass
class ClientStream:
    """One client's training ids with their arrival round (runtime rounds), in stream order."""

    ids: list[str]
    rounds: np.ndarray

    def seen(self, round_: int) -> list[str]:
        """Ids that have arrived by the end of ``round_`` (the episodic memory's content)."""
        return self.ids[: int(np.searchsorted(self.rounds, round_, side="right"))]


#: FediLoRA's replacement of a missing text target
MISSING_TEXT = "None None None"


def _black(image: Any) -> Any:
    """A black RGB picture of ``image``'s size (the zeroed image of a missing modality)."""
    from PIL import Image

    from drake.models.images import to_pil

    return Image.new("RGB", to_pil(image).size)


class FederatedData:
    """Samples, client streams and test sets of one scenario of a built benchmark.

    Parameters
    ----------
    root : Path
        A built benchmark folder (it is verified first, unless ``check=False``).
    scenario : str
        A scenario name present in the folder's manifest (``drake partition`` adds one).
    rounds : int, optional
        Runtime rounds. The scenario's stream rounds are mapped onto them proportionally:
        stream round s arrives at runtime round ``floor(s * rounds / R)``. Default: R.
    eval_per_task : int, optional
        Keep only the first k test samples of each task (stable order), to bound evaluation
        cost; ``None`` keeps all.
    """

    def __init__(self, root: Path, scenario: str, *, rounds: int | None = None,
                 eval_per_task: int | None = None, check: bool = True,
                 include_tasks: Sequence[str] | None = None) -> None:
        self.root = Path(root)
        self.manifest = load_manifest(self.root)
        if check:
            report = verify(self.root)
            if not report.ok:
                raise DataError(f"{self.root} fails `drake verify` ({report.problems[0]}); "
                                f"rebuild it with `drake build`")
        parts = self.manifest.get("partitions", {})
        if scenario not in parts:
            raise DataError(
                f"{self.root} has no scenario {scenario!r} (it has {sorted(parts) or 'none'}); "
                f"add it with `drake partition {self.root} --scenario {scenario}`")
        self.scenario = scenario
        self.scenario_entry = parts[scenario]
        self.stream_rounds = int(self.scenario_entry["scenario"]["rounds"]) or 1
        self.rounds = int(rounds or self.stream_rounds)
        table = pq.read_table(self.root / self.scenario_entry["file"]).to_pandas()
        self.spec = self.manifest["spec"]
        train = table[(table["split"] == "train") & (table["client"] >= 0)]
        train = train.sort_values(["client", "position"], kind="stable")
        self.num_clients = int(self.scenario_entry["clients"])
        self.streams: dict[int, ClientStream] = {}
        for c in range(self.num_clients):
            rows = train[train["client"] == c]
            mapped = (rows["round"].to_numpy(np.int64) * self.rounds) // self.stream_rounds
            self.streams[c] = ClientStream(rows["id"].tolist(), mapped)
        self.missing = dict(zip(train["id"], train["missing"].astype(int)))
        public = set(self.spec.get("public_tasks", []))
        unseen = set(self.spec.get("unseen_tasks", []))
        # manifest order throughout: evaluation batches and the public samples' order follow it
        tasks = self.manifest["tasks"]
        wanted = [t for t in tasks if (t in include_tasks if include_tasks is not None
                                       else t not in public and t not in unseen)]
        self._public_shards = [shard for task in tasks if task in public
                               for split, info in tasks[task].items() if split != "test"
                               for shard in info["shards"]]
        self._public: RowStore | None = None
        #: the benchmark's unseen tasks this build holds test rows of, in manifest order
        self.unseen_tasks = [t for t in tasks if t in unseen and "test" in tasks[t]]
        self._unseen_shards = {t: tasks[t]["test"]["shards"] for t in self.unseen_tasks}
        self._unseen: RowStore | None = None
        #: the unseen tasks' training rows (fast adaptation), per task
        self._unseen_train_shards = {t: tasks[t]["train"]["shards"] for t in self.unseen_tasks
                                     if "train" in tasks[t]}
        self._unseen_train: RowStore | None = None
        self.rows = RowStore(self.root, [shard for task in wanted for info in tasks[task].values()
                                         for shard in info["shards"]])
        self.test_ids: dict[str, list[str]] = {}
        for task in wanted:
            for shard in tasks[task].get("test", {}).get("shards", []):
                self.test_ids.setdefault(task, []).extend(self.rows.shard_ids[shard["file"]])
        # A client's own tasks: those in its stream, in arrival order (for DRAKE's by_task
        # scenarios this is exactly the client's task list).
        self.client_tasks = []
        for c in range(self.num_clients):
            seen: dict[str, None] = {}
            for sid in self.streams[c].ids:
                if sid not in self.rows:
                    raise DataError(f"scenario {scenario!r} streams sample {sid!r} to client "
                                    f"{c}, but no task this run reads holds it; rebuild the "
                                    f"scenario with `drake partition`")
                seen.setdefault(self.rows.task_of[sid], None)
            self.client_tasks.append(list(seen))
        #: the tasks some client holds
        self.held_tasks = {t for tasks in self.client_tasks for t in tasks}
        # Test rows a scenario gives to a client (its local test set; classification and
        # base/novel scenarios assign them), and those it gives to none (client -1: a global
        # test set, base/novel's novel classes), each in the partition's order.
        test = table[table["split"] == "test"].sort_values(["client", "position"], kind="stable")
        test = test[test["id"].isin(self.rows.task_of)]
        self.local_test: dict[int, list[str]] = {
            c: test[test["client"] == c]["id"].tolist() for c in range(self.num_clients)}
        self.unassigned_test: list[str] = test[test["client"] < 0]["id"].tolist()
        #: every test id of each task, whatever ``eval_per_task`` keeps
        self.all_test_ids = {t: list(ids) for t, ids in self.test_ids.items()}
        self.eval_per_task = eval_per_task
        if eval_per_task is not None:
            self.test_ids = {t: ids[:eval_per_task] for t, ids in self.test_ids.items()}
            self.local_test = {c: ids[:eval_per_task] for c, ids in self.local_test.items()}
            self.unassigned_test = self.unassigned_test[:eval_per_task * max(1, len(wanted))]

    def started_tasks(self, client: int, round_: int) -> list[str]:
        """The client's own tasks with at least one sample arrived by the end of ``round_``, in
        stream order: the tasks its Self (and other clients' Others) may score at that point."""
        arrived = {self.rows.task_of[sid] for sid in self.streams[client].seen(round_)}
        return [t for t in self.client_tasks[client] if t in arrived]

    def class_names(self, task: str) -> dict[int, str]:
        """The classes of classification task ``task``: label -> answer text, in label order,
        read from the task's shards (light columns only). A label named two ways is an error."""
        names: dict[int, str] = {}
        for info in self.manifest["tasks"][task].values():
            for shard in info["shards"]:
                cols = pq.read_table(self.root / shard["file"], columns=["label", "answer"])
                for label, answer in zip(cols["label"].to_pylist(), cols["answer"].to_pylist()):
                    if label < 0:
                        continue
                    if names.setdefault(label, answer) != answer:
                        raise DataError(f"task {task}: label {label} is both {names[label]!r} "
                                        f"and {answer!r} in {shard['file']}; rebuild the task")
        return {k: names[k] for k in sorted(names)}

    def sample(self, sid: str) -> Mapping[str, Any]:
        return self.rows.get([sid])[0]

    def samples(self, ids: Sequence[str]) -> list[Mapping[str, Any]]:
        return self.rows.get(ids)

    def lookup(self, ids: Sequence[str]) -> list[Mapping[str, Any]]:
        """Samples by id from the client tasks' rows or the unseen tasks' test rows (what a
        remote client is asked to answer)."""
        if all(sid in self.rows for sid in ids):
            return self.rows.get(ids)
        for task in self.unseen_tasks:
            self.unseen_samples(task)  # indexes the unseen rows
        missing = [sid for sid in ids if sid not in self.rows
                   and (self._unseen is None or sid not in self._unseen)]
        if missing:
            raise DataError(f"{self.root} holds no sample {missing[0]!r} ({len(missing)} "
                            f"missing); the node's build must be the server's (same "
                            f"manifest)")
        here = [sid for sid in ids if sid in self.rows]
        there = [sid for sid in ids if sid not in self.rows]
        found = dict(zip(here, self.rows.get(here)))
        found.update(zip(there, self._unseen.get(there)))
        return [found[sid] for sid in ids]

    def training_samples(self, ids: Sequence[str]) -> list[Mapping[str, Any]]:
        """Training rows as a client sees them in a missing-modality scenario (the partition's
        ``missing`` code per row; test rows are never masked): a missing image is replaced by a
        black picture of the same size, a missing text by FediLoRA's target ``"None None
        None"`` (:class:`partitioners.missing.MissingCode`)."""
        from partitioners.missing import MissingCode

        out = []
        for sample in self.rows.get(ids):
            code = self.missing.get(sample["id"], 0)
            if code in (MissingCode.IMAGE_MISSING, MissingCode.BOTH_MISSING):
                sample = {**sample, "images": [_black(image) for image in sample["images"]]}
            if code in (MissingCode.TEXT_MISSING, MissingCode.BOTH_MISSING):
                sample = {**sample, "answer": MISSING_TEXT}
            out.append(sample)
        return out

    def public_samples(self, limit: int | None = None) -> Sequence[Mapping[str, Any]]:
        """Training samples of the benchmark's public tasks (none for most real benchmarks),
        in stable order; what one-off alignment steps may use. Indexed on first call, and each
        row read only when the sequence is indexed or sliced."""
        if self._public is None:
            self._public = RowStore(self.root, self._public_shards)
        return LazyRows(self._public, list(self._public.ids())[:limit])

    def unseen_samples(self, task: str) -> Sequence[Mapping[str, Any]]:
        """Test samples of unseen task ``task`` (the first ``eval_per_task``, stable order),
        indexed on the first call; unseen rows are read only by a run that scores them."""
        if task not in self._unseen_shards:
            raise DataError(f"{self.root} holds no test rows of unseen task {task!r} (it has "
                            f"{self.unseen_tasks or 'none'})")
        if self._unseen is None:
            self._unseen = RowStore(self.root, [shard for shards in self._unseen_shards.values()
                                                for shard in shards])
        ids = [sid for shard in self._unseen_shards[task]
               for sid in self._unseen.shard_ids[shard["file"]]]
        return LazyRows(self._unseen, ids[:self.eval_per_task])

    def unseen_train_samples(self, task: str) -> Sequence[Mapping[str, Any]]:
        """Training samples of unseen task ``task`` (all of them, stable order), for fast
        adaptation; indexed on the first call."""
        if task not in self._unseen_train_shards:
            raise DataError(f"{self.root} holds no training rows of unseen task {task!r} (it "
                            f"has training rows of {sorted(self._unseen_train_shards) or 'none'}"
                            f"); fast adaptation fine-tunes on them: build the benchmark with "
                            f"its unseen tasks' train split")
        if self._unseen_train is None:
            self._unseen_train = RowStore(self.root, [
                shard for shards in self._unseen_train_shards.values() for shard in shards])
        ids = [sid for shard in self._unseen_train_shards[task]
               for sid in self._unseen_train.shard_ids[shard["file"]]]
        return LazyRows(self._unseen_train, ids)

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"
