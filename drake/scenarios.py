"""Scenarios: cheap views over a built benchmark, saved as ``partitions/<scenario>.parquet``.

A scenario is a partition rule (a function of ``partitioners``) plus a stream order. Tasks are
stored once; each scenario is a small table with one row per assigned sample:

``id`` (str), ``client`` (int, -1 for a shared/global evaluation row), ``split`` (train/test),
``round`` (arrival round of a training sample, -1 for test rows), ``position`` (order of arrival
within the client's stream, -1 for test rows) and ``missing`` (0 intact, 1 image missing,
2 text missing, 3 both; see :class:`partitioners.MissingCode`; test rows are never masked).

Rules for test rows
-------------------
* ``by_task`` (DRAKE, HFLB): a test sample belongs to the client that owns its task (Self);
  other clients evaluate on it for Others.
* label rules (``iid``, ``dirichlet``, ``pathological``, ``shard``, ``by_domain``): the test
  split is partitioned by the same rule, with ``seed + 1`` and a minimum of one test sample per
  client (``min_size`` is for training sets). With ``paired_test`` (``dirichlet`` and
  ``by_domain``, pFedMMA's rule) each class's test samples are cut with the same client
  proportions as its training samples, every client holding ``test_min_size`` of them
  (:func:`partitioners.dirichlet_train_test`, :func:`partitioners.by_domain_train_test`).
* ``dirichlet_hierarchical`` (pFedMMA's CIFAR-100 script): train and test are pooled, split
  together, and each client's share goes back to its split; the coarse labels come from the
  samples' ``meta.coarse_label``.
* ``pathological`` with ``base_only`` (base-to-novel): training uses base classes only; a test
  sample of a base class belongs to that class's owner, a novel-class test sample to no client
  (``client = -1``: the novel set every client is scored on). With ``shots`` k, each client
  trains on k samples of each class it owns, drawn as Dassl's few-shot sampler (which pFedMMA
  uses) draws them: ``random.sample`` of k of the class's training samples (all of them when
  the class has fewer), classes in the client's block order, from a Python ``random.Random``
  seeded with ``shot_seed`` (default the build seed). The others stay unassigned.
* ``tap_groups`` (TAP): three groups of ten clients with TAP's fixed task sets
  (:data:`partitioners.TAP_LAYOUTS`, ``layout`` flava or vilt; :func:`partitioners.task_groups`);
  ``tasks`` maps TAP's task ids to a twin benchmark's (tap-synth).
  TAP scores every client of a pattern on the pattern's whole test set; here a task's test rows
  are dealt evenly to the clients that hold it (``seed + 1``), so the mean over those clients
  is the score on the whole set.
* ``quantity_skew`` with ``global_test``: the last subset of the train split and the whole test
  split form the global test set (``client = -1``). With ``local_test_fraction`` f each client's
  subset is split again, f of it a local test set (FediLoRA's 8:2 with f = 0.2), drawn from its
  training rows. With ``pool_test`` the stored train and test rows are pooled first (train
  rows, then test rows, each in manifest order), so the subsets cut the whole dataset: FediLoRA
  §4.1's 11 random-size subsets, the last the global test set, whatever split a row is stored
  in.

Samples a rule leaves out (unseen and public tasks, under every rule; novel-class training
samples; classes no client drew) are counted per split in the manifest as ``unassigned``, so
counts reconcile.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import partitioners as P
from drake.build import MANIFEST, restrict_spec, sha256_file, write_manifest
from drake.errors import BuildError, UnknownNameError
from drake.specs import BenchmarkSpec, ScenarioSpec

COLUMNS = ("id", "client", "split", "round", "position", "missing")
RULES = ("by_task", "iid", "dirichlet", "dirichlet_hierarchical", "pathological", "shard",
         "by_domain", "quantity_skew", "tap_groups")

PARTITION_SCHEMA = pa.schema([
    ("id", pa.string()), ("client", pa.int64()), ("split", pa.string()),
    ("round", pa.int64()), ("position", pa.int64()), ("missing", pa.int8()),
])


def read_columns(root: Path, manifest: dict[str, Any], split: str,
                 columns: tuple[str, ...] = ("id", "task", "label", "domain")) -> pd.DataFrame:
    """Metadata columns (no images) of one split, tasks in manifest order."""
    frames = []
    for splits in manifest["tasks"].values():
        for shard in splits.get(split, {}).get("shards", []):
            frames.append(pq.read_table(root / shard["file"], columns=list(columns)).to_pandas())
    if not frames:
        return pd.DataFrame({c: [] for c in columns})
    return pd.concat(frames, ignore_index=True)


def _seed(scenario: ScenarioSpec, seed: int) -> int:
    return int(scenario.params.get("seed", seed))


def _label_parts(rule: str, params: Mapping[str, Any], frame: pd.DataFrame, seed: int):
    labels = frame["label"].to_numpy(np.int64)
    n_clients = params.get("num_clients")
    if rule == "iid":
        return P.iid(len(frame), n_clients, seed=seed)
    if rule == "dirichlet":
        return P.dirichlet(labels, n_clients, params["alpha"], seed=seed,
                           min_size=params.get("min_size", 10))
    if rule == "dirichlet_hierarchical":
        return P.dirichlet_hierarchical(labels, frame["coarse"].to_numpy(np.int64), n_clients,
                                        params["alpha_coarse"], params["alpha_fine"], seed=seed)
    if rule == "pathological":
        return P.pathological(labels, n_clients, params.get("classes_per_client"),
                              mode=params.get("mode", "random"), seed=seed)
    if rule == "shard":
        return P.shard(labels, n_clients, params["shards_per_client"], seed=seed)
    if rule == "by_domain":
        return P.by_domain(frame["domain"].to_numpy(), labels, params["clients_per_domain"],
                           params["alpha"], seed=seed, min_size=params.get("min_size", 2))
    raise UnknownNameError(f"unknown partition rule {rule!r}; known: {', '.join(RULES)}")


def _paired_parts(rule: str, params: Mapping[str, Any], train: pd.DataFrame,
                  test: pd.DataFrame, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Train and test cut by the same per-class proportions (``paired_test``)."""
    common = {"seed": seed, "max_retries": int(params.get("max_retries", 100))}
    labels = (train["label"].to_numpy(np.int64), test["label"].to_numpy(np.int64))
    if rule == "dirichlet":
        return P.dirichlet_train_test(*labels, params["num_clients"], params["alpha"],
                                      min_size=params.get("min_size", 10),
                                      test_min_size=params.get("test_min_size", 1), **common)
    return P.by_domain_train_test(train["domain"].to_numpy(), labels[0],
                                  test["domain"].to_numpy(), labels[1],
                                  params["clients_per_domain"], params["alpha"],
                                  min_size=params.get("min_size", 2),
                                  test_min_size=params.get("test_min_size", 1), **common)


