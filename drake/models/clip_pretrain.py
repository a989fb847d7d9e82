"""Pretraining ``tiny-clip``'s text side: what lets it classify before any federated training.

A real CLIP arrives with an image tower and a text tower that already agree; ``tiny-clip``'s image
tower is the tiny LLaVA families' pretrained Swin tower (shipped with them), and this module
teaches its text transformer, both projections and the logit scale to agree with it, the way
CLIP's zero-shot classifier is used by pFedMMA and the prompt-learning baselines:

* **pictures**: synth-cls-style pictures (one large shape of a colour x fill x shape class on one
  of synth-cls's backgrounds, :func:`drake.synth.extra.cls_scene`) drawn from this module's own
  random stream, ``default_rng([seed, crc32("tiny-clip-pretrain"), part])``, which no build's
  per-sample stream (``[seed, crc32(task), split, index]``) can produce: no pretraining picture is
  a benchmark row;
* **objective** (``objective``), the image tower frozen either way (its pooled features are
  computed once):

  - ``"classes"``: cross-entropy of each picture's logits over the prompts of all 192 classes,
    ``"a photo of a {class}."`` (CLIP's contrastive loss with the full class list as the batch
    of texts). The text side is then fitted to the very prompts the benchmark scores with, so
    zero-shot sits at what the frozen features allow, and a method that learns only the text
    side (a prompt) has nothing left to learn;
  - ``"captions"`` (the default, and the shipped weights): CLIP's own pre-training, in-batch:
    each picture gets a caption drawn from :data:`CAPTION_TEMPLATES` (varied wording, some
    naming only two of colour, fill and shape, some its background; never the class prompt),
    and :func:`caption_loss` is the symmetric cross-entropy of the batch's picture x caption
    similarities, every caption of the picture's class a positive. Like a web-pretrained CLIP,
    the text side then knows the attributes but not the benchmark's prompt, and prompt
    learning has room to earn;
* **held out**: 192 x 6 fresh pictures (every class on every background) scored after training,
  overall and per background.

The image tower's pooled features are a 3 x 3 average of cell features trained to read objects
cell by cell, so the text side reaches a zero-shot accuracy well below 100 % (the report records
it): room that federated fine-tuning of the text side (and, for pFedMMA, of the image side) has
to earn.

``drake models pretrain --model tiny-clip`` runs :func:`pretrain_clip` and writes
``<cache>/tiny-clip/model.safetensors`` (the text tower, projections and logit scale; the image
tower is not repeated) and ``pretrain_report.json``. The suite ships the default run's file,
sha256-pinned (:mod:`drake.models.shipped`).
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
           "DEFAULT_CLIP_STEPS", "caption_loss", "captions", "pretrain_clip", "text_side_state"]

CLIP_FOLDER = "tiny-clip"
DEFAULT_CLIP_PICTURES = 16000
DEFAULT_CLIP_STEPS = 3000
DEFAULT_CLIP_BATCH_SIZE = 64
DEFAULT_CLIP_LR = 2e-3
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


def text_side_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Everything of a :class:`~drake.models.clip.TinyClip` but its image tower: the weights this
    module trains and ships."""
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("vision.")}


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


def _features(bundle, images: list[Any]) -> torch.Tensor:
    """The frozen image tower's pooled features (before the trained projection)."""
    core = bundle._core()
    with torch.no_grad():
        return torch.cat([core.vision(pixel_values=bundle._pixel_fn(images[i:i + _FEATURE_BATCH])
                                      ).pooler_output
                          for i in range(0, len(images), _FEATURE_BATCH)])


def _accuracy(core, features: torch.Tensor, labels: torch.Tensor, texts: dict) -> torch.Tensor:
    with torch.no_grad():
        image = F.normalize(core.visual_projection(features), dim=-1)
        return (image @ core.text_embeds(**texts).T).argmax(-1) == labels


