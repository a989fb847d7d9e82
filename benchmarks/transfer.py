"""Does a drake-synth client gain from the other clients' data? DRAKE's premise, measured.

For each of drake-synth's ten clients, its multiple-choice tasks' held-out samples are scored by
option likelihood under three models, all the pretrained tiny model with a fresh default LoRA:

(a) **nothing**: no training;
(b) **own**: the LoRA trained on the client's own tasks (``--train-per-task`` samples each);
(c) **others**: the LoRA trained on the other nine clients' tasks pooled (the same number of
    samples per task), never on the client's own tasks.

(b) and (c) train for the same ``--steps`` at the same batch size and learning rate. Related
clients share knowledge when (c) beats (a): the other clients' tasks teach what this client's
need. The summary line counts the clients with (c) >= (a) + 5 points.

    python benchmarks/transfer.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--steps 400] [--test-per-task 50] [--jobs 2] [--json out.json]

The samples come from the generator with the shipped knobs (``drake.synth.generate_sample``, the
``train`` and ``test`` splits), as a build would write them.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import torch
from lora_probe import accuracy, lora_bundle, train

from drake.card import TRANSFER_MARGIN
from drake.workers import exit_with_parent


def _samples(tasks, split: str, count: int, seed: int) -> list[dict]:
    from drake.synth.catalog import generate_sample

    return [generate_sample(t, split, i, seed) for t in tasks for i in range(count)]


def _mc(tasks) -> list[str]:
    from drake.synth.catalog import SYNTH_TASKS

    return [t for t in tasks if SYNTH_TASKS[t].answer_type == "multiple_choice"]


def measure(client: int, args: argparse.Namespace) -> dict:
    """(a), (b) and (c) for one client."""
    torch.set_num_threads(1)
    from drake.registry import get_benchmark

    clients = get_benchmark("drake-synth").clients
    own = list(clients[client].tasks)
    others = [t for i, c in enumerate(clients) if i != client for t in c.tasks if t not in own]
    test = _samples(_mc(own), "test", args.test_per_task, args.seed)
    row = {"client": client, "tasks": _mc(own), "test_samples": len(test),
           "chance": round(100.0 * float(np.mean([1 / len(s["choices"]) for s in test])), 2)}
    start = time.perf_counter()
    for label, tasks in (("nothing", None), ("own", own), ("others", others)):
        bundle, params = lora_bundle(args.model, args.model_cache, args.seed)
        if tasks is not None:
            pool = _samples(tasks, "train", args.train_per_task, args.seed)
            train(bundle, params, pool, steps=args.steps, batch_size=args.batch_size,
                  lr=args.lr, seed=args.seed)
        row[label] = round(accuracy(bundle, test), 2)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-cache", default=None,
                        help="tiny-model cache (default: the shipped pretrained weights)")
    parser.add_argument("--model", default="tiny-llava-qwen")
    parser.add_argument("--clients", type=int, nargs="+", default=None, help="default: all")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--train-per-task", type=int, default=160,
                        help="training samples per task (drake-synth small: 160)")
    parser.add_argument("--test-per-task", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="clients measured in parallel")
    parser.add_argument("--json", default=None, help="write the table here")
    args = parser.parse_args()
    from drake.registry import get_benchmark

    clients = args.clients if args.clients is not None else list(
        range(len(get_benchmark("drake-synth").clients)))
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn"),
                             initializer=exit_with_parent) as pool:
        rows = [f.result() for f in [pool.submit(measure, c, args) for c in clients]]
    print(f"{'client':<7}{'test':>6}{'chance':>8}{'(a) none':>10}{'(b) own':>9}"
          f"{'(c) others':>12}{'c - a':>8}")
    for r in rows:
        print(f"{r['client']:<7}{r['test_samples']:>6}{r['chance']:>8.1f}{r['nothing']:>10.1f}"
              f"{r['own']:>9.1f}{r['others']:>12.1f}{r['others'] - r['nothing']:>+8.1f}")
    helped = sum(r["others"] >= r["nothing"] + TRANSFER_MARGIN for r in rows)
    print(f"{helped} of {len(rows)} clients gain {TRANSFER_MARGIN:g} points or more from the "
          "other clients' data "
          f"(mean (c) - (a): {np.mean([r['others'] - r['nothing'] for r in rows]):+.1f}, "
          f"mean (b) - (a): {np.mean([r['own'] - r['nothing'] for r in rows]):+.1f})")
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "jobs",
                                                                    "model_cache")}
        Path(args.json).write_text(json.dumps({"settings": settings, "clients": rows},
                                              indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
