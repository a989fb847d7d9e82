"""to_manifest / from_manifest: a partition saved to parquet and reloaded exactly."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partitioners import by_task, dirichlet, from_manifest, to_manifest

partitions = st.lists(
    st.lists(st.integers(0, 999), max_size=30).map(lambda x: np.array(x, dtype=np.int64)),
    min_size=0,
    max_size=6,
)


def same(a, b):
    return len(a) == len(b) and all(
        x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b, strict=True)
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=partitions)
def test_roundtrip_parquet_any_partition(parts, tmp_path):
    path = tmp_path / "p.parquet"
    to_manifest(parts).to_parquet(path)
    assert same(from_manifest(pd.read_parquet(path)), parts)


def test_roundtrip_keeps_order_and_trailing_empty_clients(tmp_path):
    tasks = np.array(["b", "a", "b", "c", "a"])
    parts = [*by_task(tasks, [["b", "a"], ["c"]]), np.empty(0, dtype=np.int64)]
    df = to_manifest(parts)
    assert list(df.columns) == ["index", "client"]
    assert df["index"].tolist() == [0, 2, 1, 4, 3]
    df.to_parquet(tmp_path / "m.parquet")
    back = from_manifest(pd.read_parquet(tmp_path / "m.parquet"))
    assert same(back, parts)
    # Without the attrs, num_clients restores the trailing empty client.
    plain = pd.DataFrame({"index": df["index"], "client": df["client"]})
    assert len(from_manifest(plain)) == 2
    assert same(from_manifest(plain, num_clients=3), parts)


def test_roundtrip_with_ids(tmp_path):
    labels = np.repeat(np.arange(4), 10)
    ids = [f"sample-{i:03d}" for i in range(40)]
    parts = dirichlet(labels, 3, 0.5, seed=0, min_size=2)
    df = to_manifest(parts, ids)
    assert list(df.columns) == ["id", "client"]
    df.to_parquet(tmp_path / "m.parquet")
    read = pd.read_parquet(tmp_path / "m.parquet")
    assert same(from_manifest(read, ids=ids), parts)
    as_ids = from_manifest(read)
    assert [a.tolist() for a in as_ids] == [[ids[i] for i in p] for p in parts]


@pytest.mark.parametrize(
    ("df", "kwargs", "match"),
    [
        (pd.DataFrame({"index": [0]}), {}, "no 'client' column"),
        (pd.DataFrame({"x": [0], "client": [0]}), {}, "needs an 'index' or an 'id' column"),
        (pd.DataFrame({"index": [0], "client": [-1]}), {}, "negative client id"),
        (
            pd.DataFrame({"index": [0], "client": [3]}),
            dict(num_clients=2),
            "client id 3 but num_clients=2",
        ),
        (pd.DataFrame({"id": ["q"], "client": [0]}), dict(ids=["a"]), "manifest ids not found"),
    ],
)
def test_from_manifest_bad_input(df, kwargs, match):
    with pytest.raises(ValueError, match=match):
        from_manifest(df, **kwargs)


def test_to_manifest_bad_input():
    with pytest.raises(ValueError, match=r"parts\[0\] must be a 1-D integer index array"):
        to_manifest([np.array([0.5])])
    with pytest.raises(ValueError, match="indices outside ids"):
        to_manifest([np.array([3])], ids=["a", "b"])
