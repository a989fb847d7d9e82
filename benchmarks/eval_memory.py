"""Peak memory of `drake eval` on drake-synth builds of different sizes.

A run reads rows by id from memory-mapped Arrow copies of the shards, and only for the tasks it
uses, so its peak RSS should hardly depend on how many rows the build holds: issue #14 asks that
``large`` (2000 train / 400 test rows per task, 20000 public) cost less than 30% more than
``small`` (160 / 40, 2000). Each size is built once under ``--data`` (reused afterwards), then
one short federated run per size is measured in its own process: ``fedavg``, 1 round, 2 local
steps, untrained tiny models, every client scored on ``--eval-per-task`` samples of every task.

    python benchmarks/eval_memory.py [--sizes small large] [--data runs-memory]
        [--method fedavg] [--eval-per-task 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from drake.runtime import LocalRuntime, RunConfig
data, method, per_task, out = sys.argv[1:5]
start = time.perf_counter()
rt = LocalRuntime(RunConfig(data=data, scenario="dynamic", method=method, out=out, rounds=1,
                            local_steps=2, batch_size=2, eval_per_task=int(per_task),
                            pretrained=False, mc_scoring="loglik"))
setup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rt.run()
rows = getattr(rt.data, "rows", None) or getattr(rt.data, "_rows", {})  # older runtimes
print(json.dumps({"rows_read_index": len(rows), "rss_after_setup_mb": setup,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start}))
"""


def built(root: Path, size: str) -> Path:
    """The drake-synth build of ``size`` under ``root`` (built on first use)."""
    from drake.build import build
    from drake.registry import get_benchmark
    from drake.verify import verify

    spec = get_benchmark("drake-synth", size=size)
    folder = root / size / spec.name
    if not ((folder / "manifest.json").exists() and verify(folder).ok):
        print(f"building drake-synth {size} into {folder.parent} ...", flush=True)
        build(spec, folder.parent, seed=0, overwrite=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["small", "large"])
    parser.add_argument("--data", default="runs-memory")
    parser.add_argument("--method", default="fedavg")
    parser.add_argument("--eval-per-task", type=int, default=4)
    args = parser.parse_args()
    root = Path(args.data)
    rows = {}
    for size in args.sizes:
        folder = built(root, size)
        manifest = json.loads((folder / "manifest.json").read_text())
        out = root / "runs" / size
        if out.exists():
            import shutil

            shutil.rmtree(out)
        proc = subprocess.run([sys.executable, "-c", CHILD, str(folder), args.method,
                               str(args.eval_per_task), str(out)],
                              capture_output=True, text=True, check=True)
        rows[size] = {"build_rows": manifest["total_rows"],
                      **json.loads(proc.stdout.strip().splitlines()[-1])}
        r = rows[size]
        print(f"{size:<8} {r['build_rows']:>8} rows in the build, {r['rows_read_index']:>7} "
              f"indexed; peak RSS {r['peak_rss_mb']:7.0f} MB (after set-up "
              f"{r['rss_after_setup_mb']:.0f} MB), {r['seconds']:.0f} s", flush=True)
    first, last = args.sizes[0], args.sizes[-1]
    if first != last:
        growth = 100.0 * (rows[last]["peak_rss_mb"] / rows[first]["peak_rss_mb"] - 1.0)
        print(f"peak RSS {last} vs {first}: {growth:+.1f}% (issue #14's bar: < +30%)")


if __name__ == "__main__":
    main()
