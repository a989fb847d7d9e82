"""TAP's 30 clients: three groups of the same ten task patterns, with the per-client counts
TAP's own code gives for the real dataset sizes (worked out by hand from its cut rule)."""

import numpy as np
import pytest

import partitioners as P

# training rows per task as TAP's code sizes them (VQA: the first 17,000 of the validation
# split; MMLU: its three test splits pooled, 1534 + 272 + 895)
TOTALS = {"tiny-imagenet": 100000, "cifar100": 50000, "fashion-mnist": 60000,
          "caltech256": 24791, "ag-news": 120000, "mmlu": 2701, "vqav2-small": 17000,
          "common-gen": 67389}


def labels():
    return np.concatenate([np.full(n, t) for t, n in TOTALS.items()])


def counts(parts, tasks):
    return [{t: int((tasks[p] == t).sum()) for t in sorted(set(tasks[p].tolist()))}
            for p in parts]


# per pattern, groups 0 and 1 (group 2 takes each slice's remainder)
FLAVA = [{"tiny-imagenet": 33333}, {"ag-news": 13200}, {"ag-news": 13200},
         {"caltech256": 4131}, {"vqav2-small": 2833}, {"vqav2-small": 2833}, {"mmlu": 900},
         {"ag-news": 13600, "cifar100": 16666}, {"common-gen": 11231, "fashion-mnist": 20000},
         {"caltech256": 4132, "common-gen": 11232}]
FLAVA_LAST = [{"tiny-imagenet": 33334}, {"ag-news": 13200}, {"ag-news": 13200},
              {"caltech256": 4132}, {"vqav2-small": 2834}, {"vqav2-small": 2834},
              {"mmlu": 901}, {"ag-news": 13600, "cifar100": 16668},
              {"common-gen": 11231, "fashion-mnist": 20000},
              {"caltech256": 4133, "common-gen": 11232}]


def test_flava_clients_hold_taps_task_sets_and_counts():
    tasks = labels()
    parts = P.task_groups(tasks, P.TAP_LAYOUTS["flava"], seed=41, unshuffled=["fashion-mnist"])
    assert len(parts) == 30
    got = counts(parts, tasks)
    assert got[:10] == FLAVA and got[10:20] == FLAVA and got[20:] == FLAVA_LAST
    # disjoint, and every training row of the eight datasets has a client
    every = np.concatenate(parts)
    assert every.size == np.unique(every).size == tasks.size
    # Fashion-MNIST keeps its index order: group g holds rows [20000 g, 20000 (g + 1))
    start = int(np.flatnonzero(tasks == "fashion-mnist")[0])
    fm = [p[tasks[p] == "fashion-mnist"] - start for p in parts if "fashion-mnist" in tasks[p]]
    assert [(int(f.min()), int(f.max())) for f in fm] == [(0, 19999), (20000, 39999),
                                                            (40000, 59999)]


def test_vilt_swaps_the_classification_sets_for_fashion_mnist_thirds():
    tasks = labels()
    parts = P.task_groups(tasks, P.TAP_LAYOUTS["vilt"], seed=41, unshuffled=["fashion-mnist"])
    got = counts(parts, tasks)
    assert got[0] == {"fashion-mnist": 6600} and got[7] == {"ag-news": 13600,
                                                           "fashion-mnist": 6600}
    assert got[8] == {"common-gen": 11231, "fashion-mnist": 6800}
    assert got[1:7] == FLAVA[1:7] and got[9] == FLAVA[9]
    held = set(np.concatenate([tasks[p] for p in parts]).tolist())
    assert held == set(TOTALS) - {"tiny-imagenet", "cifar100"}  # ViLT's six datasets


def test_the_same_seed_gives_the_same_clients_and_another_seed_other_rows():
    tasks = labels()
    a = P.task_groups(tasks, P.TAP_LAYOUTS["flava"], seed=41)
    b = P.task_groups(tasks, P.TAP_LAYOUTS["flava"], seed=41)
    c = P.task_groups(tasks, P.TAP_LAYOUTS["flava"], seed=42)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[1], c[1])


def test_test_rows_are_dealt_evenly_to_the_holders():
    tasks = np.array(["ag-news"] * 10 + ["mmlu"] * 4 + ["other"] * 3)
    parts = P.split_among_holders(tasks, {"ag-news": [1, 2, 7], "mmlu": [6]}, 10, seed=0)
    assert [len(p) for p in parts] == [0, 4, 3, 0, 0, 0, 4, 3, 0, 0]
    assert sorted(np.concatenate(parts).tolist()) == list(range(14))


def test_a_layout_naming_a_task_with_no_rows_is_refused():
    with pytest.raises(ValueError, match=r"no rows: \['cifar100'\]"):
        P.task_groups(np.array(["ag-news"] * 3), ((("cifar100", 0.0, 1.0),),), seed=0)


def test_the_tap_scenario_table_follows_the_layout(tmp_path):
    """drake's tap_groups scenario on a toy build: training rows as task_groups cuts them, each
    task's test rows dealt to its holders, the rows of datasets the layout leaves out
    unassigned."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from drake.scenarios import partition_table
    from drake.specs import ScenarioSpec

    sizes = {t: 30 for t in TOTALS}
    manifest = {"tasks": {}}
    frames = {}
    for split, scale in (("train", 1), ("test", 1)):
        rows = [(f"{t}-{split}-{i}", t) for t, n in sizes.items() for i in range(n * scale)]
        frame = pd.DataFrame({"id": [r[0] for r in rows], "task": [r[1] for r in rows],
                              "label": -1, "domain": ""})
        frames[split] = frame
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                       tmp_path / f"{split}.parquet")
    for t in sizes:
        manifest["tasks"][t] = {s: {"shards": []} for s in ("train", "test")}
    manifest["tasks"][next(iter(sizes))] = {s: {"shards": [{"file": f"{s}.parquet"}]}
                                           for s in ("train", "test")}
    scen = ScenarioSpec("vilt-30", "tap_groups", params={
        "layout": "vilt", "groups": 3, "unshuffled": ["fashion-mnist"]})
    table = partition_table(None, scen, tmp_path, manifest, seed=5)
    train = table[table.split == "train"]
    parts = P.task_groups(frames["train"]["task"].to_numpy(), P.TAP_LAYOUTS["vilt"], seed=5,
                          unshuffled=["fashion-mnist"])
    for c, part in enumerate(parts):
        assert sorted(train[train.client == c].id) == sorted(frames["train"].id[part])
    test = table[table.split == "test"]
    assert set(test.client) == set(range(30))
    assert not test.id.str.startswith(("tiny-imagenet", "cifar100")).any()
    # ag-news: 9 holders (patterns 1, 2 and 7 of each group) share its 30 test rows
    ag = test[test.id.str.startswith("ag-news")]
    assert sorted(ag.client.unique()) == [1, 2, 7, 11, 12, 17, 21, 22, 27]
    assert len(ag) == 30
