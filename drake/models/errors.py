"""Errors of the model zoo (each names the fix)."""

from __future__ import annotations

from drake.errors import DrakeError

__all__ = ["ModelNotPretrained", "ModelLoadError"]


class ModelNotPretrained(DrakeError, FileNotFoundError):
    """A tiny model was asked for with pretrained weights that are not in the cache."""


class ModelLoadError(DrakeError):
    """A model's files were found but could not be loaded."""
