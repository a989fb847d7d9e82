"""FedMosaic's Tab. 10 on drake-synth: each method's compute per local iteration and the
parameters it holds, measured, relative to SFT, beside the paper's values.

    python benchmarks/compute_cost.py --data DIR [--methods ...] [--steps 10] [--json FILE]

Each method runs the hetero ``dynamic`` scenario with ``--steps`` local steps for every method
(not the compute-matched budget, so that one iteration means the same), 30% of the clients a
round; round 1's client training and server step are counted with PyTorch's FLOP counter
(:func:`baselines.costs.measure_compute`). ``--data`` is a built drake-synth.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from baselines.costs import measure_compute
from drake.runtime import RunConfig

#: FedMosaic's Tab. 10: relative memory M and computational cost C against SFT
PAPER = {"sft": (1.000, 1.000), "ditto": (1.052, 2.000), "fedsim": (1.052, 1.487),
         "fedavg": (1.000, 1.000), "takfl": (1.000, 1.294), "perada": (1.052, 2.294),
         "feddat": (1.104, 2.564), "feddpa": (1.052, 2.051), "fedmkt": (1.000, 1.574),
         "fedmosaic": (1.053, 1.098)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--methods", nargs="+", default=list(PAPER))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--frac", type=float, default=0.3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    methods = ["sft", *[m for m in args.methods if m != "sft"]]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for m in methods:
            cfg = RunConfig(data=args.data, scenario="dynamic", method=m, out=str(Path(tmp) / m),
                            rounds=2, local_steps=args.steps, batch_size=4, eval_per_task=1,
                            mc_scoring="loglik", frac=args.frac)
            rows[m] = measure_compute(cfg)
            print(f"measured {m}", flush=True)
    sft = rows["sft"]
    print(f"{'method':<12}{'C (client)':>11}{'C (server)':>11}{'C':>8}{'paper C':>9}{'M':>8}"
          f"{'paper M':>9}")
    out = {}
    for m, c in rows.items():
        paper_m, paper_c = PAPER.get(m, (None, None))
        out[m] = {"c_client": c.client_flops / sft.flops, "c_server": c.server_flops / sft.flops,
                  "c": c.flops / sft.flops, "m": c.params / sft.params,
                  "paper_c": paper_c, "paper_m": paper_m}
        r = out[m]
        print(f"{m:<12}{r['c_client']:11.3f}{r['c_server']:11.3f}{r['c']:8.3f}"
              f"{'' if paper_c is None else f'{paper_c:.3f}':>9}{r['m']:8.3f}"
              f"{'' if paper_m is None else f'{paper_m:.3f}':>9}")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "methods": out},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
