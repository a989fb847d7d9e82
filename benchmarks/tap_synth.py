"""TAP's Tabs. 1-3 on tap-synth: every TAP baseline with and without post-training, and TAP,
on both backbones (FLAVA's 8 tasks, ViLT's 6), over seeds.

Each run is its own ``drake eval`` (resumed by skipping runs that have results). The tables are
TAP's layout: per backbone, one row per method, one column per task, mean ± std over seeds;
image generation (MSE, lower is better; TAP's Tab. 1), image and text classification (accuracy,
Tab. 2), text generation (BERTScore F1 and METEOR, Tab. 3).

    python benchmarks/tap_synth.py --data DIR [--seeds 0 1 2] [--backbones flava vilt]
        [--rounds 4] [--local-steps 10] [--post-steps 10] [--frac 0.067] [--jobs 2]
        [--out runs-tap] [--json FILE]

``--data`` is a folder holding a built ``tap-synth`` (``drake build --benchmark tap-synth``).
``--frac 0.067`` picks 2 of the 30 clients per round, as TAP does; ``--post-steps`` is P, the
post-training iterations of "+ Post-train" and of TAP's stage 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import one_commit
from drake_child import log_of, run_drake

#: (row label, method, post-training): TAP's Tab. 1-3 rows; Local is ``sft``
ROWS = (("Local", "sft", False), ("FedAvg", "tap-fedavg", False),
        ("FedAvg + Post-train", "tap-fedavg", True),
        ("Per-FedAvg", "tap-per-fedavg", False),
        ("Per-FedAvg + Post-train", "tap-per-fedavg", True),
        ("DisentAFL", "disentafl", False), ("DisentAFL + Post-train", "disentafl", True),
        ("FedDAT", "tap-feddat", False), ("FedDAT + Post-train", "tap-feddat", True),
        ("TAP", "tap", True))
MODELS = {"flava": "tiny-tap", "vilt": "tiny-tap-vilt"}
#: (table, metric, the tap-synth views' suffixes in TAP's column order)
TABLES = (("Tab. 1 image generation (MSE, lower is better)", "mse", ("fmnist", "caltech256")),
          ("Tab. 2 classification (accuracy %)", "accuracy",
           ("tinyimagenet", "cifar100", "agnews")),
          ("Tab. 3 text generation (BERTScore F1)", "bertscore_f1", ("mmlu", "vqa", "commongen")),
          ("Tab. 3 text generation (METEOR)", "meteor", ("mmlu", "vqa", "commongen")))


def run_dir(args, backbone: str, method: str, post: bool, seed: int) -> Path:
    return Path(args.out) / f"{backbone}-{method}{'-post' if post else ''}-s{seed}"


def run_one(args, backbone: str, method: str, post: bool, seed: int) -> dict[str, dict]:
    """One run's results per view (``<backbone>-<TAP task>``)."""
    out = run_dir(args, backbone, method, post, seed)
    if not (out / "results.json").exists():
        cmd = ["eval", "--method", method, "--data", args.data,
               "--benchmark", "tap-synth", "--scenario", f"{backbone}-30", "--model",
               MODELS[backbone], "--rounds", str(args.rounds), "--local-steps",
               str(args.local_steps), "--frac", str(args.frac), "--eval-every",
               str(args.rounds), "--eval-per-task", str(args.eval_per_task), "--seed", str(seed),
               "--out", str(out)]
        if method != "sft":
            cmd += ["--hp", f"post_steps={args.post_steps if post else 0}"]
        started = time.time()
        run_drake(cmd, log_of(out))
        (out / "wall.json").write_text(json.dumps({"seconds": time.time() - started}))
    views = {}
    for path in sorted(out.glob("results*.json")):
        result = json.loads(path.read_text())
        views[result["scenario"]["name"]] = result
    return views


def _cell(values: list[float], metric: str) -> str:
    """Mean ± sample std (MSE to four decimals, as TAP's Tab. 1; the rest to two)."""
    if not values:
        return "-"
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    digits = 4 if metric == "mse" else 2
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--backbones", nargs="+", choices=sorted(MODELS),
                        default=["flava", "vilt"])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--local-steps", type=int, default=10)
    parser.add_argument("--post-steps", type=int, default=10)
    parser.add_argument("--frac", type=float, default=0.067)
    parser.add_argument("--eval-per-task", default="20")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default="runs-tap")
    parser.add_argument("--json", default=None)
    one_commit.add_argument(parser)
    args = parser.parse_args()

    grid = [(b, label, m, post, s) for b in args.backbones for label, m, post in ROWS
            for s in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda g: run_one(args, g[0], g[2], g[3], g[4]), grid))
    commit = one_commit.check(((str(run_dir(args, b, m, post, s)), result)
                               for (b, _, m, post, s), views in zip(grid, runs)
                               for result in views.values()), args.allow_mixed_commits)
    print(f"code {commit}")
    found: dict[tuple[str, str], list[dict[str, dict]]] = {}
    for (backbone, label, _, _, _), views in zip(grid, runs):
        found.setdefault((backbone, label), []).append(views)
    table_json = {}
    for backbone in args.backbones:
        for title, metric, columns in TABLES:
            names = [f"{backbone}-{c}" for c in columns]
            held = [n for n in names if any(n in v for runs_ in found.values() for v in runs_)]
            if not held:
                continue
            print(f"\n{backbone.upper()} | {title} | mean ± std over seeds {args.seeds}")
            print("| method | " + " | ".join(held) + " |")
            print("|---" * (len(held) + 1) + "|")
            for label, _, _ in ROWS:
                cells = []
                for name in held:
                    values = [v[name]["metrics"][metric] for v in found[(backbone, label)]
                              if name in v and metric in v[name]["metrics"]]
                    cells.append(_cell(values, metric))
                    table_json[f"{backbone}|{label}|{name}|{metric}"] = values
                print(f"| {label} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"code": commit, **table_json}, indent=1) + "\n")


if __name__ == "__main__":
    main()
