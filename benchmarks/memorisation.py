"""How much of what a pretrained tiny model answers has it learnt by heart? (#13)

Stage 2 of ``drake models pretrain`` draws its batches from a fixed pool of public samples
(``--train-size``, default 40,000): 12,000 steps of 32 see each sample about ten times. This
script scores the same greedy exact match per public family (per answer format for
``synth-public-formats``, as the pretraining report groups them) on two sets of questions:

* *trained*: the first samples of each public task's training pool (the full pool, which
  every stage-2 run draws from; with ``--fresh-samples`` they are the first ones it saw, once);
* *held out*: as many samples of the ``test`` split, which no run trains on.

A family far better on the first than on the second was learnt by heart: its training answers
are recalled, not read off the picture. Neither set is a client task's question.

    python benchmarks/memorisation.py [--model tiny-llava-qwen] [--model-cache DIR]
        [--per-task 2500] [--train-size 40000] [--seed 0]

``--train-size`` must be the one the weights were made with (the report's ``train_samples``;
the default is the shipped weights'); for ``--fresh-samples`` weights it only bounds
``--per-task``. The last line gives the mean gap and both sets' mean accuracy over the groups.
One thread, CPU; the defaults (about 15,000 questions)
take about 3 minutes on the 3-layer qwen.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from public_formats import load_tiny, model_arguments

pretrain = importlib.import_module("drake.models.pretrain")


def pool_size(task: str, train_size: int) -> int:
    """Samples of ``task`` in stage 2's full pool for ``train_size`` (the easy pool aside)."""
    count = pretrain._shares(train_size)[task]
    return count - int(round(count * pretrain.EASY_SHARE))


def trained_samples(task: str, count: int, train_size: int, seed: int) -> list[dict[str, Any]]:
    """The first ``count`` samples of ``task``'s full training pool (public split, from index
    0, as :func:`drake.models.pretrain._train_set` draws it)."""
    size = pool_size(task, train_size)
    if count > size:
        raise ValueError(f"{task}: its training pool at --train-size {train_size} holds {size} "
                         f"samples, fewer than the {count} asked; lower --per-task")
    return pretrain.public_samples(task, "public", count, seed)


def measure(hits: Callable[[Sequence[dict[str, Any]]], list[bool]],
            trained: Sequence[dict[str, Any]], held: Sequence[dict[str, Any]]
            ) -> dict[str, dict[str, float]]:
    """Per report group: accuracy (percent) on ``trained`` and ``held`` questions, their
    counts and the gap. ``hits(samples)`` says which answers are right."""
    by_set: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name, samples in (("trained", trained), ("held_out", held)):
        by_set[name] = {}
        for s in samples:  # each sample's meta is parsed once
            by_set[name].setdefault(pretrain._group(s), []).append(s)
    out: dict[str, dict[str, float]] = {}
    for group in sorted({g for groups in by_set.values() for g in groups}):
        row: dict[str, float] = {}
        for name, groups in by_set.items():
            mine = groups.get(group, [])
            row[name] = round(100 * float(np.mean(hits(mine))), 1) if mine else float("nan")
            row[f"n_{name}"] = len(mine)
        row["gap"] = round(row["trained"] - row["held_out"], 1)
        out[group] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--per-task", type=int, default=2500,
                        help="questions per public task in each set")
    parser.add_argument("--train-size", type=int, default=pretrain.DEFAULT_TRAIN_SIZE,
                        help="the --train-size the weights were pretrained with")
    parser.add_argument("--seed", type=int, default=0, help="the pretraining seed")
    args = parser.parse_args()

    bundle = load_tiny(args)
    bundle.model.eval()
    trained, held = [], []
    for task in pretrain.TASK_SHARES:
        trained += trained_samples(task, args.per_task, args.train_size, args.seed)
        held += pretrain.public_samples(task, "test", args.per_task, args.seed)
    result = measure(lambda s: pretrain.exact_hits(bundle, s), trained, held)
    print(f"{args.model}: greedy exact match (%) on its first training questions and on "
          "held-out ones, per public family or answer format")
    print(f"{'group':>16} {'trained':>8} {'held out':>8} {'gap':>6}   n")
    for group, row in result.items():
        print(f"{group:>16} {row['trained']:8.1f} {row['held_out']:8.1f} {row['gap']:+6.1f}   "
              f"{row['n_trained']}/{row['n_held_out']}")
    gaps = [row["gap"] for row in result.values()]
    means = {k: np.mean([row[k] for row in result.values()]) for k in ("trained", "held_out")}
    print(f"mean gap {np.mean(gaps):+.1f} points over {len(gaps)} groups (trained "
          f"{means['trained']:.1f}%, held out {means['held_out']:.1f}%)")


if __name__ == "__main__":
    main()
