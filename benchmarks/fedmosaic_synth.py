"""FedMosaic's Tab. 2 (or its Tab. 5 ablations) on drake-synth, dynamic hetero.

Runs every method with every seed as its own ``drake eval`` process (so that peak RSS is the
run's own), then prints Self / Others A_last and A_AUC as mean ± std over seeds, with wall time
and peak memory against SFT's; with ``--fast-adapt N``, also each method's fast-adaptation
curve on the unseen tasks (FedMosaic's Fig. 5: the mean over architectures and unseen tasks,
from the aggregated model and from the pretrained start).

    python benchmarks/fedmosaic_synth.py --data DIR [--model-cache DIR] [--seeds 0 1 2]
        [--methods ...] [--rounds 8] [--fast-adapt N] [--jobs 2] [--out runs-fedmosaic]
        [--json FILE]

``--data`` is a folder holding a built ``drake-synth`` (``drake build --benchmark drake-synth``);
``--model-cache`` holds pretrained tiny models (default: the weights shipped with drake).
The default methods are Tab. 2's; ``--methods sft fedavg fedmosaic-vanilla fedmosaic-pqlora
fedmosaic`` gives Tab. 5's ablations.
"""

from __future__ import annotations

import argparse
import json
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import one_commit
from drake_child import log_of, run_drake

#: FedMosaic's Tab. 2 methods (FedIT is ``fedavg``)
METHODS = ("sft", "ditto", "fedsim", "fedavg", "takfl", "perada", "feddat", "feddpa", "fedmkt",
           "fedmosaic")


def run_dir(args, method: str, seed: int) -> Path:
    return Path(args.out) / f"{method}-s{seed}"


def run_one(args, method: str, seed: int) -> dict:
    out = run_dir(args, method, seed)
    if not (out / "results.json").exists():
        cmd = ["eval", "--method", method, "--data", args.data,
               "--benchmark", "drake-synth", "--scenario", "dynamic", "--rounds",
               str(args.rounds), "--seed", str(seed), "--eval-every", str(args.eval_every),
               "--eval-per-task", str(args.eval_per_task), "--compute-budget",
               str(args.compute_budget), "--mc-scoring", args.mc_scoring, "--lr", str(args.lr),
               "--out", str(out)]
        if args.model_cache:
            cmd += ["--model-cache", args.model_cache]
        if args.fast_adapt:
            cmd += ["--fast-adapt", str(args.fast_adapt), "--fast-adapt-every",
                    str(args.fast_adapt_every)]
        run_drake(cmd, log_of(out))
    return json.loads((out / "results.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-cache", default=None)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--eval-per-task", type=int, default=8)
    parser.add_argument("--compute-budget", type=int, default=10)
    parser.add_argument("--mc-scoring", default="generate")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--fast-adapt", type=int, default=0)
    parser.add_argument("--fast-adapt-every", type=int, default=5)
    parser.add_argument("--out", default="runs-fedmosaic")
    parser.add_argument("--json", default=None, help="also write the table here")
    one_commit.add_argument(parser)
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
    commit = one_commit.check(((str(run_dir(args, *job)), result)
                               for job, result in zip(jobs, results)), args.allow_mixed_commits)
    print(f"drake-synth dynamic hetero, {args.rounds} rounds, seeds {args.seeds}, "
          f"MC scored by {args.mc_scoring}, code {commit}")
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
    table = {m: {"metrics": {k: [r["metrics"][k] for r in runs] for k in keys},
                 "wall_time_s": [r["cost"]["wall_time_s"] for r in runs],
                 "peak_rss_mb": [r["cost"]["peak_rss_mb"] for r in runs]}
             for m, runs in by_method.items()}
    if args.fast_adapt:
        steps = by_method[args.methods[0]][0]["fast_adaptation"]["steps"]
        print(f"\nfast adaptation on the unseen tasks (mean over architectures and tasks; "
              f"mean ± std over seeds) at iterations {steps}")
        for m, runs in by_method.items():
            table[m]["fast_adaptation"] = {"steps": steps}
            for start in ("aggregated", "pretrained"):
                curves = [r["fast_adaptation"]["mean"][start] for r in runs]
                table[m]["fast_adaptation"][start] = curves
                label = m if start == "aggregated" else "  pretrained"
                print(f"{label:<18}" + "".join(f"{cell([c[i] for c in curves]):>16}"
                                               for i in range(len(steps))))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"settings": vars(args), "code": commit, "methods": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
