"""Pure partition functions: who gets which sample, and in what order.

Labels, groups or sizes go in; a list of int64 index arrays (one per client, in
client order) comes out. Every function is deterministic for a given seed, has
no side effects, and documents the protocol it reproduces (FedAvg, NIID-Bench,
pFedMMA, FediLoRA, FedMultimodal, FedMosaic). :func:`to_manifest` and
:func:`from_manifest` turn a partition into a table that saves to parquet.

``FunctionPartitioner`` (a ``flwr_datasets`` partitioner wrapping any of these
functions) is imported on first access, so this package never needs Flower.
"""

from __future__ import annotations

from typing import Any

from .base_novel import base_novel_split
from .dirichlet import dirichlet, dirichlet_train_test
from .dirichlet_hierarchical import dirichlet_hierarchical
from .domain import by_domain, by_domain_train_test
from .iid import iid
from .manifest import from_manifest, to_manifest
from .missing import MissingCode, missing_modality
from .pathological import contiguous_class_blocks, pathological
from .quantity import quantity_skew
from .shard import shard
from .stream import Stream, stream
from .tap import TAP_LAYOUTS, split_among_holders, task_groups
from .task import by_task

__all__ = [
    "FunctionPartitioner",
    "MissingCode",
    "Stream",
    "TAP_LAYOUTS",
    "base_novel_split",
    "by_domain",
    "by_domain_train_test",
    "by_task",
    "contiguous_class_blocks",
    "dirichlet",
    "dirichlet_train_test",
    "dirichlet_hierarchical",
    "from_manifest",
    "iid",
    "missing_modality",
    "pathological",
    "quantity_skew",
    "shard",
    "split_among_holders",
    "stream",
    "task_groups",
    "to_manifest",
]


def __getattr__(name: str) -> Any:
    if name == "FunctionPartitioner":
        from .flower import FunctionPartitioner

        return FunctionPartitioner
    raise AttributeError(f"module 'partitioners' has no attribute {name!r}")
