"""Stage 6 of ``drake models pretrain`` (``--picture-steps N``, after stage 3 or alone with
``--picture-only``): teach the answer position to read several pictures one by one.

After stage 3 the tiny families see every picture of a multi-picture question, and their image
tokens say which picture they belong to, but the answer position carries each picture's content
only in part, and the multi-picture client twins stay at chance under a client's LoRA
(``benchmarks/picture_gap.py``; ``synth-triple-style`` 46.5%, chance 50; issue #13). This stage
goes on from a family's stage-3 weights with :data:`DEFAULT_PICTURE_SHARE` of every step's
samples its own questions, the rest drawn as stage 3 draws them (with its look-up pointer).
Every second own question is a *picture question*
(:func:`drake.synth.public.picture_question`): two to four pictures and a question about one
picture's background or look, found by its number or by what it shows, with stage 3's pointer
loss from the answer position to that picture's nine image tokens (:func:`pointer_cells`). The
others are stage 5's relation questions (:func:`drake.models.relation_pretrain.relation_sample`,
from a range of their own), without a pointer. Stage 2's answer and grounding losses apply to
all; the optimiser, schedule (warm-up :data:`PICTURE_WARM`), checkpoints and report are stage
3's (:func:`drake.models.lookup_pretrain.run_attention_stage`), and the report gains
``picture_stage``.

Measured (issue #13; the calibration's settings, ``benchmarks/learnability.py --model-cache
DIR --test 200``, on ``tiny-llava-qwen`` from the stage-3 weights shipped before stage 4,
1,200 steps of 32).
As a drill outside the package (``benchmarks/picture_drill.py --pictures 11 --comparisons
10``, seeds 0 and 1) the recipe took ``synth-quality-triple`` from 38.5% to 53.0 and 54.0%
(chance 33.3) and ``synth-triple-style`` from 46.5% to 62.5 and 85.5%. This stage's first run
(seed 0, both families at once, 29 minutes on two cores) did not keep those gains: over the
whole calibration 7 of 38 tasks gain 15 points or more (shipped: 8), ``synth-triple-style``
53.5%, ``synth-quality-triple`` 44.0%, and the counting tasks lose (``synth-count-easy`` 66.0%
from 78.0%); on ``tiny-llava-llama`` neither multi-picture twin moves. The shipped weights have
not been through it: the dataset card (*Picture and relation questions together, and stage
6*) has the numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from drake.models.lookup_pretrain import (
    _STREAM_START,
    LOOKUP_STAGE,
    POINTER_HEADS,
    POINTER_WEIGHT,
    AttentionStage,
    StagePlans,
    _step_loss,
    named_cells,
    run_attention_stage,
)
from drake.models.pretrain import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CHECKPOINT_EVERY,
    DEFAULT_EVAL_SIZE,
    DEFAULT_LR,
    LOOKUP_FAMILIES,
    Progress,
)
from drake.models.relation_pretrain import RELATION_FAMILIES, relation_sample
from drake.synth.public import PICTURE_FAMILIES, PICTURE_TOKENS, picture_question

__all__ = [
    "DEFAULT_PICTURE_SHARE",
    "DEFAULT_PICTURE_STEPS",
    "PICTURE_STAGE",
    "picture_plans",
    "picture_sample",
    "pointer_cells",
    "pretrain_picture",
]

#: The report key this stage adds.
PICTURE_STAGE = "picture_stage"
#: 21 of a batch of 32: the drill's 11 picture and 10 relation questions.
DEFAULT_PICTURE_SHARE = 0.65
#: The stage's steps when it runs (``drake models pretrain`` runs it only when asked).
DEFAULT_PICTURE_STEPS = 1200
#: Warm-up steps of the learning rate (the drill's).
PICTURE_WARM = 50
#: The pseudo-task of the stage's picture questions (their ``task`` field).
PICTURE_TASK = "picture-question"
#: A planned own question's pseudo-task.
_PICTURE_PLAN = "picture-stage-question"
#: This stage's relation questions are stage 5's from this index on (stage 5 reads from 0):
#: public indices from 1.296e9 (``synth-public-multi``) and 1.424e9 (``synth-public-formats``),
#: beyond the 8e5 that 24,000 of stage 5's questions span from 1.2e9.
_RELATION_OFFSET = 10**7
#: This stage's other draws: a fresh stream from 1.4e9, beyond stage 5's (from 1e9); a run's
#: public-task draws read a few thousand indices from there, far below its relation questions'
#: 1.424e9 (its look-up draws lie in :data:`~drake.models.pretrain.FOCUS`'s own range).
_REGULAR_START = _STREAM_START + 7 * 10**8
#: Mixed into each picture question's seed, apart from every other stream.
_PICTURE_STREAM = 0x50494354


def picture_sample(seed: int, index: int) -> dict[str, Any]:
    """The stage's own question ``index``: a picture question (even ``index``; drawn from its
    own generator, seeded by ``seed`` and ``index``) or a relation question (odd ``index``)."""
    half, odd = divmod(index, 2)
    if odd:
        return relation_sample(seed, _RELATION_OFFSET + half)
    rng = np.random.default_rng([seed, half, _PICTURE_STREAM])
    sample, _ = picture_question(rng, f"{PICTURE_TASK}-{seed}-{half:09d}", task=PICTURE_TASK)
    return sample


def pointer_cells(sample: dict[str, Any]) -> tuple[int, ...]:
    """Where the pointer looks: a picture question's asked picture (its nine image-token
    positions), else stage 3's named cells (:func:`~drake.models.lookup_pretrain.named_cells`)."""
    if sample.get("task") == PICTURE_TASK:
        k = json.loads(sample["meta"])["picture"]
        return tuple(range(k * PICTURE_TOKENS, (k + 1) * PICTURE_TOKENS))
    return named_cells(sample)


