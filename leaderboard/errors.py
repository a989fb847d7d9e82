"""Exceptions raised by the leaderboard package.

Every refusal of a submission, a leaderboard file or a results file is a
:class:`SubmissionError`. Its message names the offending field or value and
says how to fix it; the CLI prints it as one line and exits non-zero.
"""

from __future__ import annotations

from drake.errors import DrakeError


class SubmissionError(DrakeError, ValueError):
    """A results file, entry or leaderboard file was refused.

    The message always names the field (as a dotted path where there is one),
    the bad value, and the fix.
    """
