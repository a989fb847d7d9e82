"""Federated CLIP-LoRA (Zanella & Ben Ayed 2024, github MaxZanella/CLIP-LoRA), averaged as FedAvg.

LoRA on the query, key and value maps of every block of both encoders, rank 2, alpha 1 scaled by
``α/√r`` (peft scales by ``α/r``, so ``α = √2`` at ``r = 2``), dropout 0.25; AdamW, learning
rate 2e-4, weight decay 1e-2 as the paper. CLIP-LoRA has no federated version in the papers'
repositories; the natural one (FedAvg of A and B separately, weighted by data size, every client
scoring with the average) is what runs, as the reference notes record. The paper's cosine
schedule over ``500 × shots`` iterations is not applied: runs here are counted in rounds.
"""

from __future__ import annotations

import math
from typing import Any

from baselines.base import AdapterConfig, Method, Payload, register

__all__ = ["CLIP_QKV_REGEX", "ClipLoRA"]

#: q, k and v of both encoders: the Swin tower of ``tiny-clip`` (``query``/``key``/``value``, or
#: ``q_proj``/``k_proj``/``v_proj`` as transformers v5 names them), CLIP's
#: ``q_proj``/``k_proj``/``v_proj`` in both towers of a Hub ``CLIPModel`` and in tiny-clip's text
#: transformer.
CLIP_QKV_REGEX = (r"(.*\.)?(vision|vision_model|text|text_model)\."
                  r".*\.(query|key|value|q_proj|k_proj|v_proj)")
GLOBAL = "global"


@register
class ClipLoRA(Method):
    """Federated CLIP-LoRA: LoRA on q, k, v of both encoders, averaged each round."""

    name = "clip-lora"
    kinds = ("clip",)
    optimizer = ("adamw", {"weight_decay": 1e-2})
    fresh_optimizer = True
    eval_after_aggregation = True  # scored with the new global part, as the repositories test

    def __init__(self, lr: float = 2e-4, r: int = 2, dropout: float = 0.25, **hp: Any) -> None:
        super().__init__(lr=lr, r=r, dropout=dropout, **hp)
        self.r, self.dropout = int(r), float(dropout)

    def adapters(self) -> dict[str, AdapterConfig]:
        # alpha / r = 1 / sqrt(r), CLIP-LoRA's scale
        return {GLOBAL: AdapterConfig(r=self.r, alpha=math.sqrt(self.r), dropout=self.dropout,
                                      target_regex=CLIP_QKV_REGEX)}

    def local_train(self, client) -> Payload:
        loss = self.train_adapter(client, GLOBAL, client.steps)
        return Payload({GLOBAL: client.get(GLOBAL)}, {"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, GLOBAL)
