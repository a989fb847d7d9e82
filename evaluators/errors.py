"""Exceptions raised by the metric functions.

Both derive from :class:`drake.errors.DrakeError` (so the CLI turns them into one line and a
non-zero exit) and from :class:`ValueError` (so plain ``except ValueError`` callers keep working).
"""

from __future__ import annotations

from drake.errors import DrakeError


class MetricInputError(DrakeError, ValueError):
    """Predictions, references, curves or score tables are malformed.

    The message names the argument and, where it applies, the index or key of the bad entry.
    """


class MetricSetupError(DrakeError, ValueError):
    """A metric's resource (WordNet, a BERTScore model) is missing or cannot be loaded.

    The message says how to install or point to the resource.
    """
