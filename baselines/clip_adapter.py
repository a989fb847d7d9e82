"""Federated CLIP-Adapter (Gao et al. 2024, github gaopengcuhk/CLIP-Adapter), averaged as FedAvg.

A two-layer bottleneck on the image feature ``f`` (no biases, ReLU after each layer),

    A(f) = ReLU(W₂ ReLU(W₁ f)),   W₁: D → D/4,   W₂: D/4 → D,
    f' = α A(f) + (1 − α) f,      α = 0.2,

then CLIP's logits against the frozen template features of the classes. CLIP-Adapter has no
federated version in the papers' repositories; the natural one trains the adapter locally and
averages it, weighted by data size, and every client scores with the average (recorded as a
departure in the README's method table).

The tower's feature here is already unit-norm; as ``A`` has no bias and ReLU is positively
homogeneous, ``A(c f) = c A(f)`` for ``c > 0``, so adapting the unit feature and normalising
gives exactly the logits of adapting the raw one.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from baselines.base import AdapterConfig, Method, Payload, register
from baselines.clip_common import ParamAdapters, clip_core, install_head
from baselines.promptfl import CLIP_SGD
from drake.models.clip import ClipHead

__all__ = ["ClipAdapter", "ClipAdapterHead"]

GLOBAL = "global"


class ClipAdapterHead(ClipHead):
    """CLIP's logits with the image feature passed through the residual bottleneck."""

    def __init__(self, dim: int, *, ratio: float = 0.2, reduction: int = 4) -> None:
        super().__init__()
        self.ratio = float(ratio)
        self.adapter = nn.Sequential(nn.Linear(dim, dim // reduction, bias=False), nn.ReLU(),
                                     nn.Linear(dim // reduction, dim, bias=False), nn.ReLU())

    def features(self, image: torch.Tensor) -> torch.Tensor:
        """``normalise(α A(f) + (1 − α) f)``."""
        return F.normalize(self.ratio * self.adapter(image) + (1 - self.ratio) * image, dim=-1)

    def forward(self, bundle, samples, classes) -> torch.Tensor:
        return clip_core(bundle.model).logits(self.features(bundle.image_embeds(samples)),
                                              bundle.text_embeds(classes))


@register
class ClipAdapter(Method):
    """Federated CLIP-Adapter: train the image-side residual adapter, average it."""

    name = "clip-adapter"
    kinds = ("clip",)
    optimizer = CLIP_SGD
    fresh_optimizer = True
    eval_after_aggregation = True  # scored with the new global part, as the repositories test

    def __init__(self, lr: float = 1e-3, ratio: float = 0.2, reduction: int = 4,
                 **hp: Any) -> None:
        super().__init__(lr=lr, ratio=ratio, reduction=reduction, **hp)
        self.ratio, self.reduction = float(ratio), int(reduction)

    def adapters(self) -> dict[str, AdapterConfig]:
        return {GLOBAL: AdapterConfig()}

    def install(self, model, *, arch, lora, seed, peers=None):
        core = clip_core(model)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            head = ClipAdapterHead(core.projection_dim, ratio=self.ratio,
                                   reduction=self.reduction)
        install_head(model, head)
        return ParamAdapters(model, head, {GLOBAL: ["adapter"]})

    def local_train(self, client) -> Payload:
        loss = self.train_adapter(client, GLOBAL, client.steps)
        return Payload({GLOBAL: client.get(GLOBAL)}, {"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, GLOBAL)
