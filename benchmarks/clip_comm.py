"""Trainable and communicated parameters per client and round of every CLIP method on OpenAI's
ViT-B/16 CLIP shapes (built from its published config, random weights: no download), next to
pFedMMA's Tab. 7 / Tab. 21.

    python benchmarks/clip_comm.py [--model clip-vit-b16] [--clients 10]

Counts come from the methods themselves (:func:`baselines.costs.parameter_counts`: zero-step
uploads through each method's own aggregation). pFedMMA runs at the paper's Tab. 21 example
(blocks 10-12, ``--hp blocks=3``) and at its default, the config's blocks 5-12.
"""

from __future__ import annotations

import argparse

#: pFedMMA Tab. 7 / Tab. 21 (ViT-B/16): local trainable, per-round up, per-round down
PAPER = {"promptfl": (8192, 8192, 8192), "fedpgp": (12416, 8192, 8192),
         "fedotp": (16384, 8192, 8192), "pfedmoap": (74240, 8192, 73728),
         "pfedmma": (248832, 3072, 3072)}
RUNS = [("clip-zeroshot", {}), ("promptfl", {}), ("promptfl-fedprox", {}), ("fedpgp", {}),
        ("fedotp", {}), ("pfedmoap", {}), ("clip-adapter", {}), ("clip-lora", {}),
        ("pfedmma", {"blocks": 3}), ("pfedmma", {})]


def main() -> None:
    from baselines import get_method
    from baselines.costs import parameter_counts, shape_bundle

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="clip-vit-b16", choices=["clip-vit-b16", "clip-vit-b32"])
    ap.add_argument("--clients", type=int, default=10)
    args = ap.parse_args()
    print(f"{'method':<26}{'trainable':>11}{'up':>9}{'down':>9}   paper (trainable, up, down)")
    for name, hp in RUNS:
        counts = parameter_counts(get_method(name)(**hp), shape_bundle(args.model), args.model,
                                  clients=args.clients)
        label = name + "".join(f" {k}={v}" for k, v in hp.items())
        paper = PAPER.get(name)
        if name == "pfedmma" and not hp:  # the paper counts its Tab. 21 example, 3 blocks
            label, paper = label + " (blocks 5-12)", None
        print(f"{label:<26}{counts.trainable:>11,}{counts.up:>9,}{counts.down:>9,}   "
              f"{', '.join(f'{x:,}' for x in paper) if paper else '-'}")


if __name__ == "__main__":
    main()
