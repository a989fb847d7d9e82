"""Image-reconstruction error: the MSE that TAP reports for its image-generation tasks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluators._arrays import to_numpy
from evaluators._validate import check_same_length
from evaluators.errors import MetricInputError

__all__ = ["mse"]


def _as_images(name: str, images: Any) -> list[np.ndarray]:
    if images is None:
        raise MetricInputError(f"{name} is None; pass a batch of images")
    if isinstance(images, Sequence) and not isinstance(images, (str, bytes)):
        out = [to_numpy(f"{name}[{i}]", im) for i, im in enumerate(images)]
    else:
        arr = to_numpy(name, images)
        if arr.ndim < 1:
            raise MetricInputError(f"{name} is a scalar; pass a batch with a leading image axis")
        out = list(arr)
    if not out:
        raise MetricInputError(f"{name} is empty; MSE over no images is undefined, not 0")
    return out


def mse(images_pred: Any, images_true: Any) -> float:
    """Mean squared error between reconstructed and true images, averaged per image.

    For each image i, ``mse_i = mean over its elements of (pred_i - true_i)^2``; the result is the
    mean of ``mse_i`` over images, so every image weighs the same even when sizes differ. Values
    are compared in the units given (e.g. pixels scaled to [0, 1] as TAP does).

    Unlike the other metrics this is an error, not a percentage: lower is better and it is not
    rescaled to 0-100, so it reads like TAP's tables.

    Parameters
    ----------
    images_pred, images_true : array-like
        A batch with the images on the first axis (numpy array or torch tensor), or a list of
        per-image arrays/tensors. Each predicted image must have its true image's shape.

    Returns
    -------
    float
        Mean per-image MSE.

    Raises
    ------
    MetricInputError
        On empty batches, a count or shape mismatch, ``None`` entries, or non-finite values.

    Examples
    --------
    >>> mse(np.zeros((2, 2, 2)), np.stack([np.zeros((2, 2)), np.full((2, 2), 2.0)]))
    2.0
    """
    preds = _as_images("images_pred", images_pred)
    trues = _as_images("images_true", images_true)
    check_same_length("images_pred", preds, "images_true", trues)
    total = 0.0
    for i, (p, t) in enumerate(zip(preds, trues)):
        if p.shape != t.shape:
            raise MetricInputError(
                f"images_pred[{i}] has shape {p.shape} but images_true[{i}] has {t.shape}"
            )
        if p.size == 0:
            raise MetricInputError(f"images_pred[{i}] has no pixels")
        try:
            diff = p.astype(np.float64) - t.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise MetricInputError(f"image {i} is not numeric: {exc}") from exc
        value = float(np.mean(diff * diff))
        if not np.isfinite(value):
            raise MetricInputError(f"image {i} holds NaN or infinite values")
        total += value
    return total / len(preds)