def picture_plans(seed: int, share: float) -> StagePlans:
    """The stage's sample plans: each step's draws of stage 3 (from :data:`_REGULAR_START`),
    then ``round(share x batch)`` own questions (:func:`picture_sample`), in order."""
    return StagePlans(seed, share, _PICTURE_PLAN, _REGULAR_START, picture_sample, own_last=True)


def pretrain_picture(
    name: str,
    *,
    out_dir: Path | None = None,
    steps: int = DEFAULT_PICTURE_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lr: float = DEFAULT_LR,
    share: float = DEFAULT_PICTURE_SHARE,
    seed: int = 0,
    eval_size: int = DEFAULT_EVAL_SIZE,
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
    progress: Progress | None = None,
    threads: int | None = 1,
    device: str = "cpu",
) -> Path:
    """Stage 6 on tiny family ``name``: picture and relation questions, from its weights after
    stage 3 (the cache's, or the shipped ones when no ``out_dir`` is named and the cache has
    none).

    Arguments as :func:`drake.models.lookup_pretrain.pretrain_lookup`'s; ``share`` is the
    share of each step's samples that are the stage's own questions (:func:`picture_sample`).
    Raises :class:`~drake.models.errors.ModelNotPretrained` without weights to start from and
    ValueError for weights that have not been through stage 3 or have been through this one,
    a bad argument, or a checkpoint of a run with other arguments.
    """
    plans = picture_plans(seed, share)
    heads = POINTER_HEADS.get(name, ())  # an unknown name is refused by the runner
    spec = AttentionStage(
        key=PICTURE_STAGE, title="picture", config="picture", suffix="picture-resume",
        after=LOOKUP_STAGE, starts_from="stage-3", share_name="picture_share",
        plan=plans.plan, samples=plans.samples,
        loss=lambda bundle, samples: _step_loss(bundle, samples, heads, cells=pointer_cells),
        drawn=plans.drawn, warm=PICTURE_WARM,
        report={"picture_families": list(PICTURE_FAMILIES),
                "relation_families": list(RELATION_FAMILIES),
                "own_questions": {"picture": 0.5, "relation": 0.5},
                "lookup_families": list(LOOKUP_FAMILIES),
                "pointer_heads": [list(h) for h in heads], "pointer_weight": POINTER_WEIGHT})
    return run_attention_stage(
        spec, name, out_dir=out_dir, steps=steps, batch_size=batch_size, lr=lr, share=share,
        seed=seed, eval_size=eval_size, checkpoint_every=checkpoint_every, progress=progress,
        threads=threads, device=device)