def _coarse(root: Path, manifest: dict[str, Any], split: str,
            scenario: ScenarioSpec) -> np.ndarray:
    """The coarse label of every sample of ``split`` (``meta.coarse_label``), in
    :func:`read_columns` order."""
    import json

    frame = read_columns(root, manifest, split, ("id", "meta"))
    out = np.empty(len(frame), dtype=np.int64)
    for k, (sid, meta) in enumerate(zip(frame["id"], frame["meta"])):
        value = json.loads(meta or "{}").get("coarse_label")
        if not isinstance(value, int):
            raise BuildError(f"scenario {scenario.name}: sample {sid!r} has no integer "
                             f"meta.coarse_label, which the hierarchical split needs; build a "
                             f"benchmark whose task declares a coarse_column (cifar100-dir)")
        out[k] = value
    return out


def _rows(frame: pd.DataFrame, parts: list[np.ndarray], split: str,
          rounds: list[np.ndarray] | None = None,
          positions: list[np.ndarray] | None = None,
          missing: list[np.ndarray] | None = None) -> pd.DataFrame:
    out = []
    for c, idx in enumerate(parts):
        idx = np.asarray(idx, dtype=np.int64)
        out.append(pd.DataFrame({
            "id": frame["id"].to_numpy()[idx],
            "client": np.full(len(idx), c, dtype=np.int64),
            "split": split,
            "round": rounds[c] if rounds is not None else np.full(len(idx), -1, np.int64),
            "position": positions[c] if positions is not None else np.full(len(idx), -1,
                                                                           np.int64),
            "missing": missing[c].astype(np.int8) if missing is not None
            else np.zeros(len(idx), np.int8),
        }))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=list(COLUMNS))


def _global(frame: pd.DataFrame, idx: np.ndarray, split: str) -> pd.DataFrame:
    idx = np.asarray(idx, dtype=np.int64)
    return pd.DataFrame({"id": frame["id"].to_numpy()[idx], "client": -1, "split": split,
                         "round": -1, "position": -1, "missing": np.zeros(len(idx), np.int8)})


