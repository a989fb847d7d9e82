"""pFedMoAP (Luo et al., ICLR 2025, github ljaiverson/pFedMoAP): a mixture of other clients'
prompts as experts, weighed per image by a local attention gate.

Each client holds a CoOp context ``P_i`` and a gate (multi-head attention, ``d`` = 128 wide, 8
heads, ``W_q``, ``W_k``, ``W_v``, ``W_o`` linear maps with biases; never shared). The server keeps
a pool of every client's latest trained prompt and sends each client, for its next turn, the
round's data-weighted average prompt (which ``P_i`` restarts from) and up to ``K − 1 = 9`` other
clients' prompts as experts. With the pool's text features of each class read under each expert
(without gradient) and under ``P_i``, and ``pool(·)`` taking every ``D/d``-th coordinate of a
unit-norm feature (not renormalised):

    local_k  = s · cos(img, t_{k,local})
    moe_k    = s · ⟨pool(img), attn(q = pool(img), K = V = [pool(t_{k,local}), pool(t_{k,e})]_e)⟩
    logit_k  = λ · local_k + moe_k,

``attn`` being ``W_o · concat_h softmax(10 · Q_h K_hᵀ) V_h`` (the released code multiplies the
scores by 10, not by 1/√d_h) and ``λ = 0.5``. A client without experts (its first turn) scores
with ``local`` alone. Learning rates as the code: 0.002 for the prompt, 0.01 for the gate.

Departures from the released code, which has bugs here (``shared/reference``): experts are the
``K − 1`` nearest prompts in L2 as the paper describes (the code's "nearest" mixes up list
positions and client ids, and its default takes the first clients of one fixed shuffle;
``selection="random"`` draws ``K − 1`` anew each round); a client's gate is its own from the first
turn (the code hands the previous client's gate on) and stale experts never carry over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.base import AdapterConfig, Method, Payload, register, weighted_average
from baselines.clip_common import (
    CoOpHead,
    ParamAdapters,
    clip_core,
    install_head,
    prompt_head_parts,
)
from baselines.promptfl import CLIP_SGD

__all__ = ["ExpertGate", "PFedMoAP", "PFedMoAPHead", "nearest_experts"]

PROMPT, GATE = "prompt", "gate"
CTX_KEY = "ctx." + PROMPT


class ExpertGate(nn.Module):
    """Multi-head attention with the released code's score scaling (``softmax(c · Q Kᵀ)``)."""

    def __init__(self, dim: int, heads: int = 8, scaling: float = 10.0) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"gate width {dim} is not a multiple of its {heads} heads")
        self.heads, self.scaling = heads, float(scaling)
        self.w_q, self.w_k = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.w_v, self.w_o = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        """``q [G, B, d]`` attends over ``kv [G, E, d]`` (``G`` independent groups: classes);
        returns ``[G, B, d]``."""
        g, b, d = q.shape
        h = self.heads

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(g, x.shape[1], h, d // h).transpose(1, 2)  # [G, h, n, d/h]

        qh, kh, vh = split(self.w_q(q)), split(self.w_k(kv)), split(self.w_v(kv))
        att = torch.softmax(self.scaling * qh @ kh.transpose(-1, -2), dim=-1)
        return self.w_o((att @ vh).transpose(1, 2).reshape(g, b, d))


class PFedMoAPHead(CoOpHead):
    """Local CLIP logits plus the gated mixture of expert prompts (see the module docstring)."""

    def __init__(self, core, tokenizer, template, ctx: torch.Tensor, *, gate_dim: int,
                 lam: float, scaling: float) -> None:
        super().__init__(core, tokenizer, template, {PROMPT: ctx})
        width = core.projection_dim
        self.gate_dim = min(int(gate_dim), width)
        self.stride = width // self.gate_dim
        self.gate = ExpertGate(self.gate_dim, scaling=scaling)
        self.lam = float(lam)
        #: expert contexts ``[E, n_ctx, D]`` of the client in turn (set before each use)
        self.experts: torch.Tensor | None = None

    def pool(self, x: torch.Tensor) -> torch.Tensor:
        """Every ``stride``-th coordinate, ``gate_dim`` of them."""
        return x[..., ::self.stride][..., :self.gate_dim]

    def forward(self, bundle, samples, classes) -> torch.Tensor:
        image = bundle.image_embeds(samples)  # [B, D]
        local = self.text_embeds(bundle, classes)  # [K, D]
        scale = self.core.logit_scale.exp()
        logits = scale * image @ local.T
        if self.experts is None or not len(self.experts):
            return logits
        with torch.no_grad():
            others = torch.stack([self.text_embeds(bundle, classes, e.to(local.device))
                                  for e in self.experts])  # [E, K, D]
        kv = self.pool(torch.cat([local.unsqueeze(0), others]).transpose(0, 1))  # [K, 1+E, d]
        q = self.pool(image).unsqueeze(0).expand(len(classes), -1, -1)  # [K, B, d]
        mixed = self.gate(q, kv)  # [K, B, d]
        moe = torch.einsum("bd,kbd->bk", self.pool(image), mixed)
        return self.lam * logits + scale * moe


def nearest_experts(pool: Mapping[int, torch.Tensor], cid: int, k: int) -> list[int]:
    """The ``k`` clients (other than ``cid``) whose pooled prompts are nearest to ``cid``'s in L2,
    nearest first, ties by id; none when ``cid`` has no prompt in the pool yet."""
    if cid not in pool:
        return []
    mine = pool[cid].flatten().double()
    dist = sorted((float(torch.linalg.vector_norm(p.flatten().double() - mine)), j)
                  for j, p in pool.items() if j != cid)
    return [j for _, j in dist[:k]]


@register
class PFedMoAP(Method):
    """pFedMoAP: a local prompt and gate per client, other clients' prompts as experts."""

    name = "pfedmoap"
    kinds = ("clip",)
    optimizer = CLIP_SGD
    fresh_optimizer = True
    # scored right after local training with its own prompt, as the released code tests (the
    # message would replace the prompt with the average)
    eval_after_aggregation = False

    def __init__(self, lr: float = 2e-3, gate_lr: float = 1e-2, n_ctx: int = 16,
                 num_experts: int = 10, lam: float = 0.5, scaling: float = 10.0,
                 gate_dim: int = 128, selection: str = "nearest", ctx_init: str = "",
                 **hp: Any) -> None:
        if selection not in ("nearest", "random"):
            raise ValueError(f"selection must be nearest or random, got {selection!r}")
        super().__init__(lr=lr, gate_lr=gate_lr, n_ctx=n_ctx, num_experts=num_experts, lam=lam,
                         scaling=scaling, gate_dim=gate_dim, selection=selection,
                         ctx_init=ctx_init, **hp)
        self.gate_lr, self.n_ctx, self.num_experts = float(gate_lr), int(n_ctx), int(num_experts)
        self.lam, self.scaling, self.gate_dim = float(lam), float(scaling), int(gate_dim)
        self.selection, self.ctx_init = selection, ctx_init or None
        #: the server's pool: each client's latest trained prompt
        self.pool: dict[int, torch.Tensor] = {}
        #: the last round's data-weighted average prompt (``None`` before any upload)
        self._global: dict[str, torch.Tensor] | None = None
        self._seed = 0

    def adapters(self) -> dict[str, AdapterConfig]:
        return {PROMPT: AdapterConfig(), GATE: AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {PROMPT: 1.0, GATE: 1.0}

    def install(self, model, *, arch, lora, seed, peers=None):
        self._seed = int(seed)
        core, tokenizer, ctx, template = prompt_head_parts(
            model, peers, arch, n_ctx=self.n_ctx, ctx_init=self.ctx_init, seed=seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed) + 1)
            head = PFedMoAPHead(core, tokenizer, template, ctx, gate_dim=self.gate_dim,
                                lam=self.lam, scaling=self.scaling)
        install_head(model, head)
        return ParamAdapters(model, head, {PROMPT: [CTX_KEY], GATE: ["gate"]},
                             lr_scale={GATE: self.gate_lr / self.lr})

    # --- client ----------------------------------------------------------------------------
    def receive(self, client, message: Payload) -> None:
        """The round's average prompt replaces ``P_i``; the experts replace the last ones."""
        client.set(PROMPT, message.tensors[PROMPT])
        experts = message.tensors.get("experts", {}).get("ctx")
        if experts is None:
            client.state.pop("experts", None)
        else:
            client.state["experts"] = experts

    def _arm(self, client) -> None:
        clip_core(client.bundle.model).head.experts = client.state.get("experts")

    def local_train(self, client) -> Payload:
        self._arm(client)
        loss = self.train_adapter(client, [PROMPT, GATE], client.steps)
        return Payload({PROMPT: client.get(PROMPT)}, {"loss": loss})

    def predict(self, client, samples, answer):
        self._arm(client)
        return answer(samples, self.eval_adapters())

    # --- server ----------------------------------------------------------------------------
    def _experts(self, cid: int, round: int) -> list[int]:
        k = min(self.num_experts, len(self.pool) + (cid not in self.pool)) - 1
        if k <= 0 or cid not in self.pool:
            return []
        if self.selection == "nearest":
            return nearest_experts(self.pool, cid, k)
        others = sorted(j for j in self.pool if j != cid)
        rng = np.random.default_rng([self._seed, round, cid])
        return sorted(rng.choice(others, size=k, replace=False).tolist())

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        for cid, up in uploads.items():
            self.pool[cid] = up.tensors[PROMPT][CTX_KEY].detach().clone()
        if uploads:
            ids = sorted(uploads)
            self._global = weighted_average([uploads[i].tensors[PROMPT] for i in ids],
                                            [max(clients[i].num_samples, 1) for i in ids])
        out: dict[int, Payload] = {}
        if self._global is None:
            return out
        for cid in clients:
            tensors = {PROMPT: self._global}
            chosen = self._experts(cid, round)
            if chosen:
                tensors["experts"] = {"ctx": torch.stack([self.pool[j] for j in chosen])}
            out[cid] = Payload(tensors, {"experts": chosen})
        return out

    def server_state(self) -> dict[str, torch.Tensor]:
        state = super().server_state()
        state.update({f"pool/{cid}": p for cid, p in sorted(self.pool.items())})
        if self._global is not None:
            state.update({f"global/{k}": v for k, v in self._global.items()})
        return state

    def load_server_state(self, state: Mapping[str, torch.Tensor]) -> None:
        super().load_server_state({k: v for k, v in state.items()
                                   if not k.startswith(("pool/", "global/"))})
        self.pool = {int(k.split("/", 1)[1]): v for k, v in state.items()
                     if k.startswith("pool/")}
        glob = {k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("global/")}
        self._global = glob or None

    def global_model(self, arch: str):
        """No global model: the average prompt without a gate and experts is not pFedMoAP's
        classifier."""
        return None
