"""Exceptions the suite raises; the CLI turns each into one clear line and a non-zero exit."""

from __future__ import annotations


class DrakeError(Exception):
    """Base class for every error the suite reports to a user."""


class SchemaError(DrakeError, ValueError):
    """A sample or spec does not fit the DRAKE sample schema."""


class BuildError(DrakeError):
    """A benchmark could not be built."""


class VerifyError(DrakeError):
    """A built folder does not match its manifest."""


class NetworkUnavailable(DrakeError):
    """A command needs the Hugging Face Hub and it cannot be reached."""


class DiskSpaceError(DrakeError):
    """A disk is full, or too small for what a command is about to download or write."""


class HubError(DrakeError):
    """The Hub answered, but the repo, revision or file asked for is not there (or not allowed)."""


class UnknownNameError(DrakeError, KeyError):
    """A benchmark, task, method or model name is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
