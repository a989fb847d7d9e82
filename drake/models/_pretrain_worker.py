"""Worker process of :func:`drake.models.pretrain.pretrain_many`.

``python -m drake.models._pretrain_worker '<json arguments>'`` runs the language and focus
stages of one tiny model and writes JSON lines to stdout: ``{"step", "steps", "loss"}`` every
10 steps (counted over both stages), then ``{"folder"}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(payload: str) -> int:
    """Pretrain the model described by ``payload`` (JSON) and report on stdout."""
    from drake.models.pretrain import language_stages
    from drake.workers import exit_with_parent

    exit_with_parent()  # a killed `drake models pretrain` takes its workers with it
    args = json.loads(payload)
    name = args.pop("name")
    focus = args.pop("focus", None)
    if "out_dir" in args:
        args["out_dir"] = Path(args["out_dir"])
    out = sys.stdout

    def report(step: int, steps: int, loss: float) -> None:
        if step % 10 == 0 or step == steps:
            out.write(json.dumps({"step": step, "steps": steps, "loss": loss}) + "\n")
            out.flush()

    folder = language_stages(name, args, focus, progress=report)
    out.write(json.dumps({"folder": str(folder)}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m drake.models._pretrain_worker '<json arguments>'")
    raise SystemExit(main(sys.argv[1]))
