"""pFedMMA's Tab. 1 / Tab. 3 layouts on synth-cls: every CLIP method, base-to-novel and per
domain, over several seeds, on tiny-clip.

Each (method, scenario, seed) is one ``drake eval`` run of its own folder under ``--out``; a
finished run is read back, so a stopped sweep resumes where it was. It prints, per scenario,
mean ± std over seeds: Local / Base / Novel / HM (base2novel), and the accuracy averaged over
domains with each domain's (by-domain), plus the wall time of a run.

The budget is a CPU one (``--rounds``, ``--local-steps``, ``--batch-size``); pFedMMA's own is
100 rounds of one local epoch (``--preset paper``). Each method trains at its own paper's
learning rate (times ``--lr-scale``), with its own optimiser; the prompt learners start from
CoOp's ``"a photo of a"`` context (``--ctx-init ""``: the papers' 16 random vectors, which do
not recover the zero-shot accuracy within a CPU budget). The settings go into each run's
``config.json``.

    python benchmarks/clip_synth.py --data DIR [--seeds 0 1 2] [--methods ...]
        [--scenarios base2novel by-domain] [--out runs-clip-synth] [--json table.json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

METHODS = ["clip-zeroshot", "promptfl", "fedpgp", "fedotp", "pfedmoap", "clip-adapter",
           "clip-lora", "pfedmma"]
PROMPTS = {"promptfl", "promptfl-fedprox", "fedpgp", "fedotp", "pfedmoap"}


def method_lr(name: str) -> float:
    """The method's own default learning rate (its paper's)."""
    from baselines import get_method

    return float(inspect.signature(get_method(name).__init__).parameters["lr"].default)


def command(args, method: str, scenario: str, seed: int, out: Path) -> list[str]:
    # the zero-shot model trains nothing; its run still needs a positive rate
    lr = (method_lr(method) or 1e-3) * args.lr_scale
    cmd = [sys.executable, "-m", "drake.cli", "eval", "--method", method, "--data", args.data,
           "--scenario", scenario, "--seed", str(seed), "--rounds", str(args.rounds),
           "--local-steps", str(args.local_steps), "--batch-size", str(args.batch_size),
           "--lr", f"{lr:g}", "--eval-per-task", str(args.eval_per_task),
           "--eval-every", str(args.rounds), "--first-round-all", "--out", str(out)]
    if method in PROMPTS and args.ctx_init:
        cmd += ["--hp", f"ctx_init={args.ctx_init}"]
    if method == "pfedmoap":  # the gate keeps the code's 5x the prompt's rate
        cmd += ["--hp", f"gate_lr={5 * lr:g}"]
    return cmd


def run(args, method: str, scenario: str, seed: int) -> dict:
    out = Path(args.out) / scenario / method / f"seed-{seed}"
    results = out / "results.json"
    if not results.exists():
        start = time.perf_counter()
        subprocess.run(command(args, method, scenario, seed, out), check=True,
                       stdout=subprocess.DEVNULL)
        (out / "wall_s.txt").write_text(f"{time.perf_counter() - start:.1f}\n")
    row = json.loads(results.read_text())["metrics"]
    wall = out / "wall_s.txt"
    row["wall_s"] = float(wall.read_text()) if wall.exists() else float("nan")
    return row


def _describe(data: Path) -> dict:
    """The build's benchmark, seed, rows per split and number of classes."""
    import pyarrow.parquet as pq

    manifest = json.loads((data / "manifest.json").read_text())
    splits = next(iter(manifest["tasks"].values()))
    labels = {x for shard in splits["train"]["shards"]
              for x in pq.read_table(data / shard["file"], columns=["label"])["label"].to_pylist()}
    return {"benchmark": manifest["benchmark"], "seed": manifest["seed"],
            "rows": {split: v["rows"] for split, v in splits.items()}, "classes": len(labels)}


def table(rows: dict[str, list[dict]]) -> list[str]:
    keys = [k for k in rows[next(iter(rows))][0] if k != "wall_s"]
    # base2novel: the protocol's order; by-domain: the average, then the domains
    order = [k for k in ("local", "base", "novel", "hm", "accuracy") if k in keys]
    order += sorted(k for k in keys if k not in order)
    lines = [f"{'method':<18}" + "".join(f"{k:>16}" for k in order) + f"{'s/run':>8}"]
    for method, runs in rows.items():
        cells = []
        for k in order:
            x = np.array([r[k] for r in runs])
            cells.append(f"{x.mean():6.1f} ± {x.std():4.1f}".rjust(16))
        wall = np.nanmean([r["wall_s"] for r in runs])
        lines.append(f"{method:<18}" + "".join(cells) + f"{wall:8.0f}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a synth-cls build (drake build --benchmark "
                    "synth-cls)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--scenarios", nargs="+", default=["base2novel", "by-domain"])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--local-steps", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--eval-per-task", type=int, default=24)
    ap.add_argument("--lr-scale", type=float, default=1.0)
    ap.add_argument("--ctx-init", default="a photo of a")
    ap.add_argument("--out", default="runs-clip-synth")
    ap.add_argument("--json", default=None, help="also write every run's metrics here")
    args = ap.parse_args()
    everything = {}
    for scenario in args.scenarios:
        rows = {m: [run(args, m, scenario, s) for s in args.seeds] for m in args.methods}
        everything[scenario] = rows
        print(f"\nsynth-cls / {scenario}, tiny-clip, seeds {args.seeds}: mean ± std over seeds "
              f"({args.rounds} rounds x {args.local_steps} steps of {args.batch_size}, "
              f"{args.eval_per_task} test rows per set)")
        print("\n".join(table(rows)), flush=True)
    if args.json:
        settings = {k: getattr(args, k) for k in ("seeds", "rounds", "local_steps", "batch_size",
                                                  "eval_per_task", "lr_scale", "ctx_init")}
        settings["lrs"] = {m: (method_lr(m) or 1e-3) * args.lr_scale for m in args.methods}
        settings["data"] = _describe(Path(args.data))
        Path(args.json).write_text(json.dumps({"settings": settings, "scenarios": everything},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
