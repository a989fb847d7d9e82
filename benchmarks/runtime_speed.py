"""Seconds per round and client-steps per second for the quickstart federation.

drake-synth (small), dynamic hetero scenario, 10 clients (tiny-llava-llama / tiny-llava-qwen),
training only (evaluation is timed separately), untrained models unless --pretrained.

    python benchmarks/runtime_speed.py [--method fedavg] [--rounds 2] [--steps 12]
"""

from __future__ import annotations

import argparse
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--method", default="fedavg")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()
    from drake.build import build
    from drake.registry import get_benchmark
    from drake.runtime import LocalRuntime, RunConfig

    with tempfile.TemporaryDirectory() as tmp:
        folder = build(get_benchmark("drake-synth", size="small"), tmp, seed=0)
        rt = LocalRuntime(RunConfig(data=str(folder), scenario="dynamic", method=args.method,
                                    out=f"{tmp}/run", rounds=4, local_steps=args.steps,
                                    batch_size=args.batch_size, pretrained=False,
                                    eval_per_task=5))
        records, pending, errors = rt._fresh_records(), {}, []
        for r in range(args.rounds):
            t0 = time.perf_counter()
            uploads = rt.train_round(r, records, pending, errors)
            dt = time.perf_counter() - t0
            steps = len(uploads) * rt.steps if uploads else 10 * rt.steps
            print(f"round {r}: {dt:.2f} s training, {steps / dt:.1f} client-steps/s "
                  f"(batch {args.batch_size})")
        t0 = time.perf_counter()
        rt.evaluate(records, args.rounds - 1)
        n = sum(len(v) for v in rt.data.test_ids.values())
        print(f"evaluation: {time.perf_counter() - t0:.2f} s for 10 clients x {n} test samples "
              f"(generate scoring)")


if __name__ == "__main__":
    main()
