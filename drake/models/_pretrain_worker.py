"""Worker process of :func:`drake.models.pretrain.pretrain_many`.

``python -m drake.models._pretrain_worker '<json arguments>'`` pretrains one tiny model
(:func:`drake.models.pretrain.train_family`: stage 2, its look-up stage, or both) and
writes JSON lines to stdout: ``{"step", "steps", "loss"}`` every 10 steps, then ``{"folder"}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(payload: str) -> int:
    """Pretrain the model described by ``payload`` (JSON) and report on stdout."""
    from drake.models.pretrain import train_family
    from drake.workers import exit_with_parent

    exit_with_parent()  # a killed `drake models pretrain` takes its workers with it
    args = json.loads(payload)
    name = args.pop("name")
    if "out_dir" in args:
        args["out_dir"] = Path(args["out_dir"])
    out = sys.stdout

    def report(step: int, steps: int, loss: float) -> None:
        if step % 10 == 0 or step == steps:
            out.write(json.dumps({"step": step, "steps": steps, "loss": loss}) + "\n")
            out.flush()

    folder = train_family(name, progress=report, **args)
    out.write(json.dumps({"folder": str(folder)}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m drake.models._pretrain_worker '<json arguments>'")
    raise SystemExit(main(sys.argv[1]))
