"""PromptFL (Guo et al. 2023): CoOp's prompt context learned federatedly, and its FedProx variant.

Each client trains one context ``ctx`` (``n_ctx`` vectors, CoOp's ``"X X … X {class}."``, see
:mod:`baselines.clip_common`) with cross-entropy over the class logits; the server averages it,
weighted by data size, and every client scores with the average (the global prompt). The frozen
towers never change. ``promptfl-fedprox`` adds ``(μ/2)‖ctx − ctx_g‖²`` to the loss, ``ctx_g`` the
context received this round.

Optimiser as the CoOp-based repositories: SGD, momentum 0.9, weight decay 5e-4, a fresh
optimiser at each client's turn (their single shared trainer leaks momentum from client to
client; here it does not).
"""

from __future__ import annotations

from typing import Any

from baselines.base import AdapterConfig, Method, Payload, proximal, register
from baselines.clip_common import CoOpHead, ParamAdapters, install_head, prompt_head_parts

__all__ = ["PromptFL", "PromptFLProx"]

GLOBAL = "global"
CLIP_SGD = ("sgd", {"momentum": 0.9, "weight_decay": 5e-4})


@register
class PromptFL(Method):
    """PromptFL: a shared CoOp context, averaged by the server."""

    name = "promptfl"
    kinds = ("clip",)
    optimizer = CLIP_SGD
    fresh_optimizer = True
    eval_after_aggregation = True  # scored with the new global part, as the repositories test

    def __init__(self, lr: float = 1e-3, n_ctx: int = 16, ctx_init: str = "", mu: float = 0.0,
                 **hp: Any) -> None:
        super().__init__(lr=lr, n_ctx=n_ctx, ctx_init=ctx_init, mu=mu, **hp)
        self.n_ctx, self.ctx_init, self.mu = int(n_ctx), ctx_init or None, float(mu)

    def adapters(self) -> dict[str, AdapterConfig]:
        return {GLOBAL: AdapterConfig()}

    def install(self, model, *, arch, lora, seed, peers=None):
        core, tokenizer, ctx, template = prompt_head_parts(
            model, peers, arch, n_ctx=self.n_ctx, ctx_init=self.ctx_init, seed=seed)
        head = CoOpHead(core, tokenizer, template, {GLOBAL: ctx})
        install_head(model, head)
        return ParamAdapters(model, head, {GLOBAL: ["ctx." + GLOBAL]})

    def local_train(self, client) -> Payload:
        anchor = [p.detach().clone() for p in client.params(GLOBAL)]
        extra = (lambda c: proximal(c.params(GLOBAL), anchor, self.mu)) if self.mu else None
        loss = self.train_adapter(client, GLOBAL, client.steps, extra=extra)
        return Payload({GLOBAL: client.get(GLOBAL)}, {"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, GLOBAL)


@register
class PromptFLProx(PromptFL):
    """PromptFL + FedProx: the proximal pull ``(μ/2)‖ctx − ctx_g‖²`` (μ 0.5 by default)."""

    name = "promptfl-fedprox"

    def __init__(self, lr: float = 1e-3, mu: float = 0.5, **hp: Any) -> None:
        super().__init__(lr=lr, mu=mu, **hp)
