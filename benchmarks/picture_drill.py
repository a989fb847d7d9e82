"""Can pretraining teach the answer position to read pictures one by one? (#13)

``benchmarks/picture_gap.py`` finds that the shipped tiny models see every picture of a
multi-picture question and know which picture each image token belongs to, but that the answer
position carries each picture only in part, and that the multi-picture twins stay at chance.
Stage 3 of ``drake models pretrain`` taught the one-picture look-up by supervising where two
attention heads of the answer position look. This script measures the same remedy for pictures.

It continues from a pretrained tiny model (stage-3 weights, such as the shipped ones) with stage
3's recipe: AdamW (0.9, 0.98) without weight decay, gradient-norm clip 1, a warm-up of 50 steps
and a cosine to 10% of ``--lr``, the frozen vision tower, stage 2's loss (answer cross-entropy
plus grounding) and stage 3's pointer loss on its look-up heads. Each batch of 32 holds:

* ``32 - --pictures`` of stage 3's own draws (a fresh stream of public questions, half of them
  look-ups, from public index 9e8 on), with the pointer on the cells their question names;
* ``--pictures`` *picture questions* (:func:`picture_question`): two to four pictures, labelled
  as the public split labels them ("Picture 2:", "Photo 2:" or not at all), and one question
  about one picture's background or look (its degradation), found by its number ("Tell me the
  kind of background in picture 2.", "Tell me how picture 3 looks.") or by what it shows ("Tell
  me the number of the picture with the noise background.", "... that looks grainy."), with an
  open answer. The pointer asks the look-up heads to attend from the answer position to the
  nine image tokens of that picture (``--no-pointer``: the questions without it).

* with ``--comparisons N``, ``N`` of the batch's stage-3 draws give way to public questions
  that compare or relate pictures and objects (:data:`COMPARISON_FAMILIES` of
  ``synth-public-multi`` and ``synth-public-formats``, read from public index 1.2e9 on), without
  the pointer. On its own (16 of 32, 1,500 steps) that mix lifted ``synth-pair-statement``
  from 53.5% to 70.0 +- 3.3% over three seeds.

* with ``--compare``, the picture questions also ask whether two numbered pictures share a
  background or a look ("Tell me if picture 1 and picture 3 look alike."; yes or no), with the
  pointer on both pictures (:data:`drake.synth.public.COMPARE_FAMILIES`).

Picture questions (:func:`drake.synth.public.picture_question`) come from their own seeded
random stream; none is a client task's question (``tests/synth/test_picture_questions.py``
checks the templates).
Afterwards it scores greedy exact match on ``--test`` fresh picture questions.

    python benchmarks/picture_drill.py [--model tiny-llava-qwen] [--model-cache DIR]
        [--steps 1200] [--pictures 16] [--comparisons 0] [--compare] [--lr 1e-3] [--seed 0]
        [--no-pointer] [--test 200]
        --save DIR

``--save DIR`` writes the drilled model to the model cache ``DIR`` (``DIR/<model>/``), where
``--model-cache DIR`` of the other benchmarks (``learnability.py``, ``picture_gap.py``) reads
it. One thread, CPU: the defaults took 1,125 s on the 3-layer qwen with two other runs
sharing the machine's two cores, and 1,620-1,720 s with three.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from public_formats import load_tiny, model_arguments, save_model_cache

from drake.models.relation_pretrain import RELATION_FAMILIES
from drake.synth.public import (
    COMPARE_FAMILIES,
    PICTURE_FAMILIES,
    PICTURE_TOKENS,
    picture_question,
)

pretrain = importlib.import_module("drake.models.pretrain")

FAMILIES = PICTURE_FAMILIES
PER_PICTURE = PICTURE_TOKENS
#: Stage 3's fresh stream starts here, far beyond any stage-2 or stage-3 pool.
STREAM_START = 9 * 10**8
BATCH = 32
WARM = 50
#: The public families that compare or relate pictures and objects (``--comparisons``): stage
#: 5's.
COMPARISON_FAMILIES = frozenset(RELATION_FAMILIES)
#: ``--comparisons`` draws from the public split from this index on, beyond every stage's pool.
COMPARISON_START = 12 * 10**8


class PictureQuestions:
    """Seeded picture questions: ``next()`` gives (sample, the asked picture's token indices
    among the sample's image tokens)."""

    def __init__(self, seed: int, prefix: str = "picture", compare: bool = False) -> None:
        self.rng = np.random.default_rng(77 + seed)
        self.prefix = prefix
        self.made = 0
        self.families = PICTURE_FAMILIES + (COMPARE_FAMILIES if compare else ())

    def next(self) -> tuple[dict[str, Any], list[int]]:
        self.made += 1
        return picture_question(self.rng, f"{self.prefix}-{self.made}", task=self.prefix,
                                families=self.families)


class ComparisonQuestions:
    """Seeded public questions of :data:`COMPARISON_FAMILIES`: 30% from ``synth-public-multi``,
    the rest from ``synth-public-formats`` (its other phrasings), read in index order from
    :data:`COMPARISON_START` on and kept when their family compares or relates."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(5 + seed)
        self.seed = seed
        self.next_index = {"synth-public-multi": COMPARISON_START,
                           "synth-public-formats": COMPARISON_START}

    def next(self) -> dict[str, Any]:
        task = "synth-public-multi" if self.rng.random() < 0.3 else "synth-public-formats"
        while True:
            index = self.next_index[task]
            self.next_index[task] += 1
            sample = pretrain.public_samples(task, "public", 1, self.seed, start=index)[0]
            if pretrain._meta(sample).get("family") in COMPARISON_FAMILIES:
                return sample


def drill(bundle: Any, *, steps: int, pictures: int, lr: float, seed: int,
          pointer: bool = True, batch: int = BATCH, comparisons: int = 0,
          compare: bool = False, say=print) -> list[float]:
    """Train ``bundle``'s model in place (see the module docstring): ``pictures`` of every
    ``batch`` samples are picture questions and ``comparisons`` are public comparison
    questions (without the pointer). Returns each step's loss.
    ``torch.manual_seed(seed)`` is the caller's."""
    from drake.models.lookup_pretrain import POINTER_HEADS, named_cells, pointer_loss

    if not 0 < pictures <= batch:
        raise SystemExit(f"--pictures {pictures}: give 1 to {batch} picture questions per batch")
    if comparisons < 0 or pictures + comparisons > batch:
        raise SystemExit(f"--comparisons {comparisons}: give 0 to {batch - pictures} "
                         f"(with --pictures {pictures}, in a batch of {batch})")
    model = bundle.model
    model.requires_grad_(True)
    model.model.vision_tower.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    model.train()
    stream = pretrain._FreshStream(seed, STREAM_START, None, focus_share=0.5, focus="lookup")
    questions = PictureQuestions(seed, compare=compare)
    compared = ComparisonQuestions(seed)
    heads = POINTER_HEADS[bundle.info.name]
    losses: list[float] = []
    start = time.perf_counter()
    try:
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = pretrain._lr_at(step, steps, lr, warm=WARM, floor=0.1)
            own = batch - pictures - comparisons
            regular = pretrain._fresh_samples(seed, None, stream.plan(own)) if own else []
            drawn = [questions.next() for _ in range(pictures)]
            extras = [compared.next() for _ in range(comparisons)]
            samples = regular + [s for s, _ in drawn] + extras
            cells = ([named_cells(s) for s in regular]
                     + [tuple(c) if pointer else () for _, c in drawn] + [() for _ in extras])
            items, inputs = pretrain._prepare(bundle, samples)
            feats, words = pretrain._Features(bundle, inputs).rows(range(len(samples)))

            def extra(attentions, items=items, cells=cells):
                return pointer_loss(attentions, items, cells, bundle.image_token_id, heads)

            loss = pretrain._language_loss(bundle, items, feats, words, extra=extra)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            losses.append(float(loss.detach()))
            if (step + 1) % 100 == 0:
                say(f"step {step + 1}: loss {np.mean(losses[-100:]):.3f} "
                    f"({time.perf_counter() - start:.0f} s)")
    finally:
        model.eval()
        model.set_attn_implementation(before)
        model.requires_grad_(False)
    return losses


def exact_match(bundle: Any, count: int, seed: int, compare: bool = False) -> dict[str, float]:
    """Greedy exact match on ``count`` fresh picture questions (their own stream, seeded apart
    from training's) of the families the drill trains (``compare``: also
    :data:`COMPARE_FAMILIES`), per family and overall."""
    questions = PictureQuestions(10**6 + seed, prefix="picture-test", compare=compare)
    samples = [questions.next()[0] for _ in range(count)]
    outputs = bundle.generate(samples, max_new_tokens=3, batch_size=32)
    right: dict[str, list[bool]] = {}
    for sample, output in zip(samples, outputs):
        family = json.loads(sample["meta"])["family"]
        right.setdefault(family, []).append(output.strip() == sample["answer"])
    scores = {f: float(np.mean(v)) for f, v in sorted(right.items())}
    scores["all"] = float(np.mean([x for v in right.values() for x in v]))
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    model_arguments(parser)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--pictures", type=int, default=16,
                        help="picture questions in each batch of 32")
    parser.add_argument("--comparisons", type=int, default=0,
                        help="public comparison questions in each batch (of the rest)")
    parser.add_argument("--compare", action="store_true",
                        help="picture questions also compare two pictures' backgrounds or looks")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-pointer", action="store_true")
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--save", required=True, help="model cache to write the model to")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    bundle = load_tiny(args)
    scored = {"count": args.test, "seed": args.seed, "compare": args.compare}
    print(f"before: picture questions {exact_match(bundle, **scored)}", flush=True)
    drill(bundle, steps=args.steps, pictures=args.pictures, lr=args.lr, seed=args.seed,
          pointer=not args.no_pointer, comparisons=args.comparisons, compare=args.compare,
          say=lambda line: print(line, flush=True))
    print(f"after: picture questions {exact_match(bundle, **scored)}")
    folder = save_model_cache(bundle, Path(args.save), args.model, "drill.json", vars(args))
    print(f"saved to {folder} (read it with --model-cache {args.save})")


if __name__ == "__main__":
    main()
