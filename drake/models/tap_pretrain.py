"""Pretraining the tiny TAP backbones (``tiny-tap``, ``tiny-tap-vilt``) on drake-synth's public
split.

TAP starts from a pretrained FLAVA or ViLT: encoders that already read pictures and text, and
multimodal layers that already relate them (TAP copies those layers into its stacks and experts).
The tiny backbones are given the same start by their own models' pretraining objectives, on
pictures and sentences of ``synth-public-open`` (generic questions about one picture; no client
task's question, see :mod:`drake.synth.public`). Each sentence is the question followed by its
answer, ``"Tell me the side of the orange star where the blue hexagon is. under"``.

Masking: every answer word, and each question word with probability :data:`MASK_RATE`, becomes
``<unk>`` (the tiny vocabulary has no mask token and the pretraining text has no unknown words).
The masked words are predicted through the word embeddings (tied, after a dense + GELU + layer
norm transform, as BERT's head); the answer's words can only be recovered from the picture.

``tiny-tap`` (FLAVA), per batch, the sum of FLAVA's three losses that need no image tokenizer:

* **global contrastive** (FLAVA's ITC): the symmetric cross-entropy of the batch's picture x
  sentence cosine similarities (the image and text encoders' first tokens through FLAVA's
  projections, scaled by FLAVA's learned logit scale), on the unmasked sentences (a question
  alone rarely tells its picture apart; its answer does);
* **MLM**: the masked words from the text encoder alone;
* **MMM (text)**: the masked words from the multimodal encoder over [picture; sentence].

FLAVA's masked-image losses need its dVAE image tokenizer, which the tiny model has no
counterpart of; they are left out.

``tiny-tap-vilt`` (ViLT): ViLT's masked language modelling, the masked words from the single
transformer over [sentence; picture]. ViLT's image-text matching is left out.

AdamW (weight decay 0.01), ``lr`` warmed up over 10% of the steps then a cosine to 10%,
gradient-norm clip 1, single-threaded and deterministic: the same seed gives the same bytes on
the same machine and library versions. Held-out test questions are scored before and after: the
accuracy of the masked answer words (``answer_accuracy``) and, for FLAVA, in-batch
picture-to-sentence retrieval (``retrieval_accuracy``). The weights (the whole FLAVA or ViLT
model) go to ``<cache>/<name>/model.safetensors`` with ``pretrain_report.json``; the suite ships
the default run's files, sha256-pinned (:mod:`drake.models.shipped`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from drake.models.loading import WEIGHTS_FILE, tiny_folder
from drake.models.pretrain import (
    REPORT_FILE,
    _check_budget,
    _lr_at,
    _machine,
    _run,
    _sha256,
    _staged,
    _versions,
    public_samples,
)
from drake.schema import IMAGE_TOKEN

__all__ = ["TAP_PRETRAIN_MODELS", "pretrain_tap", "DEFAULT_TAP_STEPS", "MASK_RATE"]

#: The tiny TAP backbones this module pretrains.
TAP_PRETRAIN_MODELS = ("tiny-tap", "tiny-tap-vilt")
DEFAULT_TAP_STEPS = 1500
DEFAULT_TAP_BATCH_SIZE = 32
DEFAULT_TAP_LR = 1e-3
DEFAULT_TAP_TRAIN_SIZE = 12000
DEFAULT_TAP_EVAL_SIZE = 256
#: probability that a question word is masked (every answer word is)
MASK_RATE = 0.15
_TASK = "synth-public-open"
_EVAL_BATCH = 64

Progress = Callable[[int, int, float], None]


class WordHead(nn.Module):
    """BERT's masked-word head: dense + GELU + layer norm, then the word embeddings (tied)."""

    def __init__(self, embeddings: nn.Embedding) -> None:
        super().__init__()
        hidden = embeddings.embedding_dim
        self.transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.embeddings = embeddings
        self.bias = nn.Parameter(torch.zeros(embeddings.num_embeddings))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.transform(hidden) @ self.embeddings.weight.T + self.bias


