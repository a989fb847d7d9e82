"""Build drake-synth at two sizes and print samples/s and peak memory of each build.

Each build runs in a fresh subprocess so its peak RSS is its own. Memory should stay flat as the
size grows, because the builder holds at most one shard per worker.

    python benchmarks/build_speed.py [--sizes small medium] [--num-proc 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from drake.build import build
from drake.registry import get_benchmark
spec = get_benchmark("drake-synth", size=sys.argv[1])
t0 = time.perf_counter()
folder = build(spec, Path(sys.argv[2]), seed=0, num_proc=int(sys.argv[3]))
dt = time.perf_counter() - t0
m = json.loads((folder / "manifest.json").read_text())
images = sum(s["images"] for t in m["tasks"].values() for s in t.values())
print(json.dumps({"rows": m["total_rows"], "images": images, "seconds": dt,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="+", default=["small", "medium"])
    parser.add_argument("--num-proc", type=int, default=1)
    args = parser.parse_args()
    print(f"{'size':8} {'rows':>7} {'images':>7} {'seconds':>8} {'samples/s':>10} "
          f"{'peak RSS MB':>12}")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([sys.executable, "-c", CHILD, size, out, str(args.num_proc)],
                                  capture_output=True, text=True, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{size:8} {r['rows']:>7} {r['images']:>7} {r['seconds']:>8.1f} "
              f"{r['rows'] / r['seconds']:>10.1f} {r['peak_rss_mb']:>12.1f}")


if __name__ == "__main__":
    main()
