"""Conversion of array-likes (numpy arrays, torch tensors, nested lists) to numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluators.errors import MetricInputError


def to_numpy(name: str, value: Any) -> np.ndarray:
    """Return ``value`` as a numpy array without importing torch.

    Torch tensors are detached and moved to the CPU first; ``None`` raises.
    """
    if value is None:
        raise MetricInputError(f"{name} is None; pass an array, a tensor or a list")
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise MetricInputError(f"{name} cannot be read as an array: {exc}") from exc
