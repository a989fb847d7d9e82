"""Peak memory of one training round with 10 and with 100 clients (tiny hetero federation).

The local runtime keeps one frozen base model per architecture and swaps per-client adapter and
optimiser state, so going from 10 to 100 clients should add about 90 x (adapter + optimiser
state), not 90 model copies. Each case runs in a fresh subprocess; the script prints both the
measured increase and that expected figure.

    python benchmarks/runtime_memory.py [--method fedavg] [--steps 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys
from pathlib import Path
from drake.runtime import LocalRuntime, RunConfig
data, scenario, method, steps, out = sys.argv[1:6]
rt = LocalRuntime(RunConfig(data=data, scenario=scenario, method=method, out=out,
                            local_steps=int(steps), batch_size=2, pretrained=False))
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
records = rt._fresh_records()
uploads = rt.train_round(0, records, {}, [])
per_client = 0
for rec in records.values():
    for st in rec.adapters.values():
        per_client += sum(t.numel() * t.element_size() for t in st.values())
    for opt in rec.optim.values():
        for st in opt["state"].values():
            per_client += sum(v.numel() * v.element_size() for v in st.values()
                              if hasattr(v, "numel"))
print(json.dumps({"clients": rt.data.num_clients, "trained": len(uploads),
                  "state_bytes": per_client, "rss_after_setup_mb": base_rss,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--method", default="fedavg")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    from drake.build import build
    from drake.registry import get_benchmark
    from drake.scenarios import add_scenario
    from drake.specs import ScenarioSpec

    with tempfile.TemporaryDirectory() as tmp:
        folder = build(get_benchmark("drake-synth", size="small"), tmp, seed=0)
        rows = []
        for n in (10, 100):
            add_scenario(folder, ScenarioSpec(f"iid{n}", "iid", params={"num_clients": n}))
            proc = subprocess.run([sys.executable, "-c", CHILD, str(folder), f"iid{n}",
                                   args.method, str(args.steps), f"{tmp}/run{n}"],
                                  capture_output=True, text=True, check=True)
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    a, b = rows
    per_client = b["state_bytes"] / b["clients"] / 1e6
    print(f"{'clients':>7} {'state MB (all clients)':>23} {'peak RSS MB':>12}")
    for r in rows:
        print(f"{r['clients']:>7} {r['state_bytes'] / 1e6:>23.2f} {r['peak_rss_mb']:>12.1f}")
    print(f"peak RSS increase 10 -> 100 clients: {b['peak_rss_mb'] - a['peak_rss_mb']:.1f} MB")
    print(f"expected 90 x (adapter + optimiser state) = 90 x {per_client:.3f} MB = "
          f"{90 * per_client:.1f} MB")


if __name__ == "__main__":
    main()