class _Batches:
    """Public samples as tensors: pictures at the encoder's side (TAP's normalisation),
    sentences with a leading ``<s>`` (the text encoder's first token), and per sample which
    tokens are answer words."""

    def __init__(self, bundle: Any, samples: Sequence[dict[str, Any]], side: int) -> None:
        from drake.models.tap_bundle import pixels

        self.pixels = torch.stack([pixels(s["images"][0], side) for s in samples])
        tok, limit = bundle.tokenizer, bundle.max_text_tokens
        rows, answers = [], []
        for s in samples:
            question = tok(" ".join(s["prompt"].replace(IMAGE_TOKEN, " ").split()),
                           add_special_tokens=False)["input_ids"]
            answer = tok(s["answer"], add_special_tokens=False)["input_ids"]
            row = ([bundle.bos] + question + answer)[:limit]
            rows.append(row)
            answers.append([False] * (1 + len(question)) + [True] * len(answer))
        width = max(len(r) for r in rows)
        self.ids = torch.full((len(rows), width), bundle.pad, dtype=torch.long)
        self.mask = torch.zeros(len(rows), width, dtype=torch.long)
        self.answer = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, (row, ans) in enumerate(zip(rows, answers)):
            self.ids[i, :len(row)] = torch.tensor(row)
            self.mask[i, :len(row)] = 1
            self.answer[i, :len(row)] = torch.tensor(ans[:len(row)])
        self.unk = bundle.tokenizer.unk_token_id

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: Sequence[int], rng: np.random.Generator
             ) -> tuple[torch.Tensor, ...]:
        """(pixels, masked ids, attention mask, labels: the masked words, -100 elsewhere, and
        the unmasked ids)."""
        index = torch.as_tensor(np.asarray(index))
        ids, mask, answer = self.ids[index], self.mask[index], self.answer[index]
        draw = torch.from_numpy(rng.random(ids.shape) < MASK_RATE)
        chosen = (answer | draw) & mask.bool()
        chosen[:, 0] = False  # the first token stays the sentence's summary position
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        return self.pixels[index], torch.where(chosen, self.unk, ids), mask, labels, ids


def _masked_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)


