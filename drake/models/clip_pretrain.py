"""Pretraining ``tiny-clip``: what lets it classify before any federated training.

A real CLIP arrives with an image tower and a text tower that already agree, and with image
features richer than its zero-shot classifier exploits: on most of pFedMMA's datasets a linear
probe on the frozen image features beats zero-shot CLIP by a wide margin, and that gap is what
prompt learning and adapters earn. ``tiny-clip`` is pretrained to have both properties:

* **pictures**: synth-cls-style pictures (one large shape of a colour x fill x shape class on one
  of synth-cls's backgrounds, :func:`drake.synth.extra.cls_scene`) drawn from this module's own
  random stream, ``default_rng([seed, crc32("tiny-clip-pretrain"), part])``, which no build's
  per-sample stream (``[seed, crc32(task), split, index]``) can produce: no pretraining picture is
  a benchmark row;
* **stage 1, the tower** (``tower_steps``): the last Swin stage of the image tower (the tiny
  LLaVA families' shipped tower, whose pooled features read objects cell by cell and separate
  synth-cls's 192 classes poorly) and its final layer norm are trained together with the text
  side, so the image features come to separate colour, fill and shape. The earlier stages stay
  the shipped tower's (their outputs are computed once). The text side reaches nearly every
  held-out class here (the report's ``tower_held_out_accuracy``): the features are rich;
* **stage 2, the text side** (``steps``): the text transformer, both projections and the logit
  scale start again from their seeded initialisation and are aligned with the trained, now
  frozen tower for a short budget. Like a web-pretrained CLIP whose captions rarely phrase a
  benchmark's classes, the text side then classifies well above chance but far below what the
  features allow, and that room is what federated fine-tuning of the text side (a prompt) and of
  the image side (an adapter) has to earn. The budget sets the zero-shot accuracy the report
  records;
* **objective** (``objective``), both stages:

  - ``"captions"`` (the default, and the shipped weights): CLIP's own pre-training, in-batch:
    each picture gets a caption drawn from :data:`CAPTION_TEMPLATES` (varied wording, some
    naming only two of colour, fill and shape, some its background; never the class prompt),
    and :func:`caption_loss` is the symmetric cross-entropy of the batch's picture x caption
    similarities, every caption of the picture's class a positive;
  - ``"classes"``: cross-entropy of each picture's logits over the prompts of all 192 classes,
    ``"a photo of a {class}."`` (CLIP's contrastive loss with the full class list as the batch
    of texts). The text side is then fitted to the very prompts the benchmark scores with;
* **held out**: 192 x 6 fresh pictures (every class on every background) scored after each
  stage, overall and (after stage 2) per background.

``tower_steps=0`` keeps the shipped tower whole and trains the text side alone (the suite's
first tiny-clip: ``steps=3000`` rebuilds it).

``drake models pretrain --model tiny-clip`` runs :func:`pretrain_clip` and writes
``<cache>/tiny-clip/model.safetensors`` (the text side and the tower's trained stage; the rest
of the tower is the shipped one's and is not repeated) and ``pretrain_report.json``. The suite
ships the default run's file, sha256-pinned (:mod:`drake.models.shipped`).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["CAPTION_TEMPLATES", "CLIP_FOLDER", "CLIP_OBJECTIVES", "DEFAULT_CLIP_PICTURES",
           "DEFAULT_CLIP_STEPS", "DEFAULT_CLIP_TOWER_STEPS", "TOWER_STAGES", "caption_loss",
           "captions", "pretrain_clip", "pretrained_state", "tower_inputs", "tower_pooled"]

CLIP_FOLDER = "tiny-clip"
DEFAULT_CLIP_PICTURES = 16000
#: stage 1: steps of the tower's last stage and the text side together
DEFAULT_CLIP_TOWER_STEPS = 3000
#: stage 2: steps of the fresh text side on the trained tower (held-out zero-shot 65.6 %,
#: against 95.4 % after stage 1; measured 30 and 60 steps: 65.6 and 58.7)
DEFAULT_CLIP_STEPS = 30
DEFAULT_CLIP_BATCH_SIZE = 64
DEFAULT_CLIP_LR = 2e-3
#: learning rate of the tower's trained stage in stage 1
TOWER_LR = 1e-3
#: the Swin stages trained in stage 1, counted from the last
TOWER_STAGES = 1
HELD_OUT_PER_CLASS = 6  # one per background
_STREAM = zlib.crc32(b"tiny-clip-pretrain")
_FEATURE_BATCH = 64
#: CLIP's cap on the logit scale, exp(4.6052) = 100
MAX_LOGIT_SCALE = 4.6052
#: what the text side is trained on (see the module docstring)
CLIP_OBJECTIVES = ("classes", "captions")
#: captions of the ``"captions"`` objective: ``{c}`` colour, ``{f}`` fill, ``{s}`` shape, ``{d}``
#: background. None is the class prompt ``"a photo of a {c} {f} {s}."``.
CAPTION_TEMPLATES = (
    "{c} {s}", "a {f} {s}", "a {s} in {c}", "a {c} {f} {s} on a {d} background",
    "there is a {s} that is {c}", "the {s} is {f} and {c}", "a picture of a {f} {c} {s}",
    "a {c} {s} , {f}",
)


def _trained_tower(key: str, first: int) -> bool:
    """Whether ``key`` (a :class:`~drake.models.clip.TinyClip` state key) belongs to the part of
    the image tower stage 1 trains: Swin stages ``first`` on and the final layer norm."""
    layer = key.split(".")[3] if key.startswith("vision.encoder.layers.") else None
    return (layer is not None and int(layer) >= first) or key.startswith("vision.layernorm.")


def pretrained_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What :func:`pretrain_clip` trains and ships of a :class:`~drake.models.clip.TinyClip`:
    the text side (text tower, projections, logit scale) and the tower's last
    :data:`TOWER_STAGES` stages with its final layer norm; the rest of the tower is the shipped
    tiny LLaVA tower's."""
    first = len(model.vision.encoder.layers) - TOWER_STAGES
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("vision.") or _trained_tower(k, first)}


