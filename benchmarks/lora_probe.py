"""What the measurement scripts share: a fresh LoRA on a pretrained tiny model, trained on a
sample list, and multiple-choice accuracy by option likelihood.

Used by ``learnability.py`` (one task at a time) and ``transfer.py`` (one client's tasks, or the
other clients' pooled). The LoRA is the zoo's default for the model (``drake models list``), as
a federated method would add it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch


def hits(bundle, samples: Sequence[dict[str, Any]], batch: int = 32) -> list[bool]:
    """Whether each multiple-choice sample's gold option has the highest likelihood."""
    out: list[bool] = []
    bundle.model.eval()
    with torch.no_grad():
        for i in range(0, len(samples), batch):
            part = samples[i:i + batch]
            out += [s["choices"][int(np.argmax(ll))] == s["answer"]
                    for s, ll in zip(part, bundle.choice_logliks(part))]
    return out


def accuracy(bundle, samples: Sequence[dict[str, Any]], batch: int = 32) -> float:
    """Percent of multiple-choice ``samples`` whose gold option has the highest likelihood."""
    return 100.0 * sum(hits(bundle, samples, batch)) / len(samples)


def open_scores(bundle, samples: Sequence[dict[str, Any]], batch: int = 32
                ) -> tuple[float, float]:
    """Token F1 and exact match (both in percent) of greedy answers to open-ended ``samples``,
    the metrics FedMosaic scores DRAKE's open-ended tasks with."""
    from evaluators import token_f1

    longest = max(len(bundle.tokenizer(s["answer"], add_special_tokens=False)["input_ids"])
                  for s in samples)
    outputs: list[str] = []
    for i in range(0, len(samples), batch):
        outputs += bundle.generate(list(samples[i:i + batch]), max_new_tokens=longest + 2)
    answers = [s["answer"] for s in samples]
    exact = 100.0 * float(np.mean([o.strip() == a.strip() for o, a in zip(outputs, answers)]))
    return token_f1(outputs, answers), exact


def lora_bundle(model: str, model_cache: str | None, seed: int, *, full: bool = False,
                train_vision: bool = False, device: str = "cpu"):
    """A pretrained tiny model (the shipped weights when ``model_cache`` is None) with a fresh
    default LoRA, on ``device``; returns ``(bundle, trainable parameters)``. The LoRA's
    initial weights are drawn on the CPU, so they are the same on every device."""
    from drake.models import add_lora, load_model

    torch.manual_seed(seed)
    bundle = load_model(model, cache_dir=Path(model_cache) if model_cache else None)
    for p in bundle.model.parameters():
        p.requires_grad_(False)
    info = dict(bundle.info.lora_defaults)
    bundle.model = add_lora(bundle.model, "probe", r=info["r"], alpha=info["alpha"],
                            target_regex=info.get("target_regex"), seed=seed)
    bundle.model.to(device)
    params = [p for n, p in bundle.model.named_parameters() if "lora_" in n or full or (
        train_vision and ("multi_modal_projector" in n or "vision_tower" in n))]
    for p in params:
        p.requires_grad_(True)
    return bundle, params


def train(bundle, params, samples: Sequence[dict[str, Any]], *, steps: int, batch_size: int,
          lr: float, seed: int, every: int = 0,
          on_eval: Callable[[int], None] | None = None) -> list[float]:
    """AdamW on batches drawn with a seeded generator; ``on_eval(step)`` every ``every`` steps.
    Returns the loss of each step."""
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(1, steps + 1):
        bundle.model.train()
        idx = rng.choice(len(samples), size=batch_size, replace=len(samples) < batch_size)
        loss = bundle.loss(bundle.collate([samples[i] for i in idx], train=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if on_eval is not None and every and step % every == 0:
            on_eval(step)
    return losses
