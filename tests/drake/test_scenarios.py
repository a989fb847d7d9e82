"""Scenarios materialised at build time and added later with `drake partition`."""

import json

import pyarrow.parquet as pq
import pytest

from drake.build import build
from drake.cli import main
from drake.errors import BuildError
from drake.registry import get_benchmark
from drake.scenarios import add_scenario, read_columns
from drake.specs import ScenarioSpec
from drake.verify import verify


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("s"), seed=3)


@pytest.fixture(scope="module")
def cls(tmp_path_factory):
    return build(get_benchmark("synth-cls", size="tiny"), tmp_path_factory.mktemp("c"), seed=3)


def table(folder, name):
    return pq.read_table(folder / "partitions" / f"{name}.parquet").to_pandas()


def test_dynamic_scenario_follows_client_task_order(synth):
    spec = get_benchmark("drake-synth", size="tiny")
    m = json.loads((synth / "manifest.json").read_text())
    assert set(m["partitions"]) == {"dynamic", "static"}
    t = table(synth, "dynamic")
    train = t[t.split == "train"]
    task_of = dict(zip(*read_columns(synth, m, "train", ("id", "task")).values.T))
    for c, client in enumerate(spec.clients):
        rows = train[train.client == c].sort_values("position")
        tasks = [task_of[i] for i in rows.id]
        # 4 tasks x 5 rounds: task k occupies rounds 5k..5k+4, in the client's task order
        for k, task in enumerate(client.tasks):
            rounds = rows.loc[[tk == task for tk in tasks], "round"]
            assert rounds.between(5 * k, 5 * k + 4).all() and len(rounds) == 24
        assert list(rows["position"]) == list(range(len(rows)))
    counts = m["partitions"]["dynamic"]["counts"]
    # unseen and public tasks are not assigned, and the counts say so
    assert counts["train"]["assigned"] == 40 * 24
    assert counts["train"]["assigned"] + counts["train"]["unassigned"] == counts["train"]["total"]
    test = t[t.split == "test"]
    assert (test["round"] == -1).all() and len(test) == 40 * 8


def test_static_scenario_spreads_all_tasks_over_rounds(synth):
    t = table(synth, "static")
    train = t[(t.split == "train") & (t.client == 0)]
    assert sorted(train["round"].unique()) == list(range(20))