def tower_inputs(vision: torch.nn.Module, pixel_values: torch.Tensor, first: int
                 ) -> tuple[torch.Tensor, tuple[int, int]]:
    """The Swin tower's hidden states entering stage ``first`` (and their grid), without
    gradients: what stage 1 computes once."""
    with torch.no_grad():
        hidden, dims = vision.embeddings(pixel_values)[:2]
        for layer in vision.encoder.layers[:first]:
            hidden = layer(hidden, dims)[0]
            if layer.downsample is not None:
                dims = ((dims[0] + 1) // 2, (dims[1] + 1) // 2)
    return hidden, dims


def tower_pooled(vision: torch.nn.Module, hidden: torch.Tensor, dims: tuple[int, int],
                 first: int) -> torch.Tensor:
    """The rest of the tower from :func:`tower_inputs`' states: stages ``first`` on, the final
    layer norm and the mean over tokens (``SwinModel``'s ``pooler_output``)."""
    for layer in vision.encoder.layers[first:]:
        hidden = layer(hidden, dims)[0]
        if layer.downsample is not None:
            dims = ((dims[0] + 1) // 2, (dims[1] + 1) // 2)
    return vision.layernorm(hidden).mean(dim=1)


def _pictures(seed: int, part: int, labels: np.ndarray, domains: list[str]) -> list[Any]:
    from drake.models.tiny import TINY_IMAGE_SIZE
    from drake.synth.extra import cls_scene
    from drake.synth.scene import render

    rng = np.random.default_rng([seed, _STREAM, part])
    return [render(cls_scene(rng, int(label), domain), TINY_IMAGE_SIZE, rng)
            for label, domain in zip(labels, domains)]


def captions(rng: np.random.Generator, labels: np.ndarray, domains: list[str]) -> list[str]:
    """One caption per picture (class ``labels[i]`` on background ``domains[i]``), its template
    drawn from :data:`CAPTION_TEMPLATES` with ``rng``."""
    from drake.synth.extra import CLS_TRIPLES

    picks = rng.integers(0, len(CAPTION_TEMPLATES), len(labels))
    return [CAPTION_TEMPLATES[k].format(**dict(zip("cfs", CLS_TRIPLES[int(y)])), d=d)
            for k, y, d in zip(picks, labels, domains)]


def caption_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """CLIP's symmetric in-batch loss with every same-class pair a positive.

    ``logits[i, j]`` scores picture ``i`` against caption ``j`` (caption ``j`` describes picture
    ``j``). The target of row ``i`` spreads evenly over the captions of ``i``'s class, and the
    loss is ``(CE(logits, T) + CE(logits^T, T)) / 2`` with ``T[i, j] = [y_i = y_j] / n(y_i)``
    (symmetric, since ``n(y_i) = n(y_j)`` wherever the indicator is 1). With distinct labels it
    is CLIP's loss exactly.
    """
    same = (labels[:, None] == labels[None, :]).to(logits.dtype)
    target = same / same.sum(dim=1, keepdim=True)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def _tower_states(bundle, images: list[Any], first: int
                  ) -> tuple[torch.Tensor, tuple[int, int]]:
    """:func:`tower_inputs` of ``images``, in batches."""
    vision = bundle._core().vision
    parts = [tower_inputs(vision, bundle._pixel_fn(images[i:i + _FEATURE_BATCH]), first)
             for i in range(0, len(images), _FEATURE_BATCH)]
    return torch.cat([h for h, _ in parts]), parts[0][1]


def _pooled(vision, states: torch.Tensor, dims: tuple[int, int], first: int) -> torch.Tensor:
    """:func:`tower_pooled` of cached states, without gradients, in batches."""
    with torch.no_grad():
        return torch.cat([tower_pooled(vision, states[i:i + _FEATURE_BATCH], dims, first)
                          for i in range(0, len(states), _FEATURE_BATCH)])


def _accuracy(core, features: torch.Tensor, labels: torch.Tensor, texts: dict) -> torch.Tensor:
    with torch.no_grad():
        image = F.normalize(core.visual_projection(features), dim=-1)
        return (image @ core.text_embeds(**texts).T).argmax(-1) == labels


def _train(core, bundle, groups: list[dict[str, Any]], steps: int, embed: Callable,
           data: dict[str, Any], objective: str, stream: int,
           progress: Callable[[float], None] | None) -> list[float]:
    """``steps`` AdamW steps (cosine decay) of the parameter ``groups`` on ``objective``;
    ``embed(idx)`` gives the unit-norm image embeddings of pictures ``idx``. The batch order and
    the captions draw from the stream ``[seed, _STREAM, stream]``."""
    seed, labels, domains = data["seed"], data["labels"], data["domains"]
    for group in groups:
        for p in group["params"]:
            p.requires_grad_(True)
    optimiser = torch.optim.AdamW(groups, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    y = torch.as_tensor(labels)
    rng = np.random.default_rng([seed, _STREAM, stream])
    order = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    losses = []
    core.train()
    for _ in range(steps):
        idx = torch.randint(0, len(labels), (data["batch_size"],), generator=order)
        image = embed(idx)
        if objective == "classes":
            loss = F.cross_entropy(core.logits(image, core.text_embeds(**data["texts"])), y[idx])
        else:
            caps = captions(rng, labels[idx.numpy()], [domains[i] for i in idx.tolist()])
            text = core.text_embeds(**bundle.text_inputs(caps, template="{}"))
            loss = caption_loss(core.logits(image, text), y[idx])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        with torch.no_grad():
            core.logit_scale.clamp_(0.0, MAX_LOGIT_SCALE)
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(losses[-1])
    core.eval()
    for group in groups:
        for p in group["params"]:
            p.requires_grad_(False)
    return losses


def pretrain_clip(
    *,
    out_dir: Path | None = None,
    seed: int = 0,
    pictures: int = DEFAULT_CLIP_PICTURES,
    steps: int = DEFAULT_CLIP_STEPS,
    tower_steps: int = DEFAULT_CLIP_TOWER_STEPS,
    batch_size: int = DEFAULT_CLIP_BATCH_SIZE,
    lr: float = DEFAULT_CLIP_LR,
    objective: str = "captions",
    threads: int | None = 1,
    progress: Callable[[int, int, float], None] | None = None,
) -> Path:
    """Pretrain ``tiny-clip`` (see the module docstring) and save it atomically.

    Parameters
    ----------
    out_dir : Path, optional
        Model cache (default :func:`drake.models.cache_dir`); files go to ``<out_dir>/tiny-clip``.
    seed : int
        Seed of the pictures, the initialisation and the batch order.
    pictures : int
        Training pictures.
    steps : int
        Stage 2: AdamW steps of the fresh text side on the trained tower.
    tower_steps : int
        Stage 1: AdamW steps of the tower's last stage and the text side together; 0 keeps the
        shipped tower whole.
    batch_size, lr
        Pictures per step, and the text side's learning rate (cosine decay; the tower's stage
        trains at :data:`TOWER_LR`).
    objective : str
        ``"captions"`` (the default and the shipped weights) or ``"classes"`` (see the module
        docstring).
    threads : int, optional
        Intra-op threads while training (default 1: the same bytes on any machine with the
        same CPU type and library versions); ``None`` leaves torch's setting.
    progress : callable, optional
        ``progress(step, total, loss)`` after every step, counting both stages.

    Returns
    -------
    Path
        The folder written.
    """
    from safetensors.torch import save_file

    from drake.models.loading import _load_tiny_clip, tiny_folder
    from drake.models.pretrain import (
        _check_budget,
        _machine,
        _run,
        _sha256,
        _staged,
        _versions,
    )
    from drake.models.zoo import get_info
    from drake.synth.extra import CLS_CLASSES
    from drake.synth.scene import DOMAINS

    _check_budget(pictures=pictures, steps=steps, batch_size=batch_size)
    if isinstance(tower_steps, bool) or not isinstance(tower_steps, int) or tower_steps < 0:
        raise ValueError(f"tower_steps must be an integer >= 0, got {tower_steps!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if objective not in CLIP_OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(CLIP_OBJECTIVES)}, got "
                         f"{objective!r}")
    start = time.perf_counter()
    done = [0]

    def tick(loss: float) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], tower_steps + steps, loss)

    with _run(threads, seed):
        bundle = _load_tiny_clip(get_info(CLIP_FOLDER), None, True, seed, None, text=False)
        core = bundle._core()
        for p in core.parameters():
            p.requires_grad_(False)
        fresh = {k: v.clone() for k, v in core.state_dict().items()
                 if not k.startswith("vision.")}
        first = len(core.vision.encoder.layers) - TOWER_STAGES
        rng = np.random.default_rng([seed, _STREAM, 0])
        labels = rng.integers(0, len(CLS_CLASSES), pictures)
        domains = [DOMAINS[i] for i in rng.integers(0, len(DOMAINS), pictures)]
        states, dims = _tower_states(bundle, _pictures(seed, 1, labels, domains), first)
        held_labels = np.repeat(np.arange(len(CLS_CLASSES)), HELD_OUT_PER_CLASS)
        held_domains = [DOMAINS[i % len(DOMAINS)] for i in range(len(held_labels))]
        held_states, _ = _tower_states(bundle, _pictures(seed, 2, held_labels, held_domains),
                                       first)
        texts = bundle._texts(list(CLS_CLASSES))
        held_y = torch.as_tensor(held_labels)
        data = {"seed": seed, "labels": labels, "domains": domains, "texts": texts,
                "batch_size": batch_size}
        text_side = [p for k, p in core.named_parameters() if not k.startswith("vision.")]
        held = _pooled(core.vision, held_states, dims, first)
        before = float(_accuracy(core, held, held_y, texts).float().mean()) * 100
        tower_losses, tower_accuracy = [], None
        if tower_steps:
            tower = [p for k, p in core.named_parameters() if _trained_tower(k, first)]
            tower_losses = _train(
                core, bundle, [{"params": text_side, "lr": lr}, {"params": tower, "lr": TOWER_LR}],
                tower_steps, lambda idx: F.normalize(core.visual_projection(tower_pooled(
                    core.vision, states[idx], dims, first)), dim=-1),
                data, objective, 4, tick)
            held = _pooled(core.vision, held_states, dims, first)  # the trained tower's
            tower_accuracy = float(_accuracy(core, held, held_y, texts).float().mean()) * 100
            core.load_state_dict(fresh, strict=False)  # stage 2's text side starts afresh
        features = _pooled(core.vision, states, dims, first)
        losses = _train(core, bundle, [{"params": text_side, "lr": lr}], steps,
                        lambda idx: F.normalize(core.visual_projection(features[idx]), dim=-1),
                        data, objective, 3, tick)
        right = _accuracy(core, held, held_y, texts)
        per_domain = {d: round(100 * float(right[[i for i, x in enumerate(held_domains)
                                                  if x == d]].float().mean()), 2)
                      for d in DOMAINS}
        state = pretrained_state(core)
    folder = tiny_folder(CLIP_FOLDER, out_dir)
    with _staged(folder) as staging:
        save_file(state, str(staging / "model.safetensors"))
        report = {
            "model": CLIP_FOLDER, "seed": seed, "pictures": pictures,
            "tower_steps": tower_steps, "tower_stages": TOWER_STAGES if tower_steps else 0,
            "tower_lr": TOWER_LR, "steps": steps, "batch_size": batch_size, "lr": lr,
            "objective": objective, "threads": threads,
            "classes": len(CLS_CLASSES), "template": bundle.template,
            "held_out_pictures": len(held_labels),
            "held_out_accuracy_before": round(before, 2),
            "tower_held_out_accuracy": (None if tower_accuracy is None
                                        else round(tower_accuracy, 2)),
            "held_out_accuracy": round(100 * float(right.float().mean()), 2),
            "held_out_accuracy_by_domain": per_domain,
            "tower_final_loss": (round(float(np.mean(tower_losses[-50:])), 4)
                                 if tower_losses else None),
            "final_loss": round(float(np.mean(losses[-50:])), 4),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "weights_sha256": _sha256(staging / "model.safetensors"),
            "versions": _versions(),
            "machine": _machine(),
        }
        (staging / "pretrain_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return folder
