"""``drake`` commands that the grid scripts run as child processes, one run each.

A child's output goes to a log file beside its run folder (``<run>.log``), not to a pipe: a
pipe kept only the end of a failed run's errors, and stopping the grid script broke the pipe,
which killed the running child at its next write. The child still ends with the grid script
(:func:`drake.workers.exit_with_parent`), so a grid started again never finds an orphan still
writing into the run folder it resumes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: The child: ``drake ARGV...`` that ends within a second of its parent.
_CHILD = ("import sys\n"
          "from drake.workers import exit_with_parent\n"
          "exit_with_parent()\n"
          "from drake.cli import main\n"
          "sys.exit(main(sys.argv[1:]))\n")
#: Characters of a failed child's log quoted in the error.
TAIL = 3000


def log_of(run: Path) -> Path:
    """The log file of the run whose folder is ``run``: ``<run>.log`` beside it."""
    return run.with_name(run.name + ".log")


def run_drake(argv: Sequence[str], log: Path) -> None:
    """Run ``drake ARGV...`` in a fresh process, its output (stdout and stderr) appended to
    ``log`` after a line naming the command; a non-zero exit raises a ``RuntimeError`` that
    names the command and the log and quotes the log's end."""
    log.parent.mkdir(parents=True, exist_ok=True)
    command = "drake " + " ".join(argv)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {command}\n")
        out.flush()
        done = subprocess.run([sys.executable, "-c", _CHILD, *argv], stdout=out,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if done.returncode:
        tail = log.read_text(encoding="utf-8", errors="replace")[-TAIL:]
        raise RuntimeError(f"{command} failed (exit {done.returncode}); its output is in {log}, "
                           f"which ends:\n{tail}")
