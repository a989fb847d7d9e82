"""Does more pretraining on lettered and numbered questions teach the label step? (#13)

The shipped tiny models find the answer of a lettered public question but not its letter
(``benchmarks/public_formats.py``), and ``benchmarks/composition_depth.py`` finds that the
composition of a look-up with the label step needs far more composed questions than the shipped
pretraining pool holds (about 2,700 lettered and 2,700 numbered). The cheapest remedy would be
to go on from the shipped weights with many more of them. This script measures that remedy.

It continues stage 2 of ``drake models pretrain`` from a pretrained tiny model: the same loss
(answer cross-entropy plus grounding, on the frozen tower), AdamW (0.9, 0.98) without weight
decay, gradient-norm clip 1, warm-up over 100 steps and a cosine to 10% of ``--lr``. Each batch
of 32 takes ``--share`` of its samples from a *drill* pool (``synth-public-formats`` questions
in the drilled formats only, ``--pool`` of them) and the rest from a *regular* pool drawn as
stage 2 draws (``--regular``, :data:`drake.models.pretrain.TASK_SHARES`), so the other public
skills stay in training. Both pools read public indices the shipped pool never reads.

Every ``--every`` steps it scores greedy exact match per drilled format on ``--test`` held-out
questions (``test`` split) and on the first ``--test`` of the drill pool: a format that rises on
the second only was learnt by heart.

    python benchmarks/format_drill.py [--model tiny-llava-qwen] [--model-cache DIR]
        [--steps 5000] [--share 0.5] [--lr 5e-4] [--pool 16000] [--regular 16000]
        [--formats letter id] [--test 200] [--every 1000] [--seed 0] [--save DIR]

``--save DIR`` writes the drilled model to the model cache ``DIR`` (``DIR/<model>/``), where
``--model-cache DIR`` of the other benchmarks (``learnability.py``) reads it. One thread, CPU:
the defaults take about 45 minutes on the 3-layer qwen (about 5 minutes of it making and
encoding the pools).
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from public_formats import load_tiny, model_arguments, save_model_cache

pretrain = importlib.import_module("drake.models.pretrain")

#: First public index of the drill and the regular pools: far beyond any stage-2 pool's
#: (the full pool reads from 0, the easy one from ``_EASY_START``, 10**8), so neither repeats
#: a question the shipped weights trained on.
DRILL_START = 3 * 10**8
REGULAR_START = 4 * 10**8
BATCH = 32
#: Samples generated at a time while filling a drill pool.
_CHUNK = 500


def drill_samples(split: str, count: int, formats: Sequence[str], seed: int,
                  start: int = 0) -> list[dict[str, Any]]:
    """The first ``count`` ``synth-public-formats`` samples of ``split`` from index ``start``
    on whose answer format is one of ``formats`` (in index order).

    Raises
    ------
    ValueError
        Naming a format :data:`drake.synth.public.FORMATS` does not know.
    """
    from drake.synth.public import FORMATS

    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ValueError(f"unknown drill format(s) {unknown or '(none given)'}; choose among "
                         f"{', '.join(FORMATS)}")
    out: list[dict[str, Any]] = []
    index = start
    while len(out) < count:
        out += [s for s in pretrain.public_samples("synth-public-formats", split, _CHUNK, seed,
                                                   start=index)
                if pretrain._meta(s)["format"] in formats]
        index += _CHUNK
    return out[:count]


def regular_samples(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` public training samples split over the public tasks as stage 2 splits them."""
    return [sample for task, n in pretrain._shares(count).items()
            for sample in pretrain.public_samples(task, "public", n, seed, start=REGULAR_START)]


