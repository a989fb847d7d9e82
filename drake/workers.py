"""Worker processes that end with their parent.

A ``spawn`` worker of a ``ProcessPoolExecutor`` holds both ends of its task queue's pipe, so it
never sees the parent go: after ``kill -9`` of a ``drake build --num-proc 2`` its workers waited
for work for hours. :func:`exit_with_parent` (a pool ``initializer``, or the first call of a
worker's ``main``) starts a daemon thread that ends the worker within a second of its parent.
"""

from __future__ import annotations

import os
import threading
import time

POLL_SECONDS = 0.5


def exit_with_parent() -> None:
    """End this process soon after its parent exits (however the parent exits)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:  # an orphan is re-parented (to init or a subreaper)
            time.sleep(POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
