"""Time the partitioners at scale and print seconds (median of runs) and peak memory.

The headline case is ``dirichlet`` with 1,000,000 labels, 1,000 classes and 1,000
clients (FL-bench users report slow Dirichlet sampling at 500 clients); it should
take seconds, not minutes. Peak memory is the largest traced allocation during one
call (tracemalloc, which numpy reports to), measured in a separate run so tracing
does not slow the timed runs. Nothing is asserted.

    python benchmarks/partition_speed.py [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

import partitioners as P


def measure(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="only the headline dirichlet case")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    n, classes, clients = 1_000_000, 1_000, 1_000
    labels = rng.integers(0, classes, n)
    cases: list[tuple[str, Callable[[], object]]] = [
        (f"dirichlet n={n:,} C={classes} N={clients} alpha=0.5",
         lambda: P.dirichlet(labels, clients, 0.5, seed=0)),
        (f"dirichlet n={n:,} C={classes} N={clients} alpha=0.1",
         lambda: P.dirichlet(labels, clients, 0.1, seed=0)),
    ]  # fmt: skip
    if not args.quick:
        fine = np.repeat(np.arange(100), 600)
        coarse = fine // 5
        parts = P.iid(n, clients, seed=0)
        tasks = rng.integers(0, 4, n)
        cases += [
            (f"iid n={n:,} N={clients}", lambda: P.iid(n, clients, seed=0)),
            (f"shard n={n:,} N={clients} s=2", lambda: P.shard(labels, clients, 2, seed=0)),
            (f"pathological random n={n:,} C={classes} N={clients} k=2",
             lambda: P.pathological(labels, clients, 2, mode="random", seed=0)),
            (f"quantity_skew n={n:,} N={clients}", lambda: P.quantity_skew(n, clients, seed=0)),
            ("dirichlet_hierarchical CIFAR-100 n=60,000 N=100",
             lambda: P.dirichlet_hierarchical(fine, coarse, 100, 0.3, 10.0, seed=12345)),
            (f"stream static n={n:,} N={clients} rounds=20",
             lambda: P.stream(parts, order="static", rounds=20, seed=0)),
            (f"stream dynamic n={n:,} N={clients} 4 tasks x 5",
             lambda: P.stream(parts, tasks, order="dynamic", rounds_per_task=5, seed=0)),
        ]  # fmt: skip

    print(f"{'case':58} {'median s':>9} {'peak MiB':>9}")
    for name, fn in cases:
        seconds, peak = measure(fn, args.runs)
        print(f"{name:58} {seconds:9.3f} {peak:9.1f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process peak RSS: {rss:.0f} MiB (runs={args.runs})")


if __name__ == "__main__":
    main()
