"""FedOTP (Li et al., CVPR 2024, github HongxiaLee/FedOTP): a global and a local prompt matched to
the image's patch tokens by unbalanced optimal transport.

Each client holds ``N = 2`` CoOp contexts: ``ctx[0]`` global (averaged, data-weighted) and
``ctx[1]`` local (kept). For an image with unit-norm patch features ``p_1 … p_M`` (the class
token left out) and class ``k`` read under each context, ``t_{k,1} … t_{k,N}``:

    sim[m, n] = ⟨p_m, t_{k,n}⟩,   K = exp(−(1 − sim) / ε),
    T = argmin over plans with row sums ≤ 1/M and column sums = γ/N (entropic, see
        :func:`unbalanced_ot`), computed without gradient,
    logit_k = exp(t) · Σ_{m,n} T[m, n] sim[m, n].

The plan comes from the released solver's scaling iterations: ``u = min(a / (K v), 1)``,
``v = b / (Kᵀ u)`` from ``u = v = 1`` until ``mean |Δv| < thresh`` (at most ``max_iter``), then
``T = diag(u) K diag(v)``; ``a = 1/M`` on the patches, ``b = γ/N`` on the prompts. The kernel
runs in float32 (``exp(−C/0.01)`` underflows in half precision). Defaults as the released
CIFAR-100 / ViT-B/16 script: ``ε = 0.1``, ``γ = 0.8``, ``thresh = 1e-3``, ``max_iter = 100``,
``n_ctx = 16`` random vectors per prompt (``ctx_init="a photo of a"``: CoOp's word-initialised
variant). Clients score with both prompts.
"""

from __future__ import annotations

from typing import Any

import torch

from baselines.base import AdapterConfig, Method, Payload, register
from baselines.clip_common import CoOpHead, ParamAdapters, install_head, prompt_head_parts
from baselines.promptfl import CLIP_SGD

__all__ = ["FedOTP", "FedOTPHead", "unbalanced_ot"]

GLOBAL, LOCAL = "global", "local"


def unbalanced_ot(kernel: torch.Tensor, gamma: float, *, thresh: float = 1e-3,
                  max_iter: int = 100) -> torch.Tensor:
    """The plan ``T [..., M, N]`` of FedOTP's unbalanced OT for kernels ``K [..., M, N]``:
    column sums ``γ/N``, row sums at most ``1/M`` (see the module docstring)."""
    kernel = kernel.float()
    m, n = kernel.shape[-2], kernel.shape[-1]
    a, b = 1.0 / m, gamma / n
    u = torch.ones(kernel.shape[:-1], dtype=kernel.dtype, device=kernel.device)
    v = torch.ones((*kernel.shape[:-2], n), dtype=kernel.dtype, device=kernel.device)
    for _ in range(int(max_iter)):
        previous = v
        u = torch.clamp(a / (kernel * v.unsqueeze(-2)).sum(-1), max=1.0)
        v = b / (kernel * u.unsqueeze(-1)).sum(-2)
        if (v - previous).abs().mean() < thresh:
            break
    return u.unsqueeze(-1) * kernel * v.unsqueeze(-2)


class FedOTPHead(CoOpHead):
    """Transport-weighted logits over the active prompts (both, or the global one alone)."""

    def __init__(self, core, tokenizer, template, contexts, *, eps: float, gamma: float,
                 thresh: float, max_iter: int) -> None:
        super().__init__(core, tokenizer, template, contexts)
        self.eps, self.gamma, self.thresh, self.max_iter = eps, gamma, thresh, max_iter
        self.active: list[str] = [GLOBAL, LOCAL]

    def forward(self, bundle, samples, classes) -> torch.Tensor:
        names = [n for n in (GLOBAL, LOCAL) if n in self.active]
        text = torch.stack([self.text_embeds(bundle, classes, self.ctx[n]) for n in names])
        patches = bundle.image_tokens(samples).float()  # [B, M, D]
        sim = torch.einsum("bmd,nkd->bkmn", patches, text.float())  # [B, K, M, N]
        with torch.no_grad():
            plan = unbalanced_ot(torch.exp(-(1.0 - sim) / self.eps), self.gamma,
                                 thresh=self.thresh, max_iter=self.max_iter)
        if not torch.isfinite(plan).all():
            raise FloatingPointError(f"FedOTP's transport plan is not finite at eps={self.eps}; "
                                     f"raise eps (--hp eps=0.1)")
        return self.core.logit_scale.exp() * (plan * sim).sum(dim=(-1, -2))


@register
class FedOTP(Method):
    """FedOTP: global prompt averaged, local prompt kept, both matched to patches by UOT."""

    name = "fedotp"
    kinds = ("clip",)
    optimizer = CLIP_SGD
    fresh_optimizer = True
    eval_after_aggregation = True  # scored with the new global part, as the repositories test

    def __init__(self, lr: float = 1e-3, n_ctx: int = 16, eps: float = 0.1, gamma: float = 0.8,
                 thresh: float = 1e-3, max_iter: int = 100, ctx_init: str = "",
                 **hp: Any) -> None:
        super().__init__(lr=lr, n_ctx=n_ctx, eps=eps, gamma=gamma, thresh=thresh,
                         max_iter=max_iter, ctx_init=ctx_init, **hp)
        self.n_ctx, self.eps, self.gamma = int(n_ctx), float(eps), float(gamma)
        self.ctx_init = ctx_init or None
        self.thresh, self.max_iter = float(thresh), int(max_iter)

    def adapters(self) -> dict[str, AdapterConfig]:
        return {GLOBAL: AdapterConfig(), LOCAL: AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {GLOBAL: 1.0, LOCAL: 1.0}

    def install(self, model, *, arch, lora, seed, peers=None):
        core, tokenizer, ctx0, template = prompt_head_parts(
            model, peers, arch, n_ctx=self.n_ctx, ctx_init=self.ctx_init, seed=seed)
        gen = torch.Generator().manual_seed(int(seed) + 1)
        # both prompts start as CoOp's: random, or the ctx_init words (the local one then with
        # the random draw added, so that the two differ)
        ctx1 = torch.randn(ctx0.shape, generator=gen) * 0.02 + (ctx0 if self.ctx_init else 0)
        head = FedOTPHead(core, tokenizer, template, {GLOBAL: ctx0, LOCAL: ctx1}, eps=self.eps,
                          gamma=self.gamma, thresh=self.thresh, max_iter=self.max_iter)
        install_head(model, head)
        return ParamAdapters(model, head, {GLOBAL: ["ctx." + GLOBAL], LOCAL: ["ctx." + LOCAL]})

    def local_train(self, client) -> Payload:
        loss = self.train_adapter(client, [GLOBAL, LOCAL], client.steps)
        return Payload({GLOBAL: client.get(GLOBAL)}, {"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, GLOBAL)
