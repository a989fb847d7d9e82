"""The quickstart federation over several seeds: does training help, and does sharing help?

Runs :func:`drake.quickstart.quickstart` (its default budget: drake-synth ``small``, dynamic
hetero, 4 rounds, evaluation every 2 rounds, 8 test samples per task, MC by option likelihood,
the shipped tiny models) once per seed, each seed in its own folder and process, and reads
Self / Others A_last of every method and of the untrained models (round 0 of the first
method's run). It prints mean ± std over seeds with a 95% t-interval of the mean, wall time and
peak RSS per seed, and the two checks issue #13 asks of drake-synth:

* ``sft`` Self A_last is at least 15 points above the untrained models' Self score;
* ``fedavg`` Others A_last is at least 5 points above ``sft``'s, and their 95% intervals do
  not overlap.

    python benchmarks/quickstart_seeds.py [--seeds 0 1 2] [--methods sft fedavg]
        [--jobs 1] [--out runs-quickstart] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from leaderboard.stats import summarize

_ONE = """
import json, resource, sys, time
from pathlib import Path
from drake.quickstart import quickstart
out, seed, methods = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
start = time.perf_counter()
results = quickstart(out, methods=methods, seed=seed, say=lambda *a: None)
p0 = json.loads((out / "runs" / methods[0] / "metrics.jsonl").read_text().splitlines()[0])
row = {"untrained": {"self": p0["self"], "others": p0["others"]},
       "seconds": time.perf_counter() - start,
       "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
for res in results:
    m = res["metrics"]
    row[res["method"]["name"]] = {"self": m["self_a_last"], "others": m["others_a_last"]}
(out / "seed_summary.json").write_text(json.dumps(row, indent=1))
"""


def run_seed(out: Path, seed: int, methods: list[str]) -> dict:
    """One quickstart run (cached: a finished seed folder is read back)."""
    folder = out / f"seed-{seed}"
    summary = folder / "seed_summary.json"
    if not summary.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", _ONE, str(folder), str(seed), ",".join(methods)],
                       check=True)
    return json.loads(summary.read_text())


def interval(values: list[float]) -> tuple[float, float, float, float]:
    """(mean, std, low, high): the 95% t-interval of the mean over seeds, as the leaderboard
    and `drake report` compute it (:func:`leaderboard.stats.summarize`); unbounded for one
    seed."""
    s = summarize(values)
    lo, hi = s["ci95"] if s["ci95"] is not None else (-math.inf, math.inf)
    return s["mean"], s["std"], lo, hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["sft", "fedavg"])
    parser.add_argument("--jobs", type=int, default=1, help="seeds run in parallel")
    parser.add_argument("--out", default="runs-quickstart")
    parser.add_argument("--json", default=None, help="write the summary here")
    args = parser.parse_args()
    out = Path(args.out)
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda s: run_seed(out, s, args.methods), args.seeds))
    summary: dict = {"seeds": args.seeds, "per_seed": rows, "mean": {}}
    print(f"{'':<12} {'Self A_last':>28} {'Others A_last':>28}")
    for name in ["untrained", *args.methods]:
        cells = []
        for part in ("self", "others"):
            mean, std, lo, hi = interval([r[name][part] for r in rows])
            summary["mean"].setdefault(name, {})[part] = {"mean": mean, "std": std,
                                                          "ci95": [lo, hi]}
            cells.append(f"{mean:6.1f} ± {std:4.1f} [{lo:6.1f}, {hi:6.1f}]")
        print(f"{name:<12} " + " ".join(f"{c:>28}" for c in cells))
    print("seconds per seed: " + ", ".join(f"{r['seconds']:.0f}" for r in rows)
          + "; peak RSS MB: " + ", ".join(f"{r['peak_rss_mb']:.0f}" for r in rows))
    means = summary["mean"]
    if "sft" in means:
        gain = means["sft"]["self"]["mean"] - means["untrained"]["self"]["mean"]
        summary["sft_self_gain"] = gain
        print(f"sft Self A_last - untrained Self: {gain:+.1f} points (bar: +15)")
    if "sft" in means and "fedavg" in means:
        fed, sft = means["fedavg"]["others"], means["sft"]["others"]
        gain = fed["mean"] - sft["mean"]
        apart = bool(fed["ci95"][0] > sft["ci95"][1])
        summary.update(fedavg_others_gain=gain, intervals_apart=apart)
        print(f"fedavg Others A_last - sft Others A_last: {gain:+.1f} points (bar: +5); 95% "
              f"intervals {'do not overlap' if apart else 'overlap'}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