class _Objective(nn.Module):
    """The backbone's pretraining losses (see the module docstring) and its held-out scores."""

    def __init__(self, base: nn.Module) -> None:
        from transformers import ViltModel

        super().__init__()
        self.base = base
        self.vilt = isinstance(base, ViltModel)
        if self.vilt:
            self.mlm = WordHead(base.embeddings.text_embeddings.word_embeddings)
        else:
            words = base.text_model.embeddings.word_embeddings
            self.mlm, self.mmm = WordHead(words), WordHead(words)

    def forward(self, pixels, ids, mask, labels, full
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(the summed loss, the answer-word logits and a retrieval matrix for scoring)."""
        if self.vilt:
            hidden = self.base(input_ids=ids, attention_mask=mask,
                               pixel_values=pixels).last_hidden_state[:, :ids.shape[1]]
            logits = self.mlm(hidden)
            return _masked_ce(logits, labels), {"words": logits}
        out = self.base(input_ids=ids, attention_mask=mask, pixel_values=pixels)
        image = F.normalize(self.base.image_projection(out.image_output.last_hidden_state[:, 0]),
                            dim=-1)
        whole = self.base.text_model(input_ids=full, attention_mask=mask).last_hidden_state
        text = F.normalize(self.base.text_projection(whole[:, 0]), dim=-1)
        sims = image @ text.T * self.base.logit_scale.exp()
        target = torch.arange(len(sims))
        contrastive = 0.5 * (F.cross_entropy(sims, target) + F.cross_entropy(sims.T, target))
        text_words = self.mlm(out.text_output.last_hidden_state)
        joint = out.multimodal_output.last_hidden_state[:, -ids.shape[1]:]
        words = self.mmm(joint)
        loss = contrastive + _masked_ce(text_words, labels) + _masked_ce(words, labels)
        return loss, {"words": words, "sims": sims}


def _score(objective: _Objective, data: _Batches) -> dict[str, float]:
    """Held-out answer-word accuracy (every answer word masked, question words kept), and for
    FLAVA in-batch picture-to-sentence retrieval accuracy over batches of :data:`_EVAL_BATCH`."""
    hits, total, found, pictures = 0, 0, 0, 0
    objective.eval()
    with torch.no_grad():
        for start in range(0, len(data), _EVAL_BATCH):
            index = list(range(start, min(start + _EVAL_BATCH, len(data))))
            px, ids, mask = data.pixels[index], data.ids[index], data.mask[index]
            answer = data.answer[index] & mask.bool()
            labels = torch.where(answer, ids, torch.full_like(ids, -100))
            _, out = objective(px, torch.where(answer, data.unk, ids), mask, labels, ids)
            keep = labels != -100
            hits += int((out["words"].argmax(-1)[keep] == labels[keep]).sum())
            total += int(keep.sum())
            if "sims" in out and len(index) > 1:
                found += int((out["sims"].argmax(1) == torch.arange(len(index))).sum())
                pictures += len(index)
    objective.train()
    report = {"answer_accuracy": round(hits / max(total, 1), 4)}
    if pictures:
        report["retrieval_accuracy"] = round(found / pictures, 4)
    return report


def pretrain_tap(name: str, *, out_dir: Path | None = None, seed: int = 0,
                 steps: int = DEFAULT_TAP_STEPS, batch_size: int = DEFAULT_TAP_BATCH_SIZE,
                 lr: float = DEFAULT_TAP_LR, train_size: int = DEFAULT_TAP_TRAIN_SIZE,
                 eval_size: int = DEFAULT_TAP_EVAL_SIZE, threads: int | None = 1,
                 progress: Progress | None = None) -> Path:
    """Pretrain tiny TAP backbone ``name`` and write ``<cache>/<name>/`` (weights and report);
    returns that folder."""
    from drake.models import load_model

    if name not in TAP_PRETRAIN_MODELS:
        raise ValueError(f"{name!r} is not a tiny TAP backbone; choose one of "
                         f"{', '.join(TAP_PRETRAIN_MODELS)}")
    _check_budget(steps=steps, batch_size=batch_size, train_size=train_size,
                  eval_size=eval_size, seed=seed)
    started = time.time()
    with _run(threads, seed):
        bundle = load_model(name, pretrained=False, seed=seed)
        base = bundle.base
        base.requires_grad_(True)  # load_model hands out a frozen model
        side = (base.config.image_size if hasattr(base.config, "image_size")
                else base.config.image_config.image_size)
        train = _Batches(bundle, public_samples(_TASK, "train", train_size, seed), side)
        held = _Batches(bundle, public_samples(_TASK, "test", eval_size, seed), side)
        objective = _Objective(base)
        objective.train()
        before = _score(objective, held) if eval_size else {}
        optim = torch.optim.AdamW(objective.parameters(), lr=lr, weight_decay=0.01)
        rng = np.random.default_rng([seed, 7])
        losses = []
        for step in range(steps):
            for group in optim.param_groups:
                group["lr"] = _lr_at(step, steps, lr, steps // 10, 0.1)
            loss, _ = objective(*train.take(rng.choice(len(train), batch_size, replace=False),
                                            rng))
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(objective.parameters(), 1.0)
            optim.step()
            losses.append(float(loss.detach()))
            if progress is not None:
                progress(step + 1, steps, losses[-1])
        after = _score(objective, held) if eval_size else {}
        state = {k: v.detach().contiguous().clone() for k, v in base.state_dict().items()}
    folder = tiny_folder(name, None if out_dir is None else Path(out_dir))
    with _staged(folder) as staging:
        save_file(state, str(staging / WEIGHTS_FILE))
        report = {
            "model": name, "task": _TASK, "seed": seed, "steps": steps,
            "batch_size": batch_size, "lr": lr, "train_size": train_size,
            "eval_size": eval_size, "mask_rate": MASK_RATE,
            "objective": "mlm" if objective.vilt else "contrastive+mlm+mmm",
            "final_loss": round(float(np.mean(losses[-50:])), 4) if losses else None,
            "held_out_before": before, "held_out_after": after,
            "wall_seconds": round(time.time() - started, 1),
            "weights_sha256": _sha256(staging / WEIGHTS_FILE), "versions": _versions(),
            "machine": _machine(),
        }
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    return folder
