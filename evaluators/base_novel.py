"""Harmonic mean of local, base and novel accuracy, as pFedMMA's tables report it."""

from __future__ import annotations

from evaluators._validate import check_number
from evaluators.errors import MetricInputError

__all__ = ["base_novel_hm"]


def _accuracy(name: str, value: float | None) -> float:
    v = check_number(name, value)
    if not 0.0 <= v <= 100.0:
        raise MetricInputError(f"{name} = {v} is outside the 0-100 accuracy scale")
    return v


def base_novel_hm(local: float | None, base: float, novel: float, *, terms: int = 3) -> float:
    """Harmonic mean of the base-to-novel accuracies.

    * ``terms=3`` (default, pFedMMA, FedPGP): ``HM = 3 / (1/local + 1/base + 1/novel)``, over each
      client's local classes, the other clients' base classes and the unseen novel classes.
    * ``terms=2`` (CoOp/CoCoOp's base-to-novel HM, also found in federated prompt papers):
      ``HM = 2 / (1/base + 1/novel)``; ``local`` does not enter and may be ``None``.

    A term of 0 makes the harmonic mean 0 (its limit). Check which variant a paper's table uses
    before comparing with it.

    Parameters
    ----------
    local : float or None
        Local-class accuracy (0-100); required when ``terms=3``.
    base, novel : float
        Base-class and novel-class accuracy (0-100).
    terms : {3, 2}
        Which harmonic mean.

    Returns
    -------
    float
        The harmonic mean on a 0-100 scale.

    Raises
    ------
    MetricInputError
        If a needed value is missing, non-finite or outside 0-100, or ``terms`` is not 2 or 3.

    Examples
    --------
    >>> round(base_novel_hm(90.0, 60.0, 45.0), 4)
    60.0
    >>> round(base_novel_hm(None, 60.0, 40.0, terms=2), 4)
    48.0
    """
    if terms == 3:
        values = [_accuracy("local", local), _accuracy("base", base), _accuracy("novel", novel)]
    elif terms == 2:
        values = [_accuracy("base", base), _accuracy("novel", novel)]
    else:
        raise MetricInputError(
            f"terms must be 3 (local, base, novel) or 2 (base, novel), got {terms!r}"
        )
    if any(v == 0.0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)
