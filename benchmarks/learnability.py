"""Can a tiny model learn a drake-synth task? LoRA on one task, held-out accuracy over steps.

For each task: a fresh LoRA (the zoo's defaults) on a pretrained tiny model trains on the task's
train split alone, and the test split is scored by option likelihood every ``--every`` steps.
It prints chance, the score before training and the curve. Use it to calibrate drake-synth's
difficulty against the models that run it offline.

    python benchmarks/learnability.py --data DIR/drake-synth --model-cache DIR
        [--model tiny-llava-qwen] [--tasks synth-spatial ...] [--steps 600] [--every 150]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch


def rows(root: Path, manifest: dict, task: str, split: str) -> list[dict]:
    out = []
    for shard in manifest["tasks"][task][split]["shards"]:
        out.extend(pq.read_table(root / shard["file"]).to_pylist())
    return out


def accuracy(bundle, samples, batch: int = 32) -> float:
    right = 0
    bundle.model.eval()
    with torch.no_grad():
        for i in range(0, len(samples), batch):
            part = samples[i:i + batch]
            for s, ll in zip(part, bundle.choice_logliks(part)):
                right += s["choices"][int(np.argmax(ll))] == s["answer"]
    return 100.0 * right / len(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-cache", required=True)
    parser.add_argument("--model", default="tiny-llava-qwen")
    parser.add_argument("--tasks", nargs="+", default=None)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--every", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--test", type=int, default=40, help="test samples per task")
    parser.add_argument("--train-vision", action="store_true",
                        help="also train the projector and the vision tower (not FedMosaic's "
                        "setup: it tells whether the frozen visual path is the bottleneck)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from drake.models import add_lora, load_model

    root = Path(args.data)
    manifest = json.loads((root / "manifest.json").read_text())
    tasks = args.tasks or [t for c in manifest["spec"]["clients"] for t in c["tasks"]]
    for task in tasks:
        test = [s for s in rows(root, manifest, task, "test") if s["choices"]][: args.test]
        train = rows(root, manifest, task, "train")
        if not test:
            print(f"{task}: open-ended, skipped")
            continue
        torch.manual_seed(0)
        bundle = load_model(args.model, cache_dir=Path(args.model_cache), pretrained=True)
        for p in bundle.model.parameters():
            p.requires_grad_(False)
        info = dict(bundle.info.lora_defaults)
        bundle.model = add_lora(bundle.model, "probe", r=info["r"], alpha=info["alpha"],
                                target_regex=info.get("target_regex"), seed=0)
        params = [p for n, p in bundle.model.named_parameters() if "lora_" in n or (
            args.train_vision and ("multi_modal_projector" in n or "vision_tower" in n))]
        for p in params:
            p.requires_grad_(True)
        opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
        rng = np.random.default_rng(0)
        chance = 100.0 * float(np.mean([1 / len(s["choices"]) for s in test]))
        curve = [accuracy(bundle, test)]
        losses = []
        for step in range(1, args.steps + 1):
            bundle.model.train()
            idx = rng.choice(len(train), size=args.batch_size, replace=len(train) < args.batch_size)
            loss = bundle.loss(bundle.collate([train[i] for i in idx], train=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if step % args.every == 0:
                curve.append(accuracy(bundle, test))
        print(f"{task:<24} chance {chance:5.1f}  acc " + " ".join(f"{a:5.1f}" for a in curve)
              + f"  (every {args.every} steps; train loss {np.mean(losses[:20]):.3f} -> "
              f"{np.mean(losses[-20:]):.3f})", flush=True)


if __name__ == "__main__":
    main()
