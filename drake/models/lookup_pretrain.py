"""Stage 3 of ``drake models pretrain`` (``--lookup-steps N``, after stage 2 or alone with
``--lookup-only``): teach a tiny LLaVA to look a named object up.

After stage 2 the image tokens name their objects (colour 98%, shape 88% per grid cell), yet on
held-out public questions the tiny families answer "what colour is the heart?" at the line of
picking a colour present in the picture at random: attention from the question does not select
the named object's image token, and half of every batch as such questions for 3,000 steps does
not teach it (``benchmarks/lookup_gap.py``, issue #13). This stage teaches it directly. It starts
from a family's stage-2 weights and trains on fresh public samples, :data:`DEFAULT_LOOKUP_SHARE`
of them questions that name an object and ask one of its attributes
(:data:`drake.models.pretrain.LOOKUP_FAMILIES`), with stage 2's answer and grounding losses
plus a *pointer* loss: on those questions, each head of :data:`POINTER_HEADS` must put its
attention from the answer position on the image tokens of the grid cells holding the named
object (:func:`named_cells`), ``-log`` of that attention's sum, weighted
:data:`POINTER_WEIGHT`. Supervising attention is how the look-up is shown; the answer loss
still has to learn to read what the head brings. The other half of the samples are the public
tasks as stage 2 draws them, so the rest is not forgotten.

Measured (``python benchmarks/lookup_gap.py --model-cache DIR``, 600 held-out questions per
look-up) on the shipped weights, made by ``drake models pretrain --model all --lookup-only
--lookup-steps 1500`` from the stage-2 weights: ``tiny-llava-qwen`` answers the colour of a
named shape 91.3% of the time (53.0% before; answering a colour present in the picture at
random scores 52.8%) and the shape of a named colour 87.5% (80.5%; line 52.0%, and its image
tokens name their shape 88%); ``tiny-llava-llama`` 80.5% (50.7%) and 87.0% (44.0%).
Held-out public exact match, mean over families: 0.59 -> 0.66 and 0.59 -> 0.63. In a first
trial, supervising one head of the second layer alone reached 84% and 80% on
``tiny-llava-llama``.

Like the other stages: AdamW, the learning rate warmed up over :data:`_WARM` steps then a cosine
to 10%, gradient-norm clip 1, the vision tower frozen; one thread, deterministic algorithms,
every draw seeded, so the same seed and stage-2 weights give the same bytes on the same machine
and library versions; checkpoints every ``checkpoint_every`` steps, resumed when rerun. The
weights replace the family's folder in the model cache (read from there, or from the shipped
weights when no cache was named and it holds none), and the stage-2 report gains a
``lookup_stage`` entry. Weights that already went through the stage are refused. The default
``drake models pretrain`` runs it for :data:`drake.models.pretrain.DEFAULT_LOOKUP_STEPS` steps,
and the shipped weights are the shipped stage-2 weights after it (``--lookup-steps 0`` stops
after stage 2).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from drake.models.bundle import IGNORE_INDEX, _Encoded
from drake.models.errors import ModelNotPretrained
from drake.models.loading import WEIGHTS_FILE, quiet_transformers, tiny_folder
from drake.models.pretrain import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CHECKPOINT_EVERY,
    DEFAULT_EVAL_SIZE,
    DEFAULT_LOOKUP_STEPS,
    DEFAULT_LR,
    GROUNDING_WEIGHT,
    LOOKUP_FAMILIES,
    REPORT_FILE,
    Progress,
    _check_budget,
    _check_device,
    _check_threads,
    _Checkpoint,
    _device_name,
    _eval_set,
    _Features,
    _fresh_samples,
    _FreshStream,
    _language_loss,
    _lr_at,
    _meta,
    _optimise,
    _prepare,
    _run,
    _sha256,
    _staged,
    _versions,
    evaluate_open,
)
from drake.models.shipped import shipped_folder
from drake.models.zoo import TINY_MODELS

__all__ = [
    "LOOKUP_STAGE",
    "POINTER_HEADS",
    "POINTER_WEIGHT",
    "DEFAULT_LOOKUP_STEPS",
    "DEFAULT_LOOKUP_SHARE",
    "named_cells",
    "pointer_loss",
    "pretrain_lookup",
]

log = logging.getLogger(__name__)

#: The report key this stage adds (and whose presence refuses a second pass).
LOOKUP_STAGE = "lookup_stage"
DEFAULT_LOOKUP_SHARE = 0.5
#: Weight of the pointer loss against the answer loss.
POINTER_WEIGHT = 1.0
#: The (layer, head) pairs the pointer loss trains, per family: a head of the second layer and
#: one of the third (supervising the first alone reached 84/80% where both reach 92/83%).
POINTER_HEADS: MappingProxyType[str, tuple[tuple[int, int], ...]] = MappingProxyType({
    "tiny-llava-llama": ((1, 0), (2, 1)),
    "tiny-llava-qwen": ((1, 0), (2, 1)),
})
_WARM = 100
#: First index of this stage's public samples: beyond stage 2's streams (full from 0, easy from
#: 1e8, label focus from 2e8, look-up focus from 5e8).
_STREAM_START = 7 * 10**8
_LOOKUP_TASK = "synth-public-open"
_FORMATS_TASK = "synth-public-formats"


def named_cells(sample: dict[str, Any], formats: bool = False) -> tuple[int, ...]:
    """The grid cells (0-8, row by row) holding the object a public look-up question names.

    The question names its object by colour, shape or both ("the colour of the heart", "the
    shape that is orange", "the tag of the purple square"); every object of the picture that
    matches what is named counts. ``()`` for a question of another task or family, one that
    names neither (the shape with tag 3), or more than one picture. With ``formats``, a
    ``synth-public-formats`` question of those families counts too, named by its ``Question:``
    line alone (its option lines name other colours and shapes); stage 3 reads
    ``synth-public-open`` only.
    """
    from drake.synth.scene import COLOURS, SHAPES, Scene

    meta = _meta(sample)
    text = sample["prompt"]
    if formats and sample["id"].startswith(_FORMATS_TASK):
        text = next((line for line in text.split("\n") if line.startswith("Question:")), "")
    elif not sample["id"].startswith(_LOOKUP_TASK):
        return ()
    if meta.get("family") not in LOOKUP_FAMILIES or len(meta["scenes"]) != 1:
        return ()
    words = set(text.replace(".", " ").replace("?", " ").split())
    colours = [c for c in COLOURS if c in words]
    shapes = [s for s in SHAPES if s in words]
    if not colours and not shapes:
        return ()
    scene = Scene.from_summary(meta["scenes"][0])
    return tuple(sorted({o.cell() for o in scene.objects
                         if (not colours or o.colour in colours)
                         and (not shapes or o.shape in shapes)}))


def pointer_loss(attentions: Sequence[torch.Tensor], items: Sequence[_Encoded],
                 cells: Sequence[Sequence[int]], image_token_id: int,
                 heads: Sequence[tuple[int, int]]) -> torch.Tensor | None:
    """Mean over the items with named cells and over ``heads`` of ``-log`` of the attention the
    answer position puts on those cells' image tokens; None when no item names a cell.

    ``attentions``: per layer, (batch, heads, positions, positions), of a batch padded on the
    right; ``items``: the batch's encodings with their answer labels; ``cells``: per item,
    :func:`named_cells`. The answer position is the one before the first answer label (the
    hidden state that predicts the answer's first token).
    """
    terms = []
    for row, (item, named) in enumerate(zip(items, cells)):
        if not named:
            continue
        query = next(i for i, label in enumerate(item.labels) if label != IGNORE_INDEX) - 1
        image = [i for i, token in enumerate(item.ids) if token == image_token_id]
        keys = [image[c] for c in named]
        for layer, head in heads:
            terms.append(-torch.log(attentions[layer][row, head, query, keys].sum() + 1e-6))
    return torch.stack(terms).mean() if terms else None


def _source(name: str, folder: Path, out_dir: Path | None, spec: AttentionStage) -> Path:
    """The folder holding the weights ``spec``'s stage starts from."""
    if (folder / WEIGHTS_FILE).is_file():
        return folder
    shipped = shipped_folder(name)
    if shipped is None or out_dir is not None:
        hint = ""  # a named cache never falls back on its own; say how to seed it when it can
        if shipped is not None and _starts(json.loads((shipped / REPORT_FILE).read_text()), spec):
            hint = f", or copy the shipped folder {shipped} to {folder} to start from it"
        raise ModelNotPretrained(
            f"{name} has no {spec.starts_from} weights in {folder}; run `drake models pretrain "
            f"--model {name}" + (f" --cache-dir {out_dir}" if out_dir is not None else "")
            + f"` first (the {spec.title} stage starts from them){hint}")
    return shipped


def _starts(report: dict[str, Any], spec: AttentionStage) -> bool:
    """Whether weights with ``report`` are what ``spec``'s stage starts from."""
    return spec.key not in report and (spec.after is None or spec.after in report)


def pretrain_lookup(
    name: str,
    *,
    out_dir: Path | None = None,
    steps: int = DEFAULT_LOOKUP_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lr: float = DEFAULT_LR,
    share: float = DEFAULT_LOOKUP_SHARE,
    seed: int = 0,
    eval_size: int = DEFAULT_EVAL_SIZE,
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
    progress: Progress | None = None,
    threads: int | None = 1,
    device: str = "cpu",
) -> Path:
    """Stage 3 on tiny family ``name``: the look-up, taught with the pointer loss.

    Parameters
    ----------
    name : str
        ``tiny-llava-llama`` or ``tiny-llava-qwen``.
    out_dir : Path, optional
        Model cache root (default :func:`drake.models.cache_dir`). The stage reads the family's
        stage-2 weights there (with no ``out_dir``, the shipped ones when the cache has none)
        and writes its result there.
    steps, batch_size, lr : int, int, float
        Optimisation steps, samples per step and peak learning rate.
    share : float
        Share of each step's samples that are look-up questions (:func:`named_cells`), in
        (0, 1]; the rest are public samples as stage 2 draws them.
    seed : int
        Seed of the samples and of torch's generator.
    eval_size : int
        Held-out public questions scored before and after (0 skips scoring).
    checkpoint_every : int
        Steps between checkpoints (0: none); a stopped run resumes from its last one when
        called again with the same arguments, to the same bytes.
    progress : callable, optional
        ``progress(step, steps, loss)`` after every step.
    threads : int or None
        torch intra-op threads for the run (one by default; ``None`` keeps the setting).
    device : str
        ``cpu`` or ``cuda``.

    Returns
    -------
    Path
        The family's folder in the model cache.

    Raises
    ------
    ModelNotPretrained
        When there are no stage-2 weights to start from.
    ValueError
        For weights that already went through the stage, a bad argument, or a checkpoint of a
        run with other arguments.
    """
    stream = _FreshStream(seed, _STREAM_START, None, focus_share=share, focus="lookup")
    heads = POINTER_HEADS.get(name, ())  # an unknown name is refused by the runner
    spec = AttentionStage(
        key=LOOKUP_STAGE, title="look-up", config="lookup", suffix="lookup-resume",
        after=None, starts_from="stage-2", share_name="lookup_share",
        plan=lambda count: stream.plan(count),
        samples=lambda plan: _fresh_samples(seed, None, plan),
        loss=lambda bundle, samples: _step_loss(bundle, samples, heads),
        drawn=lambda: stream.drawn,
        report={"lookup_families": list(LOOKUP_FAMILIES),
                "pointer_heads": [list(h) for h in heads], "pointer_weight": POINTER_WEIGHT})
    return run_attention_stage(
        spec, name, out_dir=out_dir, steps=steps, batch_size=batch_size, lr=lr, share=share,
        seed=seed, eval_size=eval_size, checkpoint_every=checkpoint_every, progress=progress,
        threads=threads, device=device)


@dataclass(frozen=True)
class AttentionStage:
    """What sets one attention-supervised stage apart (stage 3 here, stage 4 in
    :mod:`drake.models.label_pretrain`); :func:`run_attention_stage` runs it.

    ``key`` is the report entry the stage adds (a second pass is refused); ``title`` names it
    in messages; ``config`` and ``suffix`` name its checkpoint; ``after`` is the report entry
    the starting weights must have (None: stage-2 weights do), ``starts_from`` their name in
    messages; ``share_name`` the report key of ``share``. ``plan(count)`` plans a step's
    samples, ``samples(plan)`` makes them, ``loss(bundle, samples)`` is the step's loss,
    ``drawn()`` counts the samples planned, and ``report`` adds the stage's own entries;
    ``warm`` is the learning rate's warm-up in steps; ``settings`` are the stage's own
    arguments a checkpoint must have been made with to be resumed.
    """

    key: str
    title: str
    config: str
    suffix: str
    after: str | None
    starts_from: str
    share_name: str
    plan: Callable[[int], Any]
    samples: Callable[[Any], list[dict[str, Any]]]
    loss: Callable[[Any, Sequence[dict[str, Any]]], torch.Tensor]
    drawn: Callable[[], int]
    report: dict[str, Any]
    warm: int = _WARM
    settings: dict[str, Any] = field(default_factory=dict)


class StagePlans:
    """The sample plans of a stage after stage 3: each step's ``round(share x batch)`` of the
    stage's own questions, ``(own, k)`` with ``k`` counting on from 0 (made by ``make(seed,
    k)``), and the rest drawn as stage 3 draws (its look-up share, a fresh stream from public
    index ``start``); the own questions come first, or last with ``own_last``."""

    def __init__(self, seed: int, share: float, own: str, start: int,
                 make: Callable[[int, int], dict[str, Any]], own_last: bool = False) -> None:
        self.seed, self.share, self.own, self.make, self.own_last = seed, share, own, make, own_last
        self.stream = _FreshStream(seed, start, None, focus_share=DEFAULT_LOOKUP_SHARE,
                                   focus="lookup")
        self.next = 0

    def plan(self, count: int) -> list[tuple[str, int]]:
        mine = round(self.share * count)
        own = [(self.own, self.next + k) for k in range(mine)]
        self.next += mine
        if self.own_last:
            return self.stream.plan(count - mine) + own
        return own + self.stream.plan(count - mine)

    def drawn(self) -> int:
        return self.next + self.stream.drawn

    def samples(self, plan: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
        return [self.make(self.seed, index) if task == self.own else
                _fresh_samples(self.seed, None, [(task, index)])[0] for task, index in plan]


def run_attention_stage(spec: AttentionStage, name: str, *, out_dir: Path | None, steps: int,
                        batch_size: int, lr: float, share: float, seed: int, eval_size: int,
                        checkpoint_every: int, progress: Progress | None, threads: int | None,
                        device: str) -> Path:
    """Train tiny family ``name`` through ``spec``'s stage from the weights in its cache folder
    (or the shipped ones), checkpointed and resumable, and save it there with the report
    entry ``spec.key`` (arguments as :func:`pretrain_lookup`'s)."""
    from drake.models.loading import load_model

    if name not in TINY_MODELS:
        raise ValueError(f"the {spec.title} stage trains {' or '.join(TINY_MODELS)}, "
                         f"not {name!r}")
    _check_budget(steps=steps, batch_size=batch_size, eval_size=eval_size, seed=seed,
                  checkpoint_every=checkpoint_every)
    _check_threads(threads)
    _check_device(device)
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    out_dir = None if out_dir is None else Path(out_dir)
    folder = tiny_folder(name, out_dir)
    source = _source(name, folder, out_dir, spec)
    report = json.loads((source / REPORT_FILE).read_text())
    if spec.key in report:
        raise ValueError(
            f"{source} already went through the {spec.title} stage ({REPORT_FILE} has "
            f"{spec.key!r}); run stage 2 again (`drake models pretrain --model {name}`) to "
            "start over")
    if spec.after is not None and spec.after not in report:
        raise ValueError(
            f"{source} has not been through the stage before the {spec.title} stage "
            f"({REPORT_FILE} lacks {spec.after!r}); run `drake models pretrain --model {name} "
            "--lookup-only` first")
    started = time.perf_counter()
    plans = [spec.plan(batch_size) for _ in range(steps)]
    held_out = _eval_set(seed, eval_size)
    losses: list[float] = []
    with _run(threads, seed):
        bundle = load_model(name, cache_dir=out_dir)
        model = bundle.model.to(device)
        model.requires_grad_(True)
        model.model.vision_tower.requires_grad_(False)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
        checkpoint = _Checkpoint(folder, {
            "stage": spec.config, "model": name, "seed": seed, "steps": steps,
            "batch_size": batch_size, "lr": lr, "share": share, "eval_size": eval_size,
            "device": _device_name(device), "from_weights_sha256": report["weights_sha256"],
            "torch_threads": torch.get_num_threads(), "versions": _versions(),
            **spec.settings},
            suffix=spec.suffix)
        rng = np.random.default_rng(seed)  # nothing draws from it: the plans are made above
        resumed = checkpoint.load(model, optimizer, rng, device)
        first = 0 if resumed is None else resumed["step"]
        before = evaluate_open(bundle, held_out) if resumed is None else resumed["before"]
        if resumed is not None:
            losses = resumed["losses"]
        attention = model.config._attn_implementation
        model.set_attn_implementation("eager")  # the pointer losses read attention weights
        model.train()
        try:
            for step in range(first, steps):
                for group in optimizer.param_groups:
                    group["lr"] = _lr_at(step, steps, lr, warm=spec.warm, floor=0.1)
                loss = spec.loss(bundle, spec.samples(plans[step]))
                _optimise(loss, optimizer, params, losses)
                checkpoint.after(step + 1, checkpoint_every, model, optimizer, rng, device,
                                 losses=losses, before=before, started=started,
                                 progress=progress)
        finally:
            model.set_attn_implementation(attention)
        model.eval()
        after = evaluate_open(bundle, held_out)
    model.requires_grad_(False)
    model.to("cpu")

    with _staged(folder) as staging:
        with quiet_transformers():
            model.save_pretrained(str(staging))
        bundle.tokenizer.save_pretrained(str(staging))
        report[spec.key] = {
            "steps": steps,
            "batch_size": batch_size,
            "lr": lr,
            "schedule": f"linear warm-up {spec.warm} steps, cosine to 10% of lr; AdamW(0.9, 0.98), "
                        "wd 0, clip 1; frozen vision tower",
            spec.share_name: share,
            **spec.report,
            "grounding_weight": GROUNDING_WEIGHT,
            "seed": seed,
            "train_samples": spec.drawn(),
            "resumed_at": checkpoint.resumed_at,
            "eval_samples": len(held_out),
            "final_loss": float(np.mean(losses[-50:])),
            "loss_curve": [round(v, 4) for v in losses[:: max(1, steps // 50)]],
            "accuracy_before": before,
            "accuracy_after": after,
            "from_weights_sha256": report["weights_sha256"],
            "wall_seconds": round(checkpoint.elapsed + time.perf_counter() - started, 2),
            "device": _device_name(device),
            "versions": _versions(),
            "machine": checkpoint.machine,
        }
        report["weights_sha256"] = _sha256(staging / WEIGHTS_FILE)
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    checkpoint.remove()
    log.info("%s stage of %s in %.1fs: loss %.3f, held-out accuracy %s -> %s", spec.title, name,
             report[spec.key]["wall_seconds"], report[spec.key]["final_loss"],
             before.get("mean"), after.get("mean"))
    return folder


def _step_loss(bundle: Any, samples: Sequence[dict[str, Any]],
               heads: Sequence[tuple[int, int]],
               cells: Callable[[dict[str, Any]], Sequence[int]] = named_cells) -> torch.Tensor:
    """Stage 2's answer and grounding losses on ``samples`` plus the weighted pointer loss on
    the image tokens ``cells(sample)`` names (default: stage 3's :func:`named_cells`)."""
    items, inputs = _prepare(bundle, samples)
    feats, words = _Features(bundle, inputs).rows(range(len(samples)))
    targets = [cells(s) for s in samples]

    def pointer(attentions: Sequence[torch.Tensor]) -> torch.Tensor | None:
        loss = pointer_loss(attentions, items, targets, bundle.image_token_id, heads)
        return None if loss is None else POINTER_WEIGHT * loss

    return _language_loss(bundle, items, feats, words, extra=pointer)
