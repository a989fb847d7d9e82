"""Argument checks shared by the partitioners.

Every check raises :class:`ValueError` (or :class:`TypeError` for a wrong kind of
object) with a message that names the argument, the bad value and, where there is
one, the fix. The partitioners call these before drawing anything, so a bad call
fails before any work is done.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "check_alpha",
    "check_fraction",
    "check_int",
    "check_labels",
    "check_same_length",
    "check_seed",
]


def check_int(value: object, name: str, *, minimum: int | None = None) -> int:
    """Return ``value`` as a Python int, or raise naming ``name``.

    Booleans and integral floats are refused: ``num_clients=True`` or ``2.0`` is
    almost always a mistake in the caller.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    out = int(value)
    if minimum is not None and out < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {out}")
    return out


def check_seed(seed: object, name: str = "seed") -> int:
    """Return ``seed`` as a non-negative int; ``None`` is refused (it would not reproduce)."""
    if seed is None:
        raise ValueError(
            f"{name} must be a non-negative integer, got None; pass an explicit seed so "
            "the split can be reproduced"
        )
    return check_int(seed, name, minimum=0)


def check_labels(labels: object, name: str = "labels") -> np.ndarray:
    """Return ``labels`` as a 1-D int64 array of non-negative integers.

    Integer arrays pass; float arrays pass only when every value is a finite whole
    number (``2.0``); strings, ``1.5``, NaN, booleans and negative values raise.
    """
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind == "b":
        raise ValueError(f"{name} must hold integer class ids, got booleans")
    if arr.dtype.kind in "iu":
        out = arr.astype(np.int64, copy=False)
    elif arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must hold integer class ids, got a non-finite value")
        frac = arr != np.floor(arr)
        if np.any(frac):
            bad = arr[np.argmax(frac)].item()
            raise ValueError(f"{name} must hold integer class ids, got non-integer value {bad!r}")
        out = arr.astype(np.int64)
    elif arr.size == 0:
        out = arr.astype(np.int64)
    else:
        first = arr.flat[0]
        first = first.item() if isinstance(first, np.generic) else first
        raise ValueError(
            f"{name} must hold integer class ids, got dtype {arr.dtype} (e.g. {first!r}); "
            "map them to 0..C-1 first, e.g. with np.unique(..., return_inverse=True)"
        )
    if out.size and out.min() < 0:
        raise ValueError(f"{name} must be non-negative, got {int(out.min())}")
    return out


def check_alpha(alpha: object, name: str = "alpha", *, size: int | None = None) -> np.ndarray:
    """Return a Dirichlet concentration as a float64 array (shape ``()`` or ``(size,)``).

    Every entry must be finite and > 0. A vector must have ``size`` entries.
    """
    if isinstance(alpha, bool):
        raise ValueError(f"{name} must be a positive number, got {alpha!r}")
    try:
        arr = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {alpha!r}") from None
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a number or a 1-D vector, got shape {arr.shape}")
    if arr.ndim == 1:
        if size is None:
            raise ValueError(f"{name} must be a single number here, got a vector")
        if arr.shape[0] != size:
            raise ValueError(
                f"{name} has {arr.shape[0]} entries but there are {size} clients; "
                "give one concentration per client or a single number"
            )
    bad = ~np.isfinite(arr) | (arr <= 0)
    if np.any(bad):
        value = float(arr.flat[int(np.argmax(bad.ravel()))])
        raise ValueError(f"{name} must be > 0 and finite, got {value}")
    return arr


def check_fraction(
    value: object, name: str, *, low_open: bool = False, high_open: bool = False
) -> float:
    """Return ``value`` as a float in [0, 1] (ends excluded where asked)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    out = float(value)
    lo = "(" if low_open else "["
    hi = ")" if high_open else "]"
    if (
        not math.isfinite(out)
        or out < 0
        or out > 1
        or (low_open and out == 0)
        or (high_open and out == 1)
    ):
        raise ValueError(f"{name} must be in {lo}0, 1{hi}, got {out}")
    return out


def check_same_length(
    a: Sequence | np.ndarray, b: Sequence | np.ndarray, name_a: str, name_b: str
) -> None:
    """Raise when two per-sample arrays differ in length."""
    if len(a) != len(b):
        raise ValueError(
            f"{name_a} and {name_b} must have the same length (one entry per sample), "
            f"got {len(a)} and {len(b)}"
        )
