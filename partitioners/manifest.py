"""A partition as a table (``index``/``id``, ``client``) that saves to parquet and reloads exactly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["from_manifest", "to_manifest"]


def to_manifest(parts: Sequence[np.ndarray], ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Turn a partition into a two-column table, one row per assigned sample.

    Rows list client 0's samples in the order of its array, then client 1's, and
    so on, so an order (e.g. from :func:`partitioners.by_task`) survives the round
    trip. The number of clients is kept in ``df.attrs["num_clients"]`` (pandas
    writes ``attrs`` into parquet metadata), so trailing empty clients survive a
    parquet round trip too.

    Parameters
    ----------
    parts : sequence of int arrays
        One index array per client.
    ids : sequence of str, optional
        Sample ids indexed by position; when given, the table has an ``id``
        column (``ids[index]``) instead of ``index``.

    Returns
    -------
    pandas.DataFrame
        Columns ``index`` (int64) or ``id`` (str), and ``client`` (int64).

    Raises
    ------
    ValueError
        If an array is not 1-D integer, or an index falls outside ``ids``.

    Examples
    --------
    >>> import numpy as np
    >>> df = to_manifest([np.array([2, 0]), np.array([1])])
    >>> df.to_dict("list")
    {'index': [2, 0, 1], 'client': [0, 0, 1]}
    >>> [p.tolist() for p in from_manifest(df)]
    [[2, 0], [1]]
    """
    arrays = []
    for i, p in enumerate(parts):
        arr = np.asarray(p)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError(f"parts[{i}] must be a 1-D integer index array")
        arrays.append(arr.astype(np.int64, copy=False))
    index = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
    client = np.repeat(np.arange(len(arrays), dtype=np.int64), [a.shape[0] for a in arrays])
    if ids is None:
        df = pd.DataFrame({"index": index, "client": client})
    else:
        id_arr = np.asarray(ids, dtype=object)
        if index.size and (index.min() < 0 or index.max() >= id_arr.shape[0]):
            raise ValueError(
                f"parts hold indices outside ids (length {id_arr.shape[0]}); pass the ids of "
                "the dataset the partition indexes"
            )
        df = pd.DataFrame({"id": id_arr[index].astype(str), "client": client})
    df.attrs["num_clients"] = len(arrays)
    return df


def from_manifest(
    df: pd.DataFrame, *, ids: Sequence[str] | None = None, num_clients: int | None = None
) -> list[np.ndarray]:
    """Rebuild the per-client arrays from a table written by :func:`to_manifest`.

    Rows are grouped by ``client`` keeping their order within a client. With an
    ``index`` column the arrays hold int64 indices. With an ``id`` column they
    hold int64 indices into ``ids`` when ``ids`` is given, and the ids themselves
    otherwise.

    Parameters
    ----------
    df : pandas.DataFrame
        A manifest (e.g. read back with ``pd.read_parquet``).
    ids : sequence of str, optional
        Sample ids by position, to map an ``id`` column back to indices.
    num_clients : int, optional
        Number of clients; default ``df.attrs["num_clients"]`` if present, else
        the largest client id plus one.

    Returns
    -------
    list of numpy.ndarray
        One array per client.

    Raises
    ------
    ValueError
        If a column is missing, a client id is negative or too large, or an id is
        not in ``ids``.
    """
    if "client" not in df.columns:
        raise ValueError("manifest has no 'client' column")
    if "index" in df.columns:
        values: np.ndarray = df["index"].to_numpy(dtype=np.int64)
    elif "id" in df.columns:
        raw = df["id"].astype(str).to_numpy(dtype=object)
        if ids is None:
            values = raw
        else:
            where = {v: i for i, v in enumerate(ids)}
            unknown = [v for v in raw if v not in where]
            if unknown:
                raise ValueError(f"manifest ids not found in ids, e.g. {unknown[0]!r}")
            values = np.fromiter((where[v] for v in raw), dtype=np.int64, count=raw.shape[0])
    else:
        raise ValueError("manifest needs an 'index' or an 'id' column")
    client = df["client"].to_numpy(dtype=np.int64)
    if client.size and client.min() < 0:
        raise ValueError(f"manifest has a negative client id {int(client.min())}")
    needed = int(client.max()) + 1 if client.size else 0
    if num_clients is None:
        num_clients = df.attrs.get("num_clients", needed)
    num_clients = int(num_clients)
    if num_clients < needed:
        raise ValueError(f"manifest has client id {needed - 1} but num_clients={num_clients}")
    if num_clients == 0:
        return []
    order = np.argsort(client, kind="stable")
    counts = np.bincount(client, minlength=num_clients)
    return list(np.split(values[order], np.cumsum(counts)[:-1]))
