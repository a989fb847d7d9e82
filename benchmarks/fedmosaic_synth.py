"""FedMosaic against SFT, FedAvg and the Tab. 5 ablations on drake-synth, dynamic hetero.

Runs every method with every seed as its own ``drake eval`` process (so that peak RSS is the
run's own), then prints Self / Others A_last and A_AUC as mean ± std over seeds, with wall time
and peak memory against SFT's.

    python benchmarks/fedmosaic_synth.py --data DIR --model-cache DIR [--seeds 0 1 2]
        [--rounds 8] [--jobs 2] [--out runs-fedmosaic]

``--data`` is a folder holding a built ``drake-synth`` (``drake build --benchmark drake-synth``);
``--model-cache`` holds the pretrained tiny models (``drake models pretrain``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

METHODS = ("sft", "fedavg", "fedmosaic-vanilla", "fedmosaic-pqlora", "fedmosaic")


def run_one(args, method: str, seed: int) -> dict:
    out = Path(args.out) / f"{method}-s{seed}"
    if not (out / "results.json").exists():
        cmd = [sys.executable, "-m", "drake.cli", "eval", "--method", method, "--data", args.data,
               "--benchmark", "drake-synth", "--scenario", "dynamic", "--rounds",
               str(args.rounds), "--seed", str(seed), "--eval-every", str(args.eval_every),
               "--eval-per-task", str(args.eval_per_task), "--compute-budget",
               str(args.compute_budget), "--mc-scoring", args.mc_scoring, "--lr", str(args.lr),
               "--model-cache", args.model_cache, "--out", str(out)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads((out / "results.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-cache", required=True)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--eval-per-task", type=int, default=8)
    parser.add_argument("--compute-budget", type=int, default=10)
    parser.add_argument("--mc-scoring", default="generate")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default="runs-fedmosaic")
    args = parser.parse_args()

    jobs = [(m, s) for m in args.methods for s in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: run_one(args, *job), jobs))
    by_method: dict[str, list[dict]] = {}
    for (m, _), res in zip(jobs, results):
        by_method.setdefault(m, []).append(res)

    def cell(values):
        return (f"{statistics.mean(values):6.2f} ± {statistics.stdev(values):4.2f}"
                if len(values) > 1 else f"{values[0]:6.2f}")

    keys = ("self_a_last", "self_a_auc", "others_a_last", "others_a_auc")
    print(f"drake-synth dynamic hetero, {args.rounds} rounds, seeds {args.seeds}, "
          f"MC scored by {args.mc_scoring}")
    print(f"{'method':<18}" + "".join(f"{k:>16}" for k in keys)
          + f"{'wall s':>9}{'peak MB':>9}{'+FLOPs %':>9}")
    base = by_method.get("sft")
    for m, runs in by_method.items():
        wall = statistics.mean(r["cost"]["wall_time_s"] for r in runs)
        rss = statistics.mean(r["cost"]["peak_rss_mb"] for r in runs)
        flops = runs[0]["cost"].get("flops_extra_pct")
        print(f"{m:<18}" + "".join(f"{cell([r['metrics'][k] for r in runs]):>16}" for k in keys)
              + f"{wall:9.1f}{rss:9.0f}{'' if flops is None else f'{flops:.2f}':>9}")
    if base:
        bw = statistics.mean(r["cost"]["wall_time_s"] for r in base)
        br = statistics.mean(r["cost"]["peak_rss_mb"] for r in base)
        for m, runs in by_method.items():
            if m == "sft":
                continue
            w = statistics.mean(r["cost"]["wall_time_s"] for r in runs)
            r_ = statistics.mean(r["cost"]["peak_rss_mb"] for r in runs)
            print(f"{m}: wall {100 * (w / bw - 1):+.1f}% and peak RSS {100 * (r_ / br - 1):+.1f}% "
                  f"against sft")


if __name__ == "__main__":
    main()
