"""FediLoRA's Tab. 1 layout on synth-caption: every heterogeneous-rank method and the ablations,
global and personalised, at 40% and 60% missing modality, over seeds.

Each (method, missing rate, seed) is its own ``drake eval`` process. The table gives Google-BLEU
and ROUGE-Lsum (EvalAI-normalised, as FediLoRA reports them) as mean ± std over seeds, for the
personalised models on their clients' local test rows and for the server's global model on the
shared global test rows (none for SFT-like methods). ``--plot`` draws one metric against the
missing rate, and ``--leaderboard`` validates every run and submits it (all seeds as one entry)
to that leaderboard file.

    python benchmarks/fedilora_synth.py --data DIR/synth-caption [--rates 0.4 0.6]
        [--seeds 0 1 2] [--rounds 4] [--jobs 2] [--out runs-fedilora]
        [--json table.json] [--plot plot.png]
        [--leaderboard FILE --submitter NAME --link URL]

``--data`` is a built synth-caption (``drake build --benchmark synth-caption``). The tiny models
are the shipped ones unless ``--model-cache`` names a cache that ``drake models pretrain``
filled.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import one_commit
from drake_child import log_of, run_drake

#: Row name -> (method, hyper-parameters): FediLoRA's Tab. 1 methods, then its ablations
#: (no editing, editing B or both instead of A, replacing or halving instead of Eq. 8).
CONFIGS = {
    "fedavg": ("fedavg", {}),
    "hetlora": ("hetlora", {}),
    "flexlora": ("flexlora", {}),
    "flora": ("flora", {}),
    "fedilora": ("fedilora", {}),
    "fedilora-edit-none": ("fedilora", {"edit": "none"}),
    "fedilora-edit-b": ("fedilora", {"edit": "B"}),
    "fedilora-edit-both": ("fedilora", {"edit": "both"}),
    "fedilora-half": ("fedilora", {"edit_mode": "half"}),
    "fedilora-full": ("fedilora", {"edit_mode": "full"}),
}
METRICS = ("google_bleu", "rougeLsum")
VIEWS = ("global", "personalized")


def scenario(rate: float) -> str:
    """synth-caption's scenario at ``rate`` missing (0: the same split, nothing missing)."""
    return "quantity-skew-local" if rate == 0 else f"missing{rate:g}"


def run_one(args: argparse.Namespace, row: str, rate: float, seed: int) -> Path:
    method, hp = CONFIGS[row]
    out = Path(args.out) / f"{row}-{scenario(rate)}-s{seed}"
    if not (out / "results.json").exists():
        cmd = ["eval", "--method", method,
               "--data", args.data, "--scenario", scenario(rate), "--rounds", str(args.rounds),
               "--seed", str(seed), "--compute-budget", str(args.compute_budget),
               "--eval-every", str(args.rounds), "--eval-per-task", str(args.eval_per_task),
               "--out", str(out)]
        cmd += [x for k, v in hp.items() for x in ("--hp", f"{k}={v}")]
        if args.model_cache:
            cmd += ["--model-cache", args.model_cache]
        run_drake(cmd, log_of(out))
    return out


