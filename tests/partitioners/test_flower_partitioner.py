"""FunctionPartitioner: the partition functions as flwr_datasets partitioners."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("flwr_datasets")
datasets = pytest.importorskip("datasets")

from partitioners import (  # noqa: E402
    FunctionPartitioner,
    by_domain,
    by_task,
    dirichlet,
    iid,
    quantity_skew,
    stream,
)


def make_dataset(n=120):
    rng = np.random.default_rng(0)
    return datasets.Dataset.from_dict(
        {
            "row": list(range(n)),
            "label": rng.integers(0, 4, n).tolist(),
            "domain": rng.choice(["clipart", "sketch"], n).tolist(),
            "task": rng.choice(["t0", "t1", "t2"], n).tolist(),
        }
    )


def rows(ds):
    return ds["row"][:]


def test_dirichlet_partitions_match_function():
    ds = make_dataset()
    p = FunctionPartitioner(dirichlet, "label", num_clients=3, alpha=0.5, seed=1, min_size=5)
    p.dataset = ds
    expected = dirichlet(np.asarray(ds["label"]), 3, 0.5, seed=1, min_size=5)
    assert p.num_partitions == 3
    for i in range(3):
        assert list(rows(p.load_partition(i))) == expected[i].tolist()


def test_no_column_passes_length():
    ds = make_dataset(50)
    p = FunctionPartitioner(iid, num_clients=5, seed=0)
    p.dataset = ds
    assert [len(p.load_partition(i)) for i in range(5)] == [10] * 5
    q = FunctionPartitioner(quantity_skew, num_clients=4, seed=0, global_test=True)
    q.dataset = make_dataset(50)
    assert q.num_partitions == 5


def test_two_columns_and_order_kept():
    ds = make_dataset()
    p = FunctionPartitioner(by_domain, ("domain", "label"), clients_per_domain=2, alpha=1.0, seed=0)
    p.dataset = ds
    assert p.num_partitions == 4
    assert set(p.load_partition(3)["domain"]) == {"sketch"}
    t = FunctionPartitioner(by_task, "task", client_tasks=[["t2", "t0"], ["t1"]])
    t.dataset = make_dataset()
    first = t.load_partition(0)
    assert first["task"][:] == sorted(first["task"][:], reverse=True)  # t2 block, then t0
    manifest = t.manifest()
    assert manifest["client"].tolist().count(1) == len(t.load_partition(1))


def test_federated_dataset_from_local_parquet(tmp_path):
    from flwr_datasets import FederatedDataset

    path = tmp_path / "train.parquet"
    make_dataset().to_parquet(str(path))
    p = FunctionPartitioner(dirichlet, "label", num_clients=4, alpha=0.3, seed=2, min_size=3)
    fds = FederatedDataset(
        dataset="parquet", data_files={"train": str(path)}, partitioners={"train": p}
    )
    sizes = [len(fds.load_partition(i, "train")) for i in range(4)]
    assert sum(sizes) == 120 and min(sizes) >= 3


def test_adapter_errors():
    ds = make_dataset()

    def as_stream(labels):
        return stream([np.arange(len(labels))], order="static", rounds=2, seed=0)

    bad = FunctionPartitioner(as_stream, "label")
    bad.dataset = ds
    with pytest.raises(TypeError, match="as_stream did not return a list of 1-D integer index"):
        bad.load_partition(0)
    outside = FunctionPartitioner(lambda n: [np.arange(n + 1)])
    outside.dataset = ds
    with pytest.raises(ValueError, match=r"indices outside the dataset \(120 rows\)"):
        outside.load_partition(0)
    missing = FunctionPartitioner(dirichlet, "fine_label", num_clients=2, alpha=1.0, seed=0)
    missing.dataset = ds
    with pytest.raises(ValueError, match=r"columns \['fine_label'\] are not in the dataset"):
        missing.num_partitions  # noqa: B018
    ok = FunctionPartitioner(iid, num_clients=2, seed=0)
    ok.dataset = ds
    with pytest.raises(ValueError, match=r"partition_id must be in \[0, 1\], got 2"):
        ok.load_partition(2)
    with pytest.raises(TypeError, match="partition_fn must be callable"):
        FunctionPartitioner("dirichlet")


def test_package_import_does_not_need_flower():
    code = "import sys, partitioners; assert 'flwr_datasets' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
