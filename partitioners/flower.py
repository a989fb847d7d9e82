"""Adapter: any DRAKE partition function as a ``flwr_datasets`` ``Partitioner``.

Import this module only when you use Flower: it needs ``flwr-datasets``
(``pip install 'drake-pfl[flower]'``); nothing else in :mod:`partitioners` does.
``partitioners.FunctionPartitioner`` imports it on first access.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

try:
    from datasets import Dataset
    from flwr_datasets.partitioner import Partitioner
except ImportError as exc:  # pragma: no cover - exercised only without flwr-datasets
    raise ImportError(
        "partitioners.FunctionPartitioner needs flwr-datasets; install it with "
        "pip install 'drake-pfl[flower]' (the partition functions themselves do not need it)"
    ) from exc

from .manifest import to_manifest

__all__ = ["FunctionPartitioner"]


class FunctionPartitioner(Partitioner):
    """Serve the partitions of a DRAKE partition function to Flower.

    The function is called once, on first use, with the named columns of
    ``self.dataset`` as numpy arrays (in the order given) followed by
    ``**kwargs``; with no column it gets ``len(self.dataset)`` instead (for
    :func:`partitioners.iid` and :func:`partitioners.quantity_skew`). Partition
    ``i`` is then ``self.dataset.select(indices[i])``, so rows keep the order the
    function gave (e.g. :func:`partitioners.by_task`'s task order).

    Parameters
    ----------
    partition_fn : callable
        A function returning a list of int index arrays, e.g.
        :func:`partitioners.dirichlet`.
    columns : str or sequence of str, optional
        Dataset column(s) passed positionally, e.g. ``"label"`` or
        ``("domain", "label")``.
    **kwargs
        Keyword arguments for ``partition_fn`` (``num_clients``, ``alpha``,
        ``seed``, ...).

    Examples
    --------
    >>> from datasets import Dataset
    >>> from partitioners import dirichlet
    >>> ds = Dataset.from_dict({"label": [0, 1] * 50})
    >>> p = FunctionPartitioner(dirichlet, "label", num_clients=4, alpha=0.5, seed=0, min_size=5)
    >>> p.dataset = ds
    >>> p.num_partitions, sum(len(p.load_partition(i)) for i in range(4))
    (4, 100)
    """

    def __init__(
        self,
        partition_fn: Callable[..., Sequence[np.ndarray]],
        columns: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if not callable(partition_fn):
            raise TypeError(f"partition_fn must be callable, got {partition_fn!r}")
        if columns is None:
            self._columns: tuple[str, ...] = ()
        elif isinstance(columns, str):
            self._columns = (columns,)
        else:
            self._columns = tuple(columns)
        self._partition_fn = partition_fn
        self._kwargs = dict(kwargs)
        self._indices: list[np.ndarray] | None = None

    @property
    def indices(self) -> list[np.ndarray]:
        """The index arrays of all partitions (computed once)."""
        if self._indices is None:
            dataset: Dataset = self.dataset
            missing = [c for c in self._columns if c not in dataset.column_names]
            if missing:
                raise ValueError(
                    f"columns {missing} are not in the dataset (it has {dataset.column_names})"
                )
            if self._columns:
                args: list[Any] = [np.asarray(dataset[c]) for c in self._columns]
            else:
                args = [len(dataset)]
            result = self._partition_fn(*args, **self._kwargs)
            name = getattr(self._partition_fn, "__name__", repr(self._partition_fn))
            if not isinstance(result, list | tuple) or not all(
                isinstance(p, np.ndarray) and p.ndim == 1 and (p.size == 0 or p.dtype.kind in "iu")
                for p in result
            ):
                raise TypeError(
                    f"{name} did not return a list of 1-D integer index arrays, so it cannot "
                    "serve as a Flower partitioner"
                )
            for i, p in enumerate(result):
                if p.size and (p.min() < 0 or p.max() >= len(dataset)):
                    raise ValueError(
                        f"{name} returned indices outside the dataset ({len(dataset)} rows) "
                        f"for partition {i}"
                    )
            self._indices = [p.astype(np.int64, copy=False) for p in result]
        return self._indices

    @property
    def num_partitions(self) -> int:
        """Number of partitions the function returned."""
        return len(self.indices)

    def load_partition(self, partition_id: int) -> Dataset:
        """Return partition ``partition_id`` as a ``datasets.Dataset``."""
        indices = self.indices
        if not 0 <= partition_id < len(indices):
            raise ValueError(f"partition_id must be in [0, {len(indices) - 1}], got {partition_id}")
        return self.dataset.select(indices[partition_id])

    def manifest(self, ids: Sequence[str] | None = None) -> pd.DataFrame:
        """The partition as a table (see :func:`partitioners.to_manifest`)."""
        return to_manifest(self.indices, ids)