def test_label_scenarios_on_synth_cls(cls):
    m = json.loads((cls / "manifest.json").read_text())
    assert {"iid", "alpha0.3", "pathological-k2", "base2novel", "by-domain"} <= set(m["partitions"])
    labels = read_columns(cls, m, "train", ("id", "label"))
    lab = dict(zip(labels.id, labels.label))
    b2n = table(cls, "base2novel")
    train = b2n[b2n.split == "train"]
    classes = sorted(set(labels.label))
    base = set(classes[: (len(classes) + 1) // 2])
    assert {lab[i] for i in train.id} <= base
    # every base class has exactly one owner
    owners = train.assign(label=[lab[i] for i in train.id]).groupby("label").client.nunique()
    assert (owners == 1).all()
    test = b2n[b2n.split == "test"]
    assert (test.client == -1).any()  # novel-class test rows belong to no client


def test_drake_partition_adds_a_scenario_without_rebuilding(cls, tmp_path):
    import shutil

    folder = shutil.copytree(cls, tmp_path / "c")
    shards_before = {p: p.stat().st_mtime_ns for p in (folder / "tasks").rglob("*.parquet")}
    rc = main(["partition", str(folder), "--scenario", "alpha0.05", "--rule", "dirichlet",
               "--param", "alpha=0.05", "--param", "num_clients=5", "--param", "min_size=2"])
    assert rc == 0
    assert verify(folder).ok
    assert shards_before == {p: p.stat().st_mtime_ns for p in (folder / "tasks").rglob("*.parquet")}
    t = table(folder, "alpha0.05")
    assert sorted(t.client.unique()) == list(range(5))
    with pytest.raises(BuildError, match="--replace"):
        add_scenario(folder, ScenarioSpec("alpha0.05", "dirichlet",
                                          params={"alpha": 0.05, "num_clients": 5}))


def test_a_label_rule_never_deals_out_unseen_or_public_rows(synth, tmp_path):
    """`drake partition --rule iid` on drake-synth cuts the clients' tasks only; the unseen and
    public tasks' rows stay unassigned, and the counts say so."""
    import shutil

    spec = get_benchmark("drake-synth", size="tiny")
    folder = shutil.copytree(synth, tmp_path / "s")
    assert main(["partition", str(folder), "--scenario", "iid4", "--rule", "iid",
                 "--param", "num_clients=4"]) == 0
    assert verify(folder).ok
    m = json.loads((folder / "manifest.json").read_text())
    t = table(folder, "iid4")
    held_back = {*spec.unseen_tasks, *spec.public_tasks}
    for split in ("train", "test"):
        rows = read_columns(folder, m, split, ("id", "task"))
        task_of = dict(zip(rows.id, rows.task))
        placed = t[t.split == split]
        assert not {task_of[i] for i in placed.id} & held_back
        clients = sum(task not in held_back for task in rows.task)
        assert len(placed) == placed.id.nunique() == clients  # every client-task row, once
        counts = m["partitions"]["iid4"]["counts"][split]
        assert counts["assigned"] == clients and counts["unassigned"] == len(rows) - clients


def test_scenario_tables_are_deterministic(synth, tmp_path):
    again = build(get_benchmark("drake-synth", size="tiny"), tmp_path, seed=3)
    for name in ("dynamic", "static"):
        a = (synth / "partitions" / f"{name}.parquet").read_bytes()
        b = (again / "partitions" / f"{name}.parquet").read_bytes()
        assert a == b
    t = table(again, "static")
    train = t[t.split == "train"]
    for _, rows in train.groupby("client"):
        assert sorted(rows.position) == list(range(len(rows)))


def test_drake_partition_works_on_a_tasks_build(tmp_path):
    """A `drake build --tasks` folder is made from the spec cut down to its tasks; `drake
    partition` recognises that cut instead of refusing the folder as built by another spec."""
    from drake.build import restrict_spec

    spec = restrict_spec(get_benchmark("drake-synth", size="tiny"),
                         ["synth-spatial", "synth-quad-colour", "synth-dish-name"])
    folder = build(spec, tmp_path / "s", seed=3)
    rc = main(["partition", str(folder), "--scenario", "iid3", "--rule", "iid",
               "--param", "num_clients=3"])
    assert rc == 0
    assert verify(folder).ok
    t = table(folder, "iid3")
    assert sorted(t.client.unique()) == [0, 1, 2]
    manifest = json.loads((folder / "manifest.json").read_text())
    for split in ("train", "test"):  # every row of the three tasks is placed once
        rows = sum(manifest["tasks"][task][split]["rows"] for task in manifest["tasks"])
        placed = t[t.split == split]
        assert len(placed) == placed.id.nunique() == rows


def test_quantity_skew_local_test_splits_and_counts_by_stored_split(tmp_path):
    folder = build(get_benchmark("synth-caption", size="small"), tmp_path, seed=3)
    m = json.loads((folder / "manifest.json").read_text())
    t = table(folder, "quantity-skew-local")
    stored = {s: set(read_columns(folder, m, s, ("id",))["id"]) for s in ("train", "test")}
    local = t[(t.split == "test") & (t.client >= 0)]
    assert set(local.id) <= stored["train"], "local test rows are drawn from training rows"
    for c in range(10):
        n_train = int(((t.split == "train") & (t.client == c)).sum())
        n_test = int(((t.split == "test") & (t.client == c)).sum())
        n = n_train + n_test
        assert n_test == (min(n - 1, max(1, round(0.2 * n))) if n > 1 else 0), (c, n, n_test)
    assert not t.id.duplicated().any()
    for name in ("quantity-skew", "quantity-skew-local"):
        counts = m["partitions"][name]["counts"]
        assert counts["train"] == {"total": 160, "assigned": 160, "unassigned": 0}, counts
        assert counts["test"] == {"total": 40, "assigned": 40, "unassigned": 0}, counts
    assert verify(folder).ok


def test_fedilora_cuts_the_whole_dataset_into_11_subsets_with_8_2_inside_each(tmp_path):
    """FediLoRA §4.1: the dataset (stored train and test rows pooled) is cut into 11 subsets of
    random sizes, the last the global test set; each client's subset is split 8:2."""
    import numpy as np

    import partitioners as P

    params = {"num_clients": 10, "global_test": True, "local_test_fraction": 0.2,
              "pool_test": True}
    fedilora = {s.name: dict(s.params) for s in get_benchmark("fedilora").scenarios}
    assert all({k: v for k, v in p.items() if k in params} == params for p in fedilora.values())
    folder = build(get_benchmark("synth-caption", size="small"), tmp_path, seed=3)
    add_scenario(folder, ScenarioSpec("fedilora-split", "quantity_skew", params=params))
    m = json.loads((folder / "manifest.json").read_text())
    t = table(folder, "fedilora-split")
    pooled = np.array(list(read_columns(folder, m, "train", ("id",))["id"])
                      + list(read_columns(folder, m, "test", ("id",))["id"]))
    assert len(pooled) == 200 and len(t) == 200 and not t.id.duplicated().any()
    subsets = P.quantity_skew(200, 10, seed=3, global_test=True)
    assert len(subsets) == 11
    # the 11th subset is the global test set, and nothing else is
    assert set(t[t.client == -1].id) == set(pooled[subsets[10]])
    assert (t[t.client == -1].split == "test").all()
    for c in range(10):
        mine = t[t.client == c]
        assert set(mine.id) == set(pooled[subsets[c]])  # a client's subset, nothing more
        n, n_test = len(mine), int((mine.split == "test").sum())
        assert n_test == (min(n - 1, max(1, round(0.2 * n))) if n > 1 else 0), (c, n)
    # stored test rows train clients too: the subsets cut the whole dataset
    stored_test = set(read_columns(folder, m, "test", ("id",))["id"])
    assert (t[(t.split == "train") & t.id.isin(stored_test)]).shape[0] > 0
    counts = m["partitions"]["fedilora-split"]["counts"]
    assert counts["train"]["unassigned"] == counts["test"]["unassigned"] == 0
    assert verify(folder).ok


def test_base_to_novel_few_shot_split_by_hand(cls, tmp_path):
    """pFedMMA's base-to-novel split on synth-cls, re-derived here step by step: base = the
    first ceil(C/2) sorted labels; the base list shuffled by Python's random (seed 2023) and cut
    into blocks of round(C_base/N), the last client taking the rest; k shots per owned class by
    random.sample over the class's rows in index order, classes in block order; a client's test
    rows are exactly its classes' test rows; the novel test rows belong to no client."""
    import random
    import shutil

    folder = shutil.copytree(cls, tmp_path / "c")
    n, k, shot_seed = 3, 4, 11
    add_scenario(folder, ScenarioSpec("b2n-4shot", "pathological", params={
        "mode": "contiguous", "num_clients": n, "seed": 2023, "base_only": True, "shots": k,
        "shot_seed": shot_seed}))
    m = json.loads((folder / "manifest.json").read_text())
    train = read_columns(folder, m, "train", ("id", "label"))
    test = read_columns(folder, m, "test", ("id", "label"))
    classes = sorted(set(train.label))
    base = classes[: -(-len(classes) // 2)]
    shuffled = list(base)
    random.Random(2023).shuffle(shuffled)
    size = round(len(base) / n)
    blocks = [shuffled[i * size:(i + 1) * size] for i in range(n - 1)] + [
        shuffled[(n - 1) * size:]]
    base_rows = train[train.label.isin(base)].reset_index(drop=True)
    rng = random.Random(shot_seed)
    expected = {}
    for c, block in enumerate(blocks):
        for cls_id in block:
            items = [i for i in range(len(base_rows)) if base_rows.label[i] == cls_id]
            drawn = rng.sample(items, k) if len(items) >= k else items
            expected.update({base_rows.id[i]: c for i in drawn})
    t = table(folder, "b2n-4shot")
    got_train = dict(zip(t[t.split == "train"].id, t[t.split == "train"].client))
    assert got_train == expected
    owner = {cls_id: c for c, block in enumerate(blocks) for cls_id in block}
    got_test = dict(zip(t[t.split == "test"].id, t[t.split == "test"].client))
    assert got_test == {i: owner.get(lbl, -1) for i, lbl in zip(test.id, test.label)}
    counts = m["partitions"]["b2n-4shot"]["counts"]["train"]
    assert counts["assigned"] == len(expected)
    assert counts["assigned"] + counts["unassigned"] == counts["total"] == len(train)


def test_few_shot_refuses_a_non_positive_shot_count():
    import numpy as np

    from drake.scenarios import few_shot

    with pytest.raises(BuildError, match="positive number of samples"):
        few_shot([np.arange(4)], np.zeros(4, dtype=np.int64), [[0]], 0, 0)
