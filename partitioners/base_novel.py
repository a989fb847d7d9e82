"""Base-to-novel class split of CoOp / pFedMMA."""

from __future__ import annotations

import numpy as np

from ._validate import check_labels

__all__ = ["base_novel_split"]


def base_novel_split(class_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split classes into base (seen in training) and novel (held out) halves.

    Algorithm (CoOp's ``subsample_classes``, used by pFedMMA): sort the distinct
    class ids, let ``m = ceil(C / 2)``; the first ``m`` are base, the rest novel.
    An odd count gives base the extra class (Flowers102: 51 base, 51 novel; DTD
    47: 24 base, 23 novel). Each subset is later relabelled ``0..k-1`` by the
    caller; this function only returns the original ids.

    Parameters
    ----------
    class_ids : array-like of int
        Class ids, with or without repeats (labels work).

    Returns
    -------
    base, novel : numpy.ndarray
        Ascending int64 class ids; ``len(base) == ceil(C / 2)``.

    Raises
    ------
    ValueError
        If there is no class, or ids are negative or non-integer.

    Examples
    --------
    >>> base, novel = base_novel_split([4, 0, 2, 1, 3, 0])
    >>> base.tolist(), novel.tolist()
    ([0, 1, 2], [3, 4])
    """
    classes = np.unique(check_labels(class_ids, "class_ids"))
    if classes.size == 0:
        raise ValueError("class_ids is empty; there is nothing to split")
    m = -(-classes.size // 2)
    return classes[:m], classes[m:]