def views_of(out: Path) -> dict[str, dict]:
    """The run's results files by view kind (``global`` only when the method has one)."""
    found = {}
    for path in sorted(out.glob("results*.json")):
        res = json.loads(path.read_text())
        found[res["scenario"]["name"].rsplit("-", 1)[-1]] = res
    return found


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a built synth-caption folder")
    parser.add_argument("--model-cache", default=None)
    parser.add_argument("--rows", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--rates", nargs="+", type=float, default=[0.4, 0.6])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--compute-budget", type=int, default=20)
    parser.add_argument("--eval-per-task", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default="runs-fedilora")
    parser.add_argument("--json", default=None, help="write the table here")
    parser.add_argument("--plot", default=None, help="PNG of Google-BLEU against missing rate")
    one_commit.add_argument(parser)
    parser.add_argument("--leaderboard", default=None,
                        help="validate and submit every row (its seeds as one entry) here")
    parser.add_argument("--submitter", default=None, help="who submits (with --leaderboard)")
    parser.add_argument("--link", default=None,
                        help="https URL of the code or report (with --leaderboard)")
    args = parser.parse_args()
    if args.leaderboard and not (args.submitter and args.link):
        parser.error("--leaderboard needs --submitter and --link (the leaderboard records both)")

    jobs = [(row, rate, seed) for row in args.rows for rate in args.rates for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        outs = dict(zip(jobs, pool.map(lambda job: run_one(args, *job), jobs)))
    views = {job: views_of(out) for job, out in outs.items()}
    commit = one_commit.check(((str(outs[job]), res) for job, by_view in views.items()
                               for res in by_view.values()), args.allow_mixed_commits)
    print(f"code {commit}")
    table: dict[str, dict] = {}
    for (row, rate, _seed), by_view in views.items():
        for view, res in by_view.items():
            entry = table.setdefault(row, {}).setdefault(f"{rate:g}", {}).setdefault(view, {})
            for metric in METRICS:
                entry.setdefault(metric, []).append(res["metrics"][metric])
            entry.setdefault("wall_s", []).append(res["cost"]["wall_time_s"])
    heads = [f"{v[:4]} {m} @{r:g}" for r in args.rates for v in VIEWS for m in METRICS]
    print(f"synth-caption, FediLoRA Tab. 1 layout: {args.rounds} rounds, budget "
          f"{args.compute_budget} steps/round, seeds {args.seeds} (mean ± std)")
    print(f"{'method':<20}" + "".join(f"{h:>22}" for h in heads))
    for row in args.rows:
        cells = [cell(table[row].get(f"{r:g}", {}).get(v, {}).get(m, []))
                 for r in args.rates for v in VIEWS for m in METRICS]
        print(f"{row:<20}" + "".join(f"{c:>22}" for c in cells))
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": {
            k: v for k, v in vars(args).items()
            if k not in ("json", "plot", "leaderboard", "submitter", "link")},
            "code": commit, "table": table}, indent=1, sort_keys=True) + "\n")
    if args.plot:
        plot(table, args.rows, args.rates, Path(args.plot))
    if args.leaderboard:
        submit(args, outs)


def submit(args: argparse.Namespace, outs: dict[tuple[str, float, int], Path]) -> None:
    """One leaderboard entry per row, rate and view (personalised ``results.json``, global
    ``results-global.json``), with every seed's file of that view as its seeds."""
    submitted = 0
    for row, rate in itertools.product(args.rows, args.rates):
        names = sorted(p.name for p in outs[(row, rate, args.seeds[0])].glob("results*.json"))
        for name in names:
            files = [str(outs[(row, rate, s)] / name) for s in args.seeds]
            run_drake(["leaderboard", "submit", files[0], "--leaderboard", args.leaderboard,
                       "--data", str(Path(args.data).parent), "--submitter", args.submitter,
                       "--link", args.link, "--replace", *(["--seeds", *files[1:]]
                                                           if len(files) > 1 else [])],
                      Path(args.out) / "leaderboard-submit.log")
            submitted += 1
    print(f"submitted {submitted} entries (each with its seeds) to {args.leaderboard}")


def plot(table: dict, rows: list[str], rates: list[float], path: Path) -> None:
    """Google-BLEU (mean over seeds, std as error bars) against the missing rate, one line per
    method, one panel per view."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, view in zip(axes, VIEWS):
        for row in rows:
            xs, ys, es = [], [], []
            for rate in rates:
                values = table[row].get(f"{rate:g}", {}).get(view, {}).get("google_bleu", [])
                if values:
                    xs.append(100 * rate)
                    ys.append(statistics.mean(values))
                    es.append(statistics.stdev(values) if len(values) > 1 else 0.0)
            if xs:
                ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=row)
        ax.set_title(f"{view} model")
        ax.set_xlabel("missing modality (% of training samples)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Google-BLEU (EvalAI-normalised)")
    axes[1].legend(fontsize=7, loc="best")
    fig.suptitle("synth-caption, FediLoRA Tab. 1 setting")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