def format_scores(hits: Callable[[Sequence[dict[str, Any]]], list[bool]],
                  samples: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Exact-match accuracy (percent) of ``samples`` per answer format."""
    by_format: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        by_format.setdefault(pretrain._meta(s)["format"], []).append(s)
    return {fmt: round(100 * float(np.mean(hits(group))), 1)
            for fmt, group in sorted(by_format.items())}


def split_batch(share: float) -> tuple[int, int]:
    """(drill, regular) samples of a batch of :data:`BATCH`."""
    if not 0 <= share <= 1:
        raise ValueError(f"--share must be within [0, 1], got {share}")
    drill = int(round(BATCH * share))
    return drill, BATCH - drill


def drill(bundle: Any, pools: Sequence[Sequence[dict[str, Any]]], *, steps: int, share: float,
          lr: float, seed: int, every: int,
          on_point: Callable[[int, float], None]) -> list[float]:
    """Train ``bundle``'s projector and language model for ``steps`` batches drawn from
    ``pools`` (drill, regular) by ``share``; ``on_point(step, loss)`` at step 0 (loss nan),
    every ``every`` steps and at the end, in eval mode. Returns the losses."""
    counts = split_batch(share)
    if any(count and not pool for pool, count in zip(pools, counts, strict=True)):
        raise ValueError("a batch draws from an empty pool: raise --pool/--regular or change "
                         "--share")
    model = bundle.model
    model.requires_grad_(True)
    model.model.vision_tower.requires_grad_(False)
    encoded = [pretrain._encoded_pool(bundle, pool) if pool else None for pool in pools]
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    rng = np.random.default_rng([seed, 0xD1])
    torch.manual_seed(seed)
    losses: list[float] = []

    def point(step: int) -> None:
        model.eval()
        on_point(step, float(np.mean(losses[-100:])) if losses else float("nan"))
        model.train()

    point(0)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = pretrain._lr_at(step, steps, lr, warm=100, floor=0.1)
        loss = pretrain._pool_loss(bundle, [
            (*pool, pretrain._draw(rng, len(pool[0]), count))
            for pool, count in zip(encoded, counts, strict=True) if count])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        if (step + 1) % every == 0 or step + 1 == steps:
            point(step + 1)
    model.eval()
    model.requires_grad_(False)
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--share", type=float, default=0.5, help="drill share of each batch")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--pool", type=int, default=16000, help="drill pool size")
    parser.add_argument("--regular", type=int, default=16000, help="regular pool size")
    parser.add_argument("--formats", nargs="+", default=["letter", "id"])
    parser.add_argument("--test", type=int, default=200, help="questions scored per set")
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="write the drilled model to this cache")
    args = parser.parse_args()
    if args.steps < 1 or args.every < 1 or args.test < 1:
        parser.error("--steps, --every and --test must be at least 1")
    split_batch(args.share)

    started = time.perf_counter()
    pools = (drill_samples("public", args.pool, args.formats, args.seed, start=DRILL_START),
             regular_samples(args.regular, args.seed))
    held = drill_samples("test", args.test, args.formats, args.seed)
    trained = pools[0][:args.test]
    bundle = load_tiny(args)

    def hits(samples: Sequence[dict[str, Any]]) -> list[bool]:
        return pretrain.exact_hits(bundle, samples)

    print("step    loss  " + "  ".join(f"{f + ' ' + part:>15}" for f in args.formats
                                       for part in ("held-out", "trained")))

    def on_point(step: int, loss: float) -> None:
        h, t = format_scores(hits, held), format_scores(hits, trained)
        cells = "  ".join(f"{scores.get(f, float('nan')):>15.1f}" for f in args.formats
                          for scores in (h, t))
        print(f"{step:>5}  {loss:6.3f}  {cells}  ({time.perf_counter() - started:.0f} s)",
              flush=True)

    drill(bundle, pools, steps=args.steps, share=args.share, lr=args.lr, seed=args.seed,
          every=args.every, on_point=on_point)
    if args.save:
        folder = save_model_cache(bundle, Path(args.save), args.model, "drill.json", vars(args))
        print(f"saved to {folder} (read it with --model-cache {args.save})")


if __name__ == "__main__":
    main()
