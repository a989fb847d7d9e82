"""Input checks shared by the metric functions.

Every check raises :class:`~evaluators.errors.MetricInputError` with the argument name and the
index of the first bad entry, so a caller can find the sample at fault. The checks are single
passes over the inputs and cost little next to the metrics themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evaluators.errors import MetricInputError

References = Sequence[str | Sequence[str]]


def check_sequence(name: str, value: Any) -> Sequence[Any]:
    """Return ``value`` if it is a non-empty list-like (not a string); raise otherwise."""
    if value is None:
        raise MetricInputError(f"{name} is None; pass a non-empty list")
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        if isinstance(value, np.ndarray) and value.ndim >= 1:
            value = value.tolist()
        else:
            raise MetricInputError(
                f"{name} must be a list, got {type(value).__name__}; wrap a single item in a list"
            )
    if len(value) == 0:
        raise MetricInputError(f"{name} is empty; a metric over no samples is undefined, not 0")
    return value


def check_same_length(name_a: str, a: Sequence[Any], name_b: str, b: Sequence[Any]) -> None:
    """Raise if the two sequences differ in length."""
    if len(a) != len(b):
        raise MetricInputError(
            f"length mismatch: {name_a} has {len(a)} items but {name_b} has {len(b)}; "
            "pass one entry per sample in both"
        )


def check_texts(name: str, texts: Any) -> Sequence[str]:
    """Check a non-empty list of strings (empty strings are allowed, ``None`` is not)."""
    texts = check_sequence(name, texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            if t is None:
                raise MetricInputError(
                    f"{name}[{i}] is None; use an empty string for an empty output"
                )
            raise MetricInputError(f"{name}[{i}] must be a str, got {type(t).__name__}")
    return texts


def check_references(name: str, references: Any, n: int) -> tuple[Sequence[Any], bool]:
    """Check references: one string, or a non-empty list of strings, per sample.

    Returns
    -------
    (references, single)
        ``single`` is True when every entry is a plain string; the input is then returned as is,
        so the common one-reference case costs no copy.
    """
    references = check_sequence(name, references)
    if len(references) != n:
        raise MetricInputError(
            f"length mismatch: predictions has {n} items but {name} has {len(references)}; "
            "pass one reference (or one list of references) per prediction"
        )
    single = True
    for i, r in enumerate(references):
        if isinstance(r, str):
            continue
        single = False
        if r is None:
            raise MetricInputError(
                f"{name}[{i}] is None; pass a string or a non-empty list of strings"
            )
        if not isinstance(r, Sequence) or isinstance(r, bytes):
            raise MetricInputError(
                f"{name}[{i}] must be a str or a list of str, got {type(r).__name__}"
            )
        if len(r) == 0:
            raise MetricInputError(f"{name}[{i}] is an empty list; give at least one reference")
        for j, rj in enumerate(r):
            if not isinstance(rj, str):
                raise MetricInputError(f"{name}[{i}][{j}] must be a str, got {type(rj).__name__}")
    return references, single


def as_reference_lists(references: Sequence[Any], single: bool) -> list[list[str]]:
    """Turn checked references into one list of strings per sample."""
    if single:
        return [[r] for r in references]
    return [[r] if isinstance(r, str) else list(r) for r in references]


def check_number(name: str, value: Any) -> float:
    """Return ``value`` as a finite float; raise naming ``name`` otherwise."""
    if value is None:
        raise MetricInputError(f"{name} is None; pass a number")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise MetricInputError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise MetricInputError(f"{name} is {v}; scores must be finite")
    return v


def check_curve(name: str, values: Any) -> np.ndarray:
    """Return a non-empty 1-D float array of finite values; raise naming the bad index."""
    values = check_sequence(name, values)
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        out[i] = check_number(f"{name}[{i}]", v)
    return out


def check_score_table(name: str, table: Mapping[Any, Any], keys: Sequence[Any]) -> dict[Any, float]:
    """Look up ``keys`` in ``table`` as finite numbers; raise naming the missing or bad key."""
    out: dict[Any, float] = {}
    for k in keys:
        if k not in table:
            raise MetricInputError(f"{name} has no score for {k!r}; evaluate it or drop it")
        out[k] = check_number(f"{name}[{k!r}]", table[k])
    return out
