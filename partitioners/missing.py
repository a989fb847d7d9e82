"""Missing-modality masks: FedMultimodal's per-client rule and FediLoRA's per-sample rule."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Literal

import numpy as np

from ._validate import check_fraction, check_int, check_seed

__all__ = ["MissingCode", "missing_modality"]


class MissingCode(IntEnum):
    """What is missing from a sample (the values of the masks)."""

    INTACT = 0
    """Image and text present."""
    IMAGE_MISSING = 1
    """Image replaced by zeros (same shape)."""
    TEXT_MISSING = 2
    """Text replaced (FediLoRA: the target becomes "None None None"; FedMultimodal: zeros)."""
    BOTH_MISSING = 3
    """Both dropped; only from ``mode="per_client"``, and FedMultimodal then skips the client."""


def missing_modality(
    n_or_client_sizes: int | Sequence[int],
    rate: float,
    *,
    seed: int,
    mode: Literal["per_client", "per_sample"],
) -> list[np.ndarray]:
    """Draw which modality each training sample is missing.

    Apply this to training splits only: in both published protocols test data is
    never masked, so do not pass test sizes here.

    ``mode="per_client"`` (FedMultimodal, Feng et al., 2023): for each client in
    order, the image is dropped for the client's *whole* training set with
    probability ``rate``, and independently the text is dropped with probability
    ``rate``. The client's mask is constant: 0, 1, 2, or 3 when both are dropped
    (FedMultimodal then skips that client in training).

    ``mode="per_sample"`` (FediLoRA's released code): for a client with ``N``
    samples, exactly ``int(rate * N)`` distinct samples are chosen uniformly, and
    each of them independently gets the image zeroed (1) or the text target
    replaced (2) with probability 1/2. Code 3 never occurs.

    All draws come from one ``np.random.default_rng(seed)``, clients in order
    (FedMultimodal seeds each client by its index; FediLoRA uses 666 throughout).

    Parameters
    ----------
    n_or_client_sizes : int or sequence of int
        Training-set size of each client; a single int means one client. For a
        partition ``parts``, pass ``[len(p) for p in parts]``.
    rate : float
        Missing rate in [0, 1] (FediLoRA: 0.4, 0.6).
    seed : int
        Seed of the generator.
    mode : {"per_client", "per_sample"}
        Which rule.

    Returns
    -------
    list of numpy.ndarray
        One int8 array per client, aligned with that client's samples, holding
        :class:`MissingCode` values.

    Raises
    ------
    ValueError
        If ``rate`` is outside [0, 1], a size is negative, or ``mode`` is unknown.

    Examples
    --------
    >>> masks = missing_modality([10, 5], 0.6, seed=666, mode="per_sample")
    >>> [int((m > 0).sum()) for m in masks]
    [6, 3]
    """
    if isinstance(n_or_client_sizes, Sequence | np.ndarray) and not isinstance(
        n_or_client_sizes, str | bytes
    ):
        sizes = [
            check_int(s, f"n_or_client_sizes[{i}]", minimum=0)
            for i, s in enumerate(n_or_client_sizes)
        ]
    else:
        sizes = [check_int(n_or_client_sizes, "n_or_client_sizes", minimum=0)]
    rate = check_fraction(rate, "rate")
    seed = check_seed(seed)
    if mode not in ("per_client", "per_sample"):
        raise ValueError(f"mode must be 'per_client' or 'per_sample', got {mode!r}")
    rng = np.random.default_rng(seed)
    masks: list[np.ndarray] = []
    for size in sizes:
        if mode == "per_client":
            image_gone, text_gone = rng.random(2) < rate
            code = MissingCode.IMAGE_MISSING * int(image_gone) + MissingCode.TEXT_MISSING * int(
                text_gone
            )
            masks.append(np.full(size, code, dtype=np.int8))
        else:
            mask = np.zeros(size, dtype=np.int8)
            chosen = rng.choice(size, int(rate * size), replace=False)
            mask[chosen] = rng.integers(1, 3, size=chosen.shape[0])
            masks.append(mask)
    return masks
