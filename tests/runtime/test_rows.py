"""RowStore: rows by id from memory-mapped Arrow copies, equal to the parquet rows."""

import json

import pyarrow.parquet as pq
import pytest

from drake.build import build
from drake.errors import DrakeError
from drake.registry import get_benchmark
from drake.runtime.data import FederatedData
from drake.runtime.rows import RowStore


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("d"), seed=1)


def _shards(data, *tasks):
    manifest = json.loads((data / "manifest.json").read_text())
    return [s for t in tasks for info in manifest["tasks"][t].values() for s in info["shards"]]


def test_rows_by_id_equal_the_parquet_rows_in_the_order_asked(data, tmp_path):
    shards = _shards(data, "synth-spatial", "synth-count-easy")
    store = RowStore(data, shards, cache=tmp_path / "arrow")
    truth = {r["id"]: r for s in shards for r in pq.read_table(data / s["file"]).to_pylist()}
    assert len(store) == len(truth)
    ids = sorted(truth)[::-3] + [sorted(truth)[0]] * 2
    assert store.get(ids) == [truth[i] for i in ids]
    assert {store.task_of[i] for i in ids} == {"synth-spatial", "synth-count-easy"}
    # one Arrow copy per shard, named by its sha256, reused by a second store
    copies = sorted(p.name for p in (tmp_path / "arrow").iterdir())
    assert copies == sorted(f"{s['sha256']}.arrow" for s in shards)
    again = RowStore(data, shards, cache=tmp_path / "arrow")
    assert again.get(ids[:3]) == [truth[i] for i in ids[:3]]
    with pytest.raises(KeyError, match="no sample 'nope'"):
        store.get(["nope"])
    with pytest.raises(DrakeError, match="ids must be unique"):
        RowStore(data, shards + shards[:1], cache=tmp_path / "arrow")


def test_federated_data_reads_only_the_client_tasks(data):
    fd = FederatedData(data, "dynamic")
    spec = fd.spec
    held = set(fd.rows.task_of.values())
    assert not held & set(spec["unseen_tasks"]) and not held & set(spec["public_tasks"])
    assert held == {t for tasks in fd.client_tasks for t in tasks}
    public = fd.public_samples(5)
    assert len(public) == 5 and all(s["task"] in spec["public_tasks"] for s in public)
