"""The TAP model kind as the runtime drives it: batches of mixed tasks, TAP's task-weighted
loss, and each task kind's prediction.

A :class:`TapBundle` holds a pretrained FLAVA or ViLT model until the run tells it its
tasks (:meth:`TapBundle.bind`, from the build's task specs: :func:`layout_for`); it then holds
the :class:`~drake.models.tap.TapModel` of those tasks. Samples are the suite's schema rows:

* images: the sample's first picture, RGB, resized to 64x64 (bilinear) and normalised with
  TAP's channel statistics (:data:`~drake.models.tap.IMAGE_MEAN`, ``IMAGE_STD``); a
  reconstruction's input pictures are all but its last, the stored target;
* text: the prompt without its ``<image>`` placeholders;
* targets: the class id (``label``), the stored target picture (reconstruction: the sample's
  last image, as the inputs are fed), or the answer's tokens followed by the end token (text
  generation, teacher-forced).

A training batch may mix tasks: the loss is TAP's ``sum_o lambda_o * l_o`` with
``lambda_o = |H_o| / |H|``, the task's share of the batch (TAP §5.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from PIL import Image

from drake.models.tap import (
    FLAVA_RANKS,
    IMAGE_MEAN,
    IMAGE_SIDE,
    IMAGE_STD,
    TapLayout,
    TapModel,
    TapTask,
    add_tap_lora,
)
from drake.schema import IMAGE_TOKEN

__all__ = ["TapBundle", "layout_for", "task_kind"]

_MEAN = torch.tensor(IMAGE_MEAN).view(3, 1, 1)
_STD = torch.tensor(IMAGE_STD).view(3, 1, 1)


def task_kind(spec: Mapping[str, Any]) -> str:
    """A task spec's TAP kind: MSE-scored tasks are reconstructions; classification tasks are
    image or text classification by whether they have pictures; the rest text generation."""
    metrics = tuple(spec.get("metrics") or ())
    has_images = int(tuple(spec.get("num_images") or (0, 0))[1]) > 0
    if "mse" in metrics:
        return "image_generation"
    if spec.get("answer_type") == "classification":
        return "image_classification" if has_images else "text_classification"
    return "text_generation"


def layout_for(specs: Sequence[Mapping[str, Any]], classes: Mapping[str, int], *,
               stack_depth: int = 1, max_answer_tokens: int = 48) -> TapLayout:
    """The :class:`TapLayout` of a build's tasks (``specs``: the manifest's task specs;
    ``classes``: each classification task's class count). A task reads pictures when its spec
    has any, and text unless it is an image classification or a reconstruction (their prompt
    is the bare picture, as TAP feeds them)."""
    tasks = []
    for spec in specs:
        kind = task_kind(spec)
        modalities = []
        if int(tuple(spec.get("num_images") or (0, 0))[1]) > 0:
            modalities.append("image")
        if kind in ("text_classification", "text_generation"):
            modalities.append("text")
        n = int(classes.get(spec["id"], 0)) if kind.endswith("classification") else 0
        tasks.append(TapTask(spec["id"], kind, tuple(modalities), n))
    return TapLayout(tasks=tuple(tasks), stack_depth=stack_depth,
                     max_answer_tokens=max_answer_tokens)


def pixels(image: Any, side: int = IMAGE_SIDE) -> torch.Tensor:
    """One picture as TAP feeds it: RGB ``side`` x ``side`` (64 by default), normalised,
    ``[3, side, side]``."""
    from drake.models.images import to_pil

    img = to_pil(image).convert("RGB").resize((side, side), Image.BILINEAR)
    x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
    return (x - _MEAN) / _STD


def unnormalise(images: torch.Tensor) -> list[np.ndarray]:
    """Reconstructions ``[B, 3, H, W]`` back to ``H x W x 3`` arrays in [0, 1] (what the MSE
    metric compares with the stored target picture)."""
    out = (images.detach().float().cpu() * _STD + _MEAN).clamp(0.0, 1.0)
    return [x.permute(1, 2, 0).numpy() for x in out]


class TapBundle:
    """The runtime's handle on a TAP model (see the module docstring).

    Parameters
    ----------
    name, info
        The zoo entry.
    flava : transformers.FlavaModel
        The pretrained encoders and multimodal layers the TAP model is built from.
    tokenizer
        Its tokenizer (``bos``/``eos``/``pad`` tokens, or BERT's ``[CLS]``/``[SEP]``/``[PAD]``).
    max_text_tokens : int
        Prompts are cut to this many tokens (the text encoder's positions).
    """

    kind = "tap"

    def __init__(self, name: str, info: Any, base: Any, tokenizer: Any, *,
                 max_text_tokens: int, stack_depth: int = 1,
                 ranks: Mapping[str, int] | None = None) -> None:
        self.name, self.info, self.base, self.tokenizer = name, info, base, tokenizer
        self.max_text_tokens = int(max_text_tokens)
        #: the stacks' depth L (TAP: 1 on FLAVA, 4 on ViLT) and the LoRA ranks
        self.stack_depth = int(stack_depth)
        self.ranks = dict(ranks or FLAVA_RANKS)
        self.model: Any = base  # the TapModel once bound (then a peft model of it)
        self.layout: TapLayout | None = None
        #: each task's loss in the last :meth:`loss` call, and its private latents
        self.last_losses: dict[str, float] = {}
        self.last_latents: dict[tuple[str, str], torch.Tensor] = {}
        self.bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None \
            else tokenizer.cls_token_id
        self.eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None \
            else tokenizer.sep_token_id
        self.pad = tokenizer.pad_token_id or 0

    def __repr__(self) -> str:
        return f"TapBundle({self.name!r}, tasks={[t.name for t in self.layout.tasks] if self.layout else None})"

    def bind(self, layout: TapLayout) -> None:
        """Build the TAP model of ``layout``'s tasks (stacks of this model's depth) from the
        pretrained model: a FLAVA or a ViLT (frozen base)."""
        from transformers import ViltModel

        self.layout = replace(layout, stack_depth=self.stack_depth)
        build = TapModel.from_vilt if isinstance(self.base, ViltModel) else TapModel.from_flava
        self.model = build(self.base, self.layout)
        self.model.eval()

    def add_adapter(self, model: Any, name: str, *, seed: int) -> Any:
        """One client adapter: TAP's LoRA (this backbone's ranks) and its own copy of the
        fully trained modules."""
        return add_tap_lora(model, name, ranks=self.ranks, seed=seed)

    def adapter_control(self, model: Any, names: Sequence[str]) -> Any:
        """The runtime's control of the adapters (:class:`drake.runtime.client.TapAdapters`)."""
        from drake.runtime.client import TapAdapters

        return TapAdapters(model, names)

    @property
    def tap(self) -> TapModel:
        """The bare :class:`TapModel` (under peft's wrapper once adapters are added)."""
        model = self.model
        return model.base_model.model if hasattr(model, "base_model") and not isinstance(
            model, TapModel) else model

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def hidden_size(self) -> int:
        return self.tap.hidden

    # ------------------------------------------------------------------ batching

    def _text(self, prompts: Sequence[str]) -> dict[str, torch.Tensor]:
        texts = [" ".join(p.replace(IMAGE_TOKEN, " ").split()) for p in prompts]
        enc = self.tokenizer(texts, padding=True, truncation=True,
                             max_length=self.max_text_tokens, return_tensors="pt",
                             add_special_tokens=False)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        empty = mask.sum(1) == 0  # a prompt with no words still gets one token to attend to
        if empty.any():
            ids = ids if ids.shape[1] else torch.full((len(texts), 1), self.pad)
            mask = mask if mask.shape[1] else torch.zeros(len(texts), 1, dtype=torch.long)
            ids[empty, 0], mask[empty, 0] = self.eos, 1
        return {"input_ids": ids, "attention_mask": mask}

    def _answers(self, answers: Sequence[str]) -> dict[str, torch.Tensor]:
        limit = self.layout.max_answer_tokens
        rows = [self.tokenizer(str(a), add_special_tokens=False)["input_ids"][:limit - 1]
                + [self.eos] for a in answers]
        width = max(len(r) for r in rows)
        inputs = torch.full((len(rows), width), self.pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for i, row in enumerate(rows):
            inputs[i, :len(row)] = torch.tensor([self.bos, *row[:-1]])
            labels[i, :len(row)] = torch.tensor(row)
        return {"decoder_input_ids": inputs, "labels": labels}

    def _task_batch(self, task: TapTask, samples: Sequence[Mapping[str, Any]]
                    ) -> dict[str, torch.Tensor]:
        from drake.errors import SchemaError

        batch: dict[str, torch.Tensor] = {}
        generates = task.kind == "image_generation"
        if generates:
            stale = [s.get("id") for s in samples if s.get("answer_type") != "image"]
            if stale:
                raise SchemaError(f"task {task.name}: sample {stale[0]!r} stores no target "
                                  f"image; a reconstruction needs answer_type 'image' with its "
                                  f"target as the last image; rebuild the task")
            batch["target_values"] = torch.stack([pixels(s["images"][-1]) for s in samples])
        if "image" in task.modalities:
            # a reconstruction's inputs are its pictures but the last (the target)
            inputs = [s["images"][:-1] if generates else s["images"] for s in samples]
            missing = [s.get("id") for s, images in zip(samples, inputs) if not images]
            if missing:
                raise SchemaError(f"task {task.name}: sample {missing[0]!r} has no input "
                                  f"picture, and the task reads one; rebuild the task")
            batch["pixel_values"] = torch.stack([pixels(images[0]) for images in inputs])
        if "text" in task.modalities:
            batch.update(self._text([s["prompt"] for s in samples]))
        if task.kind.endswith("classification"):
            batch["labels"] = torch.tensor([int(s["label"]) for s in samples])
        elif task.kind == "text_generation":
            batch.update(self._answers([s["answer"] for s in samples]))
        return {k: v.to(self.device) for k, v in batch.items()}

    def collate(self, samples: Sequence[Mapping[str, Any]], *, train: bool = True
                ) -> dict[str, Any]:
        """``{"tasks": {task: its sub-batch}, "counts": {task: rows}, "order": [...]}``: the
        samples grouped by task in first-appearance order (``order[i]`` is sample ``i``'s
        (task, row in its sub-batch))."""
        groups: dict[str, list[Mapping[str, Any]]] = {}
        order = []
        for s in samples:
            rows = groups.setdefault(s["task"], [])
            order.append((s["task"], len(rows)))
            rows.append(s)
        return {"tasks": {t: self._task_batch(self.layout.task(t), rows)
                          for t, rows in groups.items()},
                "counts": {t: len(rows) for t, rows in groups.items()}, "order": order}

    # ------------------------------------------------------------------ losses

    def task_losses(self, batch: Mapping[str, Any],
                    latents: dict[tuple[str, str], torch.Tensor] | None = None
                    ) -> dict[str, torch.Tensor]:
        """Each task's loss on its part of the batch (``latents``: see
        :meth:`~drake.models.tap.TapModel.features`); a reconstruction's is the MSE to its
        stored target (``target_values``), normalised as the inputs are."""
        return {t: self.tap.loss(t, b, latents) for t, b in batch["tasks"].items()}

    def loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """``sum_o (|H_o| / |H|) * l_o`` (TAP's task weighting); each task's own loss stays in
        :attr:`last_losses` (TAP's per-task histories) and the private latents of the pass in
        :attr:`last_latents` (DisentAFL's loss, in the same graph)."""
        total = sum(batch["counts"].values())
        self.last_latents = {}
        losses = self.task_losses(batch, self.last_latents)
        self.last_losses = {t: float(v.detach()) for t, v in losses.items()}
        return sum(losses[t] * (batch["counts"][t] / total) for t in losses)

    def label_logits(self, batch: Mapping[str, Any]
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Each task's outputs and its labels (none for a reconstruction): what distillation
        between two adapters compares."""
        return self.outputs(batch), {t: b["labels"] for t, b in batch["tasks"].items()
                                     if "labels" in b}

    def outputs(self, batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """Each task's raw output (logits, or a normalised image) on its part of the batch."""
        return {t: self.tap(t, b) for t, b in batch["tasks"].items()}

    # ------------------------------------------------------------------ predictions

    def _inference(self):
        self.model.eval()
        return torch.no_grad()

    def predict(self, samples: Sequence[Mapping[str, Any]]) -> list[Any]:
        """Each sample's prediction, as its task's metric reads it: a class id, an ``H x W x 3``
        reconstruction in [0, 1], or the text of the teacher-forced argmax tokens (TAP's
        predictions for BERTScore and METEOR; the reference answer is fed, its next token
        predicted at every position, up to the first end token)."""
        if not samples:
            return []
        with self._inference():
            batch = self.collate(samples, train=False)
            outs = self.outputs(batch)
        per_task: dict[str, list[Any]] = {}
        for task, out in outs.items():
            kind = self.layout.task(task).kind
            if kind.endswith("classification"):
                per_task[task] = out.argmax(-1).tolist()
            elif kind == "image_generation":
                per_task[task] = unnormalise(out)
            else:
                labels = batch["tasks"][task]["labels"]
                texts = []
                for row, gold in zip(out.argmax(-1).tolist(), labels.tolist()):
                    ids = [t for t, g in zip(row, gold) if g != -100]
                    ids = ids[:ids.index(self.eos)] if self.eos in ids else ids
                    texts.append(self.tokenizer.decode(ids, skip_special_tokens=True).strip())
                per_task[task] = texts
        return [per_task[t][i] for t, i in batch["order"]]

    def generate(self, samples: Sequence[Mapping[str, Any]], **_: Any) -> list[Any]:
        """The runtime's answerer: :meth:`predict` (TAP predicts by teacher forcing)."""
        return self.predict(samples)

