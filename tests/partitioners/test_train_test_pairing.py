"""pFedMMA cuts each class's test samples with the same client proportions as its training
samples (datasplit.py's noniid-labeldir, data_utils.py for DomainNet and Office)."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import partitioners as P
from partitioners.dirichlet import dirichlet_client_of


class FixedDraws:
    """A generator whose permutations are the identity and whose Dirichlet draws are given."""

    def __init__(self, proportions):
        self.proportions = [np.array(p, dtype=float) for p in proportions]

    def permutation(self, n):
        return np.arange(n)

    def dirichlet(self, alpha):
        return self.proportions.pop(0)


def test_test_samples_are_cut_with_the_training_proportions_by_hand():
    train = np.array([0] * 10 + [1] * 10)
    test = np.array([0] * 5 + [1] * 5)
    # class 0: p = (0.3, 0.7) -> train cut at int(0.3 * 10) = 3, test at int(0.3 * 5) = 1
    # class 1: p = (0.6, 0.4) -> train cut at 6, test at int(0.6 * 5) = 3
    train_of, test_of = dirichlet_client_of(
        train, 2, np.array(1.0), FixedDraws([(0.3, 0.7), (0.6, 0.4)]), min_size=0,
        balance=False, max_retries=1, test_labels=test, test_min_size=0)
    assert train_of.tolist() == [0] * 3 + [1] * 7 + [0] * 6 + [1] * 4
    assert test_of.tolist() == [0] * 1 + [1] * 4 + [0] * 3 + [1] * 2


def test_a_draw_that_leaves_a_client_without_test_samples_is_redrawn():
    train = np.array([0] * 10)
    test = np.array([0] * 2)
    # first draw: p = (0.2, 0.8): train 2/8, test int(0.4) = 0 for client 0 -> redrawn
    draws = FixedDraws([(0.2, 0.8), (0.5, 0.5)])
    train_of, test_of = dirichlet_client_of(train, 2, np.array(1.0), draws, min_size=1,
                                            balance=False, max_retries=2, test_labels=test,
                                            test_min_size=1)
    assert np.bincount(train_of).tolist() == [5, 5] and test_of.tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"test_min_size=1.*had 0 test samples"):
        dirichlet_client_of(train, 2, np.array(1.0), FixedDraws([(0.2, 0.8)]), min_size=1,
                            balance=False, max_retries=1, test_labels=test, test_min_size=1)


def test_a_client_is_tested_only_on_classes_it_trains_on():
    labels = np.repeat(np.arange(5), 30)
    tr, te = P.dirichlet_train_test(labels, np.repeat(np.arange(5), 6), 4, 0.5, seed=3,
                                    min_size=5)
    assert sum(map(len, tr)) == 150 and sum(map(len, te)) == 30
    assert all(len(t) >= 1 for t in te)
    # every class a client holds no training sample of, it holds no test sample of either
    test_labels = np.repeat(np.arange(5), 6)
    for own, held in zip(tr, te):
        assert set(test_labels[held].tolist()) <= set(labels[own].tolist())


def test_test_classes_without_training_samples_are_refused():
    with pytest.raises(ValueError, match=r"test classes \[7\] have no training sample"):
        P.dirichlet_train_test(np.repeat(np.arange(2), 10), np.array([0, 7]), 2, 1.0, seed=0,
                               min_size=1)


def test_by_domain_pairs_train_and_test_inside_each_domain():
    rng = np.random.default_rng(0)
    domains = np.repeat(np.array(["a", "b"]), 60)
    labels = rng.integers(0, 3, 120)
    test_domains = np.repeat(np.array(["a", "b"]), 30)
    test_labels = rng.integers(0, 3, 60)
    tr, te = P.by_domain_train_test(domains, labels, test_domains, test_labels, 2, 0.5, seed=1)
    assert len(tr) == len(te) == 4
    for c, (own, held) in enumerate(zip(tr, te)):
        assert set(domains[own]) == set(test_domains[held]) == {"ab"[c // 2]}
        assert set(test_labels[held].tolist()) <= set(labels[own].tolist())
    assert sorted(np.concatenate(te).tolist()) == list(range(60))


def test_the_hierarchical_scenario_pools_train_and_test(tmp_path):
    """CIFAR-100's script pools both splits, splits them together and sends each client's
    share back to its split; coarse labels come from the samples' meta."""
    import json

    from drake.errors import BuildError
    from drake.scenarios import partition_table
    from drake.specs import ScenarioSpec

    fine = np.arange(40) % 8
    frames = {"train": range(0, 30), "test": range(30, 40)}
    manifest = {"tasks": {"t": {}}}
    for split, rows in frames.items():
        table = pd.DataFrame({"id": [f"s{i}" for i in rows], "task": "t",
                              "label": fine[list(rows)], "domain": "",
                              "meta": [json.dumps({"coarse_label": int(fine[i] // 4)})
                                       for i in rows]})
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False),
                       tmp_path / f"{split}.parquet")
        manifest["tasks"]["t"][split] = {"shards": [{"file": f"{split}.parquet"}]}
    scen = ScenarioSpec("h", "dirichlet_hierarchical",
                        params={"num_clients": 4, "alpha_coarse": 0.3, "alpha_fine": 10.0})
    table = partition_table(None, scen, tmp_path, manifest, seed=0)
    pooled = P.dirichlet_hierarchical(fine, fine // 4, 4, 0.3, 10.0, seed=0)
    for c, part in enumerate(pooled):
        mine = table[table.client == c]
        assert sorted(mine[mine.split == "train"].id) == sorted(f"s{i}" for i in part if i < 30)
        assert sorted(mine[mine.split == "test"].id) == sorted(f"s{i}" for i in part if i >= 30)
    meta = pd.DataFrame({"id": ["x"], "task": "t", "label": [0], "domain": "", "meta": ["{}"]})
    pq.write_table(pa.Table.from_pandas(meta, preserve_index=False), tmp_path / "test.parquet")
    with pytest.raises(BuildError, match="sample 'x' has no integer meta.coarse_label"):
        partition_table(None, scen, tmp_path, manifest, seed=0)
