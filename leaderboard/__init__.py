"""A validated, traceable leaderboard of personalized-FL results.

Users submit the ``results.json`` of one or more seeds of a run; the leaderboard checks it
(schema, ranges, protocol metrics, known benchmark version, known data manifest), summarises
it over seeds (mean, sample std, Student-t 95% CI), and merges it atomically into
``leaderboard/leaderboard.json``, which also holds numbers transcribed from the papers'
tables (provenance ``reported``, with citation). Methods are ranked per benchmark and
scenario by the protocol's primary metric, with rank groups from overlapping intervals.

Modules: :mod:`~leaderboard.run_result` (the results.json contract),
:mod:`~leaderboard.model` and ``schema.json`` (entries and the file),
:mod:`~leaderboard.metrics`, :mod:`~leaderboard.benchmarks`, :mod:`~leaderboard.validate`,
:mod:`~leaderboard.submit`, :mod:`~leaderboard.ranking`, :mod:`~leaderboard.render`,
:mod:`~leaderboard.seed` and :mod:`~leaderboard.cli`.
"""

from leaderboard.errors import SubmissionError
from leaderboard.model import Entry, Leaderboard
from leaderboard.ranking import rank
from leaderboard.run_result import RunResult
from leaderboard.submit import build_entry, submit
from leaderboard.validate import load_leaderboard, validate_file

__all__ = [
    "Entry",
    "Leaderboard",
    "RunResult",
    "SubmissionError",
    "build_entry",
    "load_leaderboard",
    "rank",
    "submit",
    "validate_file",
]
