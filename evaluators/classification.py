"""Top-1 classification accuracy from logits or predicted labels."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluators._arrays import to_numpy
from evaluators.errors import MetricInputError

__all__ = ["classification_accuracy"]


def classification_accuracy(logits_or_preds: Any, labels: Any) -> float:
    """Top-1 accuracy (0-100) of logits or predicted class ids against labels.

    A 2-D input of shape ``(n_samples, n_classes)`` is read as scores and its arg-max along the
    class axis is the prediction (the first class on ties); a 1-D input holds integer class ids.
    Accuracy = 100 * (number of predictions equal to their label) / n_samples.

    Parameters
    ----------
    logits_or_preds : array-like
        Logits/probabilities ``(n, C)`` or predicted ids ``(n,)``; numpy, torch or lists.
    labels : array-like
        True class ids ``(n,)``.

    Returns
    -------
    float
        Accuracy on a 0-100 scale.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch, non-integer ids, NaN logits or other shapes.

    Examples
    --------
    >>> round(classification_accuracy([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], [1, 0, 0]), 2)
    66.67
    """
    scores = to_numpy("logits_or_preds", logits_or_preds)
    y = to_numpy("labels", labels)
    if y.ndim != 1:
        raise MetricInputError(f"labels must be 1-D, got shape {y.shape}")
    if scores.ndim == 2:
        if scores.shape[1] == 0:
            raise MetricInputError("logits_or_preds has zero classes")
        if not np.issubdtype(scores.dtype, np.number):
            raise MetricInputError(f"logits_or_preds must be numeric, got {scores.dtype}")
        bad = ~np.isfinite(scores.astype(np.float64))
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise MetricInputError(f"logits_or_preds[{row}] holds NaN or infinite values")
        preds = scores.argmax(axis=1)
    elif scores.ndim == 1:
        preds = scores
    else:
        raise MetricInputError(
            f"logits_or_preds must be (n, classes) or (n,), got shape {scores.shape}"
        )
    if len(preds) == 0:
        raise MetricInputError("logits_or_preds is empty; accuracy over no samples is undefined")
    if len(preds) != len(y):
        raise MetricInputError(
            f"length mismatch: logits_or_preds has {len(preds)} samples but labels has {len(y)}"
        )
    for name, arr in (("logits_or_preds", preds), ("labels", y)):
        if arr.dtype == object:
            idx = next((i for i, v in enumerate(arr) if v is None), None)
            if idx is not None:
                raise MetricInputError(f"{name}[{idx}] is None")
            arr = arr.astype(np.float64)
        if not np.issubdtype(arr.dtype, np.integer):
            if np.issubdtype(arr.dtype, np.bool_) or not np.issubdtype(arr.dtype, np.number):
                raise MetricInputError(f"{name} must hold integer class ids, got {arr.dtype}")
            f = arr.astype(np.float64)
            bad = ~np.isfinite(f) | (f != np.round(f))
            if bad.any():
                i = int(np.argmax(bad))
                raise MetricInputError(f"{name}[{i}] = {arr[i]!r} is not an integer class id")
    return 100.0 * float(np.mean(preds.astype(np.int64) == y.astype(np.int64)))
