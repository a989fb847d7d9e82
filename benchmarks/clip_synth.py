"""pFedMMA's Tab. 1 / Tab. 3 layouts on synth-cls: every CLIP method, base-to-novel and per
domain, over several seeds, on tiny-clip.

Each (method, scenario, seed) is one ``drake eval`` run of its own folder under ``--out``; a
finished run is read back, so a stopped sweep resumes where it was. It prints, per scenario,
mean ± std over seeds: Local / Base / Novel / HM (base2novel), and the accuracy averaged over
domains with each domain's (by-domain), plus the wall time of a run.

The budget is a CPU one (``--rounds``, ``--local-steps``, ``--batch-size``); pFedMMA's own is
100 rounds of one local epoch (``--preset paper``). Each method trains with its own optimiser
at the learning rate of :data:`CPU_LRS`, chosen for this budget on a validation build (a
synth-cls build of another seed, whose rows no calibration build shares), never on the
calibration build's test rows: ``--validate BUILD`` first runs every trained method there at
its rate times each ``--lr-grid`` factor and keeps the best base-to-novel HM, and the JSON
records every candidate's. ``--paper-lrs`` trains at the methods' own paper rates instead
(times ``--lr-scale``). The prompt learners start from CoOp's ``"a photo of a"`` context
(``--ctx-init ""``: the papers' 16 random vectors, which do not recover the zero-shot accuracy
within a CPU budget). ``--model-cache`` runs on tiny-clip weights other than the shipped ones;
``--jobs`` runs that many at once. The settings go into each run's ``config.json``.

    python benchmarks/clip_synth.py --data DIR [--seeds 0 1 2] [--methods ...]
        [--scenarios base2novel by-domain] [--out runs-clip-synth] [--json table.json]
        [--jobs N] [--model-cache DIR] [--lr METHOD=LR ...] [--paper-lrs]
        [--validate BUILD [--lr-grid F ...]]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import one_commit
from drake_child import log_of, run_drake

METHODS = ["clip-zeroshot", "promptfl", "fedpgp", "fedotp", "pfedmoap", "clip-adapter",
           "clip-lora", "pfedmma"]
PROMPTS = {"promptfl", "promptfl-fedprox", "fedpgp", "fedotp", "pfedmoap"}
#: a run's relative cost (the scheduling order of --jobs)
SECONDS = {"clip-lora": 5, "pfedmoap": 3, "pfedmma": 3, "fedotp": 3, "fedpgp": 2,
           "promptfl": 2, "clip-adapter": 1.5, "clip-zeroshot": 0.5}
#: learning rates at this script's default budget, each the best base-to-novel HM on a
#: validation build (``drake build --benchmark synth-cls --seed 1``, seed-0 runs, every test
#: row, the shipped tiny-clip) of the previous rates times 1/3, 1 and 3: ``--validate`` chose
#: them, and drake/synth/clip_calibration.json records every candidate's HM (``lr_choice``).
#: The zero-shot model trains nothing (its run still needs a positive rate).
CPU_LRS = {"clip-zeroshot": 1e-3, "promptfl": 0.006, "fedpgp": 0.00333333, "fedotp": 0.06,
           "pfedmoap": 0.000666667, "clip-adapter": 0.5, "clip-lora": 0.03,
           "pfedmma": 0.0166667}


def method_lr(name: str) -> float:
    """The method's own default learning rate (its paper's)."""
    from baselines import get_method

    return float(inspect.signature(get_method(name).__init__).parameters["lr"].default)


def learning_rates(args) -> dict[str, float]:
    """The learning rate of each method of the run: ``--lr``, else :data:`CPU_LRS` (or with
    ``--paper-lrs`` the method's own times ``--lr-scale``)."""
    given = dict(args.lr)
    out = {}
    for m in args.methods:
        if m in given:
            out[m] = given[m]
        elif args.paper_lrs or m not in CPU_LRS:
            out[m] = (method_lr(m) or 1e-3) * args.lr_scale
        else:
            out[m] = CPU_LRS[m]
    return out


def command(args, method: str, scenario: str, seed: int, out: Path, data: str, lr: float
            ) -> list[str]:
    cmd = ["eval", "--method", method, "--data", data,
           "--scenario", scenario, "--seed", str(seed), "--rounds", str(args.rounds),
           "--local-steps", str(args.local_steps), "--batch-size", str(args.batch_size),
           "--lr", f"{lr:g}", "--eval-per-task", str(args.eval_per_task),
           "--eval-every", str(args.rounds), "--first-round-all", "--out", str(out)]
    if args.model_cache:
        cmd += ["--model-cache", args.model_cache]
    if method in PROMPTS and args.ctx_init:
        cmd += ["--hp", f"ctx_init={args.ctx_init}"]
    if method == "pfedmoap":  # the gate keeps the code's 5x the prompt's rate
        cmd += ["--hp", f"gate_lr={5 * lr:g}"]
    return cmd


def run(args, method: str, scenario: str, seed: int, lr: float | None = None) -> dict:
    """One run's metrics and wall time: on ``--data`` at the method's chosen rate, or (``lr``
    given) a validation run on ``--validate`` at that rate."""
    if lr is None:
        out = Path(args.out) / scenario / method / f"seed-{seed}"
        data, lr = args.data, args.lrs[method]
    else:
        out, data = Path(args.out) / "validation" / method / f"lr-{lr:g}", args.validate
    results = out / "results.json"
    if not results.exists():
        start = time.perf_counter()
        run_drake(command(args, method, scenario, seed, out, data, lr), log_of(out))
        (out / "wall_s.txt").write_text(f"{time.perf_counter() - start:.1f}\n")
    result = json.loads(results.read_text())
    args.used.append((str(out), result))
    row = result["metrics"]
    wall = out / "wall_s.txt"
    row["wall_s"] = float(wall.read_text()) if wall.exists() else float("nan")
    return row


def choose_lrs(args, pool) -> dict[str, dict[str, float]]:
    """``--validate``: each trained method's base-to-novel HM on the validation build (seed 0)
    at its rate times each ``--lr-grid`` factor; ``args.lrs`` becomes each method's best (ties:
    the smaller rate). Returns the HM of every candidate."""
    cells = [(m, args.lrs[m] * f) for m in args.methods if m != "clip-zeroshot"
             for f in args.lr_grid]
    cells.sort(key=lambda c: -SECONDS.get(c[0], 1))
    hms = dict(zip(cells, pool.map(lambda c: run(args, c[0], "base2novel", 0, c[1])["hm"],
                                   cells)))
    tried: dict[str, dict[str, float]] = {}
    for (m, lr), hm in sorted(hms.items()):
        tried.setdefault(m, {})[f"{lr:g}"] = round(hm, 2)
    for m, by_lr in tried.items():
        args.lrs[m] = float(max(by_lr, key=lambda lr: (by_lr[lr], -float(lr))))
    return tried


def _describe(data: Path) -> dict:
    """The build's benchmark, seed, rows per split and number of classes."""
    import pyarrow.parquet as pq

    manifest = json.loads((data / "manifest.json").read_text())
    splits = next(iter(manifest["tasks"].values()))
    labels = {x for shard in splits["train"]["shards"]
              for x in pq.read_table(data / shard["file"], columns=["label"])["label"].to_pylist()}
    return {"benchmark": manifest["benchmark"], "seed": manifest["seed"],
            "rows": {split: v["rows"] for split, v in splits.items()}, "classes": len(labels)}


def _method_lr(text: str) -> tuple[str, float]:
    method, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--lr takes METHOD=LR, got {text!r}")
    return method, float(value)


def _weights(cache: str | None) -> dict:
    """What tiny-clip was: the pretraining report of the weights the runs loaded,
    and the library versions and machine of the runs."""
    import torch
    import transformers

    from drake.models.clip_pretrain import CLIP_FOLDER
    from drake.models.shipped import SHIPPED_ROOT

    folder = Path(cache) / CLIP_FOLDER if cache else SHIPPED_ROOT / CLIP_FOLDER
    report = json.loads((folder / "pretrain_report.json").read_text())
    return {"weights_sha256": report["weights_sha256"],
            "objective": report.get("objective", "classes"),
            "held_out_accuracy": report["held_out_accuracy"],
            "tower_held_out_accuracy": report.get("tower_held_out_accuracy"),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"}


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
    ap.add_argument("--eval-per-task", default="all",
                    help="test rows per scored set, or all (default)")
    ap.add_argument("--lr", type=_method_lr, action="append", default=[],
                    metavar="METHOD=LR", help="a method's learning rate (repeatable)")
    ap.add_argument("--paper-lrs", action="store_true",
                    help="each method at its own paper's rate (times --lr-scale)")
    ap.add_argument("--lr-scale", type=float, default=1.0)
    ap.add_argument("--ctx-init", default="a photo of a")
    ap.add_argument("--model-cache", default=None,
                    help="model cache holding tiny-clip (default: the shipped weights)")
    ap.add_argument("--validate", default=None, metavar="BUILD",
                    help="choose each method's rate first: base-to-novel HM on this validation "
                    "build (another seed's synth-cls, seed-0 runs) at its rate times each "
                    "--lr-grid factor")
    ap.add_argument("--lr-grid", type=float, nargs="+", default=[1 / 3, 1, 3],
                    help="factors of --validate (default 1/3 1 3)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    ap.add_argument("--out", default="runs-clip-synth")
    ap.add_argument("--json", default=None, help="also write every run's metrics here")
    one_commit.add_argument(ap)
    args = ap.parse_args()
    args.lrs = learning_rates(args)
    args.used = []
    cells = [(m, scenario, s) for scenario in args.scenarios for m in args.methods
             for s in args.seeds]
    # the longest runs first, so that parallel jobs end together (the results do not depend
    # on the order)
    order = sorted(cells, key=lambda c: -SECONDS.get(c[0], 1) * (2 if c[1] == "base2novel"
                                                                 else 1))
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        tried = choose_lrs(args, pool) if args.validate else None
        if tried:
            print("learning rates chosen on the validation build (base-to-novel HM per rate): "
                  + "; ".join(f"{m} {args.lrs[m]:g} of {by_lr}" for m, by_lr in tried.items()),
                  flush=True)
        done = dict(zip(order, pool.map(lambda c: run(args, *c), order)))
    commit = one_commit.check(args.used, args.allow_mixed_commits)
    print(f"code {commit}")
    everything = {}
    for scenario in args.scenarios:
        rows = {m: [done[m, scenario, s] for s in args.seeds] for m in args.methods}
        everything[scenario] = rows
        print(f"\nsynth-cls / {scenario}, tiny-clip, seeds {args.seeds}: mean ± std over seeds "
              f"({args.rounds} rounds x {args.local_steps} steps of {args.batch_size}, "
              f"{args.eval_per_task} test rows per set)")
        print("\n".join(table(rows)), flush=True)
    if args.json:
        settings = {k: getattr(args, k) for k in ("seeds", "rounds", "local_steps", "batch_size",
                                                  "eval_per_task", "ctx_init")}
        settings["lrs"] = args.lrs
        if tried:
            settings["lr_choice"] = {"validation": _describe(Path(args.validate)),
                                     "hm_by_lr": tried}
        settings["paper_lrs"] = args.paper_lrs
        settings["data"] = _describe(Path(args.data))
        settings["weights"] = _weights(args.model_cache)
        settings["code"] = commit
        Path(args.json).write_text(json.dumps({"settings": settings, "scenarios": everything},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