def _local_splits(parts: list[np.ndarray], fraction: float, seed: int
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each client's rows split into training and a local test set of ``round(fraction * n)``
    rows (at least one while the client keeps a training row), drawn from
    ``default_rng([seed, client, 7])``: FediLoRA's 8:2 split with ``fraction=0.2``."""
    if not 0 < fraction < 1:
        raise BuildError(f"local_test_fraction must be in (0, 1), got {fraction}")
    train, test = [], []
    for c, part in enumerate(parts):
        part = np.sort(np.asarray(part, dtype=np.int64))
        k = min(len(part) - 1, max(1, round(fraction * len(part)))) if len(part) > 1 else 0
        picked = np.zeros(len(part), dtype=bool)
        picked[np.random.default_rng([seed, c, 7]).permutation(len(part))[:k]] = True
        train.append(part[~picked])
        test.append(part[picked])
    return train, test


def partition_table(spec: BenchmarkSpec | None, scenario: ScenarioSpec, root: Path,
                    manifest: dict[str, Any], seed: int) -> pd.DataFrame:
    """Compute the scenario's table (see the module docstring for the rules); ``spec`` names
    the unseen and public tasks to hold back (``None``: a rule that reads no task list)."""
    build_seed, seed = seed, _seed(scenario, seed)
    params = dict(scenario.params)
    rule = scenario.partition
    want = ("id", "task", "label", "domain")
    train = read_columns(root, manifest, "train", want)
    test = read_columns(root, manifest, "test", want)
    # unseen and public tasks are no client's under any rule: a rule that cuts by label,
    # quantity or domain must not deal their rows out
    held_back = [] if spec is None else list({*spec.unseen_tasks, *spec.public_tasks})
    keep_train = ~train["task"].isin(held_back).to_numpy()
    keep_test = ~test["task"].isin(held_back).to_numpy()
    train = train[keep_train].reset_index(drop=True)
    test = test[keep_test].reset_index(drop=True)
    if rule == "by_task":
        client_tasks = [list(c.tasks) for c in spec.clients]
        parts = P.by_task(train["task"].to_numpy(), client_tasks)
        owner = {t: c for c, tasks in enumerate(client_tasks) for t in tasks}
        test_idx = [np.flatnonzero(test["task"].map(owner).eq(c).to_numpy())
                    for c in range(len(client_tasks))]
        test_rows = _rows(test, test_idx, "test")
        train_parts = parts
        stream_kw = {"task_of_sample": train["task"].to_numpy(),
                     "client_task_order": client_tasks}
    elif rule == "quantity_skew":
        if params.get("pool_test"):  # FediLoRA: the whole dataset is cut into the subsets
            train = pd.concat([train, test], ignore_index=True)
            test = test.iloc[:0]
        subsets = P.quantity_skew(len(train), params["num_clients"], seed=seed,
                                  global_test=bool(params.get("global_test", False)))
        if params.get("global_test"):
            train_parts = subsets[:-1]
            test_rows = pd.concat([_global(train, subsets[-1], "test"),
                                   _global(test, np.arange(len(test)), "test")],
                                  ignore_index=True)
        else:
            train_parts = subsets
            test_rows = _global(test, np.arange(len(test)), "test")
        if params.get("local_test_fraction"):
            train_parts, local = _local_splits(train_parts, float(params["local_test_fraction"]),
                                               seed)
            test_rows = pd.concat([_rows(train, local, "test"), test_rows], ignore_index=True)
        stream_kw = {"task_of_sample": train["task"].to_numpy()}
    elif rule == "pathological" and params.get("base_only"):
        base, _novel = P.base_novel_split(np.unique(train["label"].to_numpy(np.int64)))
        base_set = set(base.tolist())
        in_base = train["label"].isin(base_set).to_numpy()
        base_rows = np.flatnonzero(in_base)
        sub = train.iloc[base_rows].reset_index(drop=True)
        sub_labels = sub["label"].to_numpy(np.int64)
        blocks = P.contiguous_class_blocks(sub_labels, params["num_clients"], seed=seed)
        local = P.pathological(sub_labels, params["num_clients"], mode="contiguous", seed=seed)
        if params.get("shots"):
            local = few_shot(local, sub_labels, blocks, int(params["shots"]),
                             int(params.get("shot_seed", build_seed)))
        train_parts = [base_rows[p] for p in local]
        owner = {int(lbl): c for c, block in enumerate(blocks) for lbl in block}
        test_owner = test["label"].map(lambda x: owner.get(int(x), -1)).to_numpy()
        test_idx = [np.flatnonzero(test_owner == c) for c in range(params["num_clients"])]
        test_rows = pd.concat([_rows(test, test_idx, "test"),
                               _global(test, np.flatnonzero(test_owner == -1), "test")],
                              ignore_index=True)
        stream_kw = {"task_of_sample": train["task"].to_numpy()}
    elif rule == "dirichlet_hierarchical":
        pooled = np.concatenate([train["label"].to_numpy(np.int64),
                                 test["label"].to_numpy(np.int64)])
        coarse = np.concatenate([_coarse(root, manifest, "train", scenario)[keep_train],
                                 _coarse(root, manifest, "test", scenario)[keep_test]])
        parts = P.dirichlet_hierarchical(pooled, coarse, params["num_clients"],
                                         params["alpha_coarse"], params["alpha_fine"], seed=seed)
        n_train = len(train)
        train_parts = [p[p < n_train] for p in parts]
        test_rows = _rows(test, [p[p >= n_train] - n_train for p in parts], "test")
        stream_kw = {"task_of_sample": train["task"].to_numpy()}
    elif rule == "tap_groups":
        # a twin benchmark names its tasks: {TAP's task id: the twin's}
        twin = dict(params.get("tasks") or {})
        layout = tuple(tuple((twin.get(t, t), lo, hi) for t, lo, hi in pattern)
                       for pattern in P.TAP_LAYOUTS[params["layout"]])
        groups = int(params.get("groups", 3))
        train_parts = P.task_groups(train["task"].to_numpy(), layout, groups=groups, seed=seed,
                                    unshuffled=tuple(params.get("unshuffled", ())))
        holders: dict[str, list[int]] = {}
        for g in range(groups):
            for k, pattern in enumerate(layout):
                for name, _, _ in pattern:
                    holders.setdefault(name, []).append(g * len(layout) + k)
        test_rows = _rows(test, P.split_among_holders(test["task"].to_numpy(), holders,
                                                      groups * len(layout), seed=seed + 1),
                          "test")
        stream_kw = {"task_of_sample": train["task"].to_numpy()}
    elif params.get("paired_test") and rule in ("dirichlet", "by_domain"):
        train_parts, test_parts = _paired_parts(rule, params, train, test, seed)
        test_rows = _rows(test, test_parts, "test")
        stream_kw = {"task_of_sample": train["task"].to_numpy()}
    else:
        label_params = {k: v for k, v in params.items() if k != "seed"}
        train_parts = _label_parts(rule, label_params, train, seed)
        # the test split is smaller: ask only for a non-empty local test set per client
        test_params = {**label_params, "min_size": min(1, label_params.get("min_size", 1))}
        test_rows = _rows(test, _label_parts(rule, test_params, test, seed + 1), "test")
        stream_kw = {"task_of_sample": train["task"].to_numpy()}
    if scenario.order == "dynamic":
        st = P.stream(train_parts, order="dynamic", rounds=scenario.rounds,
                      rounds_per_task=scenario.rounds_per_task, seed=seed, **stream_kw)
    else:
        st = P.stream(train_parts, order="static", rounds=max(1, scenario.rounds), seed=seed)
    missing = None
    if params.get("missing_rate"):
        missing = P.missing_modality([len(p) for p in train_parts], params["missing_rate"],
                                     seed=seed, mode=params.get("missing_mode", "per_sample"))
    train_rows = _rows(train, train_parts, "train", st.rounds, st.positions, missing)
    table = pd.concat([train_rows, test_rows], ignore_index=True)
    return table.astype({"client": "int64", "round": "int64", "position": "int64",
                         "missing": "int8"})


def few_shot(parts: list[np.ndarray], labels: np.ndarray, blocks: list[list[int]], shots: int,
             seed: int) -> list[np.ndarray]:
    """Keep ``shots`` samples of each class of each client (see the module docstring):
    ``random.Random(seed).sample`` over the class's samples in index order, the classes of
    client 0's block first, in block order, then client 1's, and so on. Returns ascending index
    arrays."""
    import random

    if shots < 1:
        raise BuildError(f"shots must be a positive number of samples per class, got {shots}")
    rng = random.Random(seed)
    out = []
    for part, block in zip(parts, blocks):
        kept: list[int] = []
        for cls in block:
            items = [int(i) for i in part if labels[i] == cls]
            kept += rng.sample(items, shots) if len(items) >= shots else items
        out.append(np.array(sorted(kept), dtype=np.int64))
    return out


def write_scenario(spec: BenchmarkSpec, scenario: ScenarioSpec, root: Path,
                   manifest: dict[str, Any], seed: int) -> dict[str, Any]:
    """Write ``partitions/<name>.parquet`` under ``root``; return its manifest entry."""
    table = partition_table(spec, scenario, root, manifest, seed)
    if table["id"].duplicated().any():
        dup = table.loc[table["id"].duplicated(), "id"].iloc[0]
        raise BuildError(f"scenario {scenario.name}: sample {dup!r} assigned twice")
    rel = f"partitions/{scenario.name}.parquet"
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    arrow = pa.Table.from_pandas(table[list(COLUMNS)], schema=PARTITION_SCHEMA,
                                 preserve_index=False)
    pq.write_table(arrow, tmp, compression="zstd")
    digest = sha256_file(tmp)
    os.replace(tmp, path)
    counts = {}
    for split in ("train", "test"):  # by the split a row is stored in, whatever role it plays
        stored = read_columns(root, manifest, split, ("id",))["id"]
        total = sum(t.get(split, {}).get("rows", 0) for t in manifest["tasks"].values())
        assigned = int(table["id"].isin(stored).sum())
        counts[split] = {"total": total, "assigned": assigned, "unassigned": total - assigned}
    return {"file": rel, "rows": len(table), "sha256": digest, "seed": _seed(scenario, seed),
            "scenario": scenario.to_dict(), "counts": counts,
            "clients": int(table.loc[table["client"] >= 0, "client"].max() + 1)
            if (table["client"] >= 0).any() else 0}


def add_scenario(root: Path, scenario: ScenarioSpec, *, seed: int | None = None,
                 replace: bool = False) -> dict[str, Any]:
    """Add a scenario to a built folder without rebuilding its tasks; rewrites the manifest.

    The manifest is replaced atomically, after the partition file is in place.
    """
    from drake.locks import exclusive
    from drake.registry import get_benchmark
    from drake.specs import BenchmarkSpec as _Spec  # noqa: F401  (type only)
    from drake.verify import load_manifest

    root = Path(root)
    with exclusive(root, "add a scenario to", wait=60):  # a build or another partition writes
        manifest = load_manifest(root)
        if scenario.name in manifest.get("partitions", {}) and not replace:
            raise BuildError(f"{root} already has scenario {scenario.name!r}; pass --replace to "
                             f"recompute it")
        spec = spec_from_manifest(manifest, get_benchmark)
        entry = write_scenario(spec, scenario, root, manifest,
                               manifest["seed"] if seed is None else seed)
        manifest.setdefault("partitions", {})[scenario.name] = entry
        write_manifest(root, manifest)
    return entry


def spec_from_manifest(manifest: dict[str, Any], get_benchmark) -> BenchmarkSpec:
    """The registered spec a build was made from, checked against the manifest's fingerprint.

    A ``drake build --tasks`` folder was made from the registered spec cut down to its tasks,
    so that cut is tried too.
    """
    name = manifest["benchmark"]
    sizes = [None]
    from drake.catalog.synth import SIZES
    from drake.registry import SYNTHETIC

    if name in SYNTHETIC:
        sizes = list(SIZES)
    built = set(manifest.get("tasks", {}))
    for size in sizes:
        spec = get_benchmark(name, size=size)
        candidates = [spec]
        if built and built != {t.id for t in spec.tasks} and built <= {t.id for t in spec.tasks}:
            candidates.append(restrict_spec(spec, built))
        for candidate in candidates:
            if candidate.fingerprint() == manifest["spec_sha256"]:
                return candidate
    raise BuildError(f"the spec of {name} in this suite differs from the one the folder was "
                     f"built with (spec_sha256 {manifest['spec_sha256'][:12]}…); rebuild it")


def manifest_sha256(root: Path) -> str:
    """sha256 of a build's manifest.json bytes: the identity that results and entries cite."""
    return hashlib.sha256((Path(root) / MANIFEST).read_bytes()).hexdigest()
