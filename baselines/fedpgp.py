"""FedPGP (Cui et al., ICML 2024, github TianyuCuiOvO/FedPGP): a global prompt with a low-rank
personal part, and a contrastive term that keeps the global prompt near CLIP's own.

The context of client ``i`` is ``ctx_i = σ + U_i V_i`` (``σ``: ``n_ctx × D``, global; ``U_i``:
``n_ctx × b``, ``V_i``: ``b × D``, personal; all drawn ``N(0, 0.02²)``). For each class ``k`` three
text features are read: ``t0`` from the anchor prompt (no context), ``tσ`` with ``σ`` and ``tp``
with ``σ + U V``. The loss is

    CE(exp(t) · cos(img, tp), y) + μ · mean_k CE([cos(t0_k, tσ_k), cos(tσ_k, tp_k)] / τ, 0),

which pulls the global prompt toward the anchor's knowledge and pushes the personal prompt away
from the global one. Only ``σ`` is averaged (data-weighted); clients score with ``σ + U V``.
Defaults as the released script: ``b = 8``, ``μ = 0.5``, ``τ = 0.5``, ``n_ctx = 16`` random
vectors (``ctx_init="a photo of a"`` starts σ from those words, CoOp's variant), one prompt
(the script's ``num_prompt 2`` makes logits over ``2 × classes`` while the labels cover only
the first block).

The anchor is CLIP's hand-crafted prompt (``"a photo of a {}."``) as the paper describes;
the released code reads the frozen ``"X X … X"`` placeholder instead (``anchor="placeholder"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from baselines.base import AdapterConfig, Method, Payload, register
from baselines.clip_common import (
    CoOpHead,
    ParamAdapters,
    clip_core,
    install_head,
    prompt_head_parts,
)
from baselines.promptfl import CLIP_SGD

__all__ = ["FedPGP", "FedPGPHead", "pgp_contrastive"]

GLOBAL, LOCAL = "global", "local"
ANCHOR = "a photo of a {}."


def pgp_contrastive(t0: torch.Tensor, t_sigma: torch.Tensor, t_p: torch.Tensor,
                    temperature: float) -> torch.Tensor:
    """``mean_k CE([cos(t0_k, tσ_k), cos(tσ_k, tp_k)] / τ, 0)`` over the rows (classes)."""
    pos = F.cosine_similarity(t0, t_sigma, dim=-1)
    neg = F.cosine_similarity(t_sigma, t_p, dim=-1)
    logits = torch.stack([pos, neg], dim=-1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long,
                                               device=logits.device))


class FedPGPHead(CoOpHead):
    """CLIP's logits with the context ``σ`` (global alone) or ``σ + U V`` (personal active)."""

    def __init__(self, core, tokenizer, template, sigma: torch.Tensor, u: torch.Tensor,
                 v: torch.Tensor, *, anchor: str) -> None:
        super().__init__(core, tokenizer, template, {GLOBAL: sigma})
        self.u = nn.Parameter(u.detach().clone())
        self.v = nn.Parameter(v.detach().clone())
        self.anchor = anchor
        self.active: list[str] = [GLOBAL, LOCAL]

    def context(self) -> torch.Tensor:
        sigma = self.ctx[GLOBAL]
        return sigma + self.u @ self.v if LOCAL in self.active else sigma

    def contrastive(self, bundle, classes: Sequence[str], temperature: float) -> torch.Tensor:
        """The contrastive term over ``classes`` (gradients reach σ, U and V)."""
        with torch.no_grad():
            if self.anchor == "placeholder":
                t0 = bundle.text_embeds(classes, self.prompt.template)
            else:
                t0 = bundle.text_embeds(classes, ANCHOR)
        sigma = self.ctx[GLOBAL]
        t_sigma = self.text_embeds(bundle, classes, sigma)
        t_p = self.text_embeds(bundle, classes, sigma + self.u @ self.v)
        return pgp_contrastive(t0, t_sigma, t_p, temperature)


@register
class FedPGP(Method):
    """FedPGP: global σ averaged, personal U·V kept, CE plus the prompt-contrastive term."""

    name = "fedpgp"
    kinds = ("clip",)
    optimizer = CLIP_SGD
    fresh_optimizer = True
    eval_after_aggregation = True  # scored with the new global part, as the repositories test

    def __init__(self, lr: float = 1e-3, n_ctx: int = 16, bottleneck: int = 8, mu: float = 0.5,
                 temperature: float = 0.5, anchor: str = "handcrafted", ctx_init: str = "",
                 **hp: Any) -> None:
        if anchor not in ("handcrafted", "placeholder"):
            raise ValueError(f"anchor must be handcrafted or placeholder, got {anchor!r}")
        super().__init__(lr=lr, n_ctx=n_ctx, bottleneck=bottleneck, mu=mu,
                         temperature=temperature, anchor=anchor, ctx_init=ctx_init, **hp)
        self.n_ctx, self.bottleneck, self.ctx_init = int(n_ctx), int(bottleneck), ctx_init or None
        self.mu, self.temperature, self.anchor = float(mu), float(temperature), anchor

    def adapters(self) -> dict[str, AdapterConfig]:
        return {GLOBAL: AdapterConfig(), LOCAL: AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {GLOBAL: 1.0, LOCAL: 1.0}

    def install(self, model, *, arch, lora, seed, peers=None):
        core, tokenizer, sigma, template = prompt_head_parts(
            model, peers, arch, n_ctx=self.n_ctx, ctx_init=self.ctx_init, seed=seed)
        gen = torch.Generator().manual_seed(int(seed) + 1)
        u = torch.randn(len(sigma), self.bottleneck, generator=gen) * 0.02
        v = torch.randn(self.bottleneck, sigma.shape[1], generator=gen) * 0.02
        head = FedPGPHead(core, tokenizer, template, sigma, u, v, anchor=self.anchor)
        install_head(model, head)
        return ParamAdapters(model, head, {GLOBAL: ["ctx." + GLOBAL], LOCAL: ["u", "v"]})

    def local_train(self, client) -> Payload:
        head = clip_core(client.bundle.model).head
        # the batch's candidates are the bundle's training classes
        loss = self.train_adapter(
            client, [GLOBAL, LOCAL], client.steps,
            extra=lambda c: self.mu * head.contrastive(c.bundle, c.bundle.classes,
                                                       self.temperature))
        return Payload({GLOBAL: client.get(GLOBAL)}, {"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, GLOBAL)