def pretrain_clip(
    *,
    out_dir: Path | None = None,
    seed: int = 0,
    pictures: int = DEFAULT_CLIP_PICTURES,
    steps: int = DEFAULT_CLIP_STEPS,
    batch_size: int = DEFAULT_CLIP_BATCH_SIZE,
    lr: float = DEFAULT_CLIP_LR,
    objective: str = "captions",
    threads: int | None = 1,
    progress: Callable[[int, int, float], None] | None = None,
) -> Path:
    """Pretrain ``tiny-clip``'s text side (see the module docstring) and save it atomically.

    Parameters
    ----------
    out_dir : Path, optional
        Model cache (default :func:`drake.models.cache_dir`); files go to ``<out_dir>/tiny-clip``.
    seed : int
        Seed of the pictures, the initialisation and the batch order.
    pictures, steps, batch_size, lr
        Training pictures, AdamW steps, pictures per step, learning rate (cosine decay).
    objective : str
        ``"captions"`` (the default and the shipped weights) or ``"classes"`` (see the module
        docstring).
    threads : int, optional
        Intra-op threads while training (default 1: the same bytes on any machine with the
        same library versions); ``None`` leaves torch's setting.
    progress : callable, optional
        ``progress(step, steps, loss)`` after every step.

    Returns
    -------
    Path
        The folder written.
    """
    from safetensors.torch import save_file

    from drake.models.loading import _load_tiny_clip, tiny_folder
    from drake.models.pretrain import _check_budget, _run, _sha256, _staged, _versions
    from drake.models.zoo import get_info
    from drake.synth.extra import CLS_CLASSES
    from drake.synth.scene import DOMAINS

    _check_budget(pictures=pictures, steps=steps, batch_size=batch_size)
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if objective not in CLIP_OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(CLIP_OBJECTIVES)}, got "
                         f"{objective!r}")
    start = time.perf_counter()
    with _run(threads, seed):
        bundle = _load_tiny_clip(get_info(CLIP_FOLDER), None, True, seed, None, text=False)
        core = bundle._core()
        rng = np.random.default_rng([seed, _STREAM, 0])
        labels = rng.integers(0, len(CLS_CLASSES), pictures)
        domains = [DOMAINS[i] for i in rng.integers(0, len(DOMAINS), pictures)]
        features = _features(bundle, _pictures(seed, 1, labels, domains))
        held_labels = np.repeat(np.arange(len(CLS_CLASSES)), HELD_OUT_PER_CLASS)
        held_domains = [DOMAINS[i % len(DOMAINS)] for i in range(len(held_labels))]
        held = _features(bundle, _pictures(seed, 2, held_labels, held_domains))
        texts = bundle._texts(list(CLS_CLASSES))
        held_y = torch.as_tensor(held_labels)
        before = float(_accuracy(core, held, held_y, texts).float().mean()) * 100
        params = [p for k, p in core.named_parameters() if not k.startswith("vision.")]
        for p in params:
            p.requires_grad_(True)
        optimiser = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
        y = torch.as_tensor(labels)
        order = torch.Generator().manual_seed(seed)
        caption_rng = np.random.default_rng([seed, _STREAM, 3])
        losses = []
        core.train()
        for step in range(steps):
            idx = torch.randint(0, pictures, (batch_size,), generator=order)
            image = F.normalize(core.visual_projection(features[idx]), dim=-1)
            if objective == "classes":
                loss = F.cross_entropy(core.logits(image, core.text_embeds(**texts)), y[idx])
            else:
                caps = captions(caption_rng, labels[idx.numpy()],
                                [domains[i] for i in idx.tolist()])
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
                progress(step + 1, steps, losses[-1])
        core.eval()
        right = _accuracy(core, held, held_y, texts)
        per_domain = {d: round(100 * float(right[[i for i, x in enumerate(held_domains)
                                                  if x == d]].float().mean()), 2)
                      for d in DOMAINS}
        state = text_side_state(core)
    folder = tiny_folder(CLIP_FOLDER, out_dir)
    with _staged(folder) as staging:
        save_file(state, str(staging / "model.safetensors"))
        report = {
            "model": CLIP_FOLDER, "seed": seed, "pictures": pictures, "steps": steps,
            "batch_size": batch_size, "lr": lr, "objective": objective, "threads": threads,
            "classes": len(CLS_CLASSES), "template": bundle.template,
            "held_out_pictures": len(held_labels),
            "held_out_accuracy_before": round(before, 2),
            "held_out_accuracy": round(100 * float(right.float().mean()), 2),
            "held_out_accuracy_by_domain": per_domain,
            "final_loss": round(float(np.mean(losses[-50:])), 4),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "weights_sha256": _sha256(staging / "model.safetensors"),
            "versions": _versions(),
        }
        (staging / "pretrain_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return folder
