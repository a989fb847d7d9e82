"""FedMosaic on the Method API (FedMosaic paper §4, Alg. 1), and its Tab. 5 ablations.

Every client model carries two adapters over one frozen base:

* ``local``: trained on the client's stream; it is what the client uploads;
* ``global``: the personalised global module ``G_i`` the server sends back, frozen during local
  training; the two are mixed at every adapted layer by a learnable gate β (Eq. 9), and the
  gates belong to the local state (they are never uploaded).

With ``pqlora`` the last layer of each of ``N_B`` depth blocks (Eq. 7) carries PQ-LoRA (Eq. 6):
its ``P``/``Q`` are width-free, so they are shared across *all* clients through the block map,
while conventional LoRA on the other layers is shared only inside an architecture. Before
federated training the larger models' frozen ``A``/``B`` are aligned to the smallest model's on
the benchmark's public split (§4.2.2; cached per model pair).

With ``sima`` every client samples, every ``f`` local steps, the gradient of the last layer of a
small frozen proxy model (the smallest architecture, adapters off), sanitises it (Gaussian noise,
a random subset of coordinates), folds the round's mean into an EMA ``ĝ`` (Eq. 4) and uploads
``ĝ``. The server weights client ``j``'s module for client ``i`` by ``softmax_j(cos(ĝ_i, ĝ_j)/τ)``
(Eq. 5), over all clients for ``P``/``Q`` and over the same architecture for conventional LoRA.
Without ``sima`` the weights are equal (Tab. 5's 'Vanilla' averages with equal weights).

Registered variants:

=====================  =========  ======  ==============================================
name                   PQ-LoRA    SIMA    Tab. 5 row
=====================  =========  ======  ==============================================
``fedmosaic``          yes        yes     (+) PQ-LoRA & SIMA (Ours)
``fedmosaic-pqlora``   yes        no      (+) PQ-LoRA
``fedmosaic-vanilla``  no         no      Vanilla (equal-weight average within a type)
``fedmosaic-homo``     no         yes     FedMosaic for one architecture (LoRA everywhere)
=====================  =========  ======  ==============================================

Departures from the public code are the building blocks' (see their modules); the options
``exclude_self`` and ``similarity="columnwise"`` give the public code's SIMA variant.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from baselines.base import AdapterConfig, Method, Payload, register
from baselines.fedmosaic.blocks import block_map, lora_target_regex
from baselines.fedmosaic.pqlora import (
    PQLoRALinear,
    activate,
    decoder_layers,
    gate_lora_layers,
    gate_parameters,
    gate_state,
    inject_pqlora,
    load_gate_state,
    load_pq_state,
    pq_modules,
    pq_state,
)
from baselines.fedmosaic.sima import (
    GradientTracker,
    Sanitizer,
    arch_mask,
    cosine_matrix,
    personalized,
    proxy_gradient,
    sima_weights,
)

log = logging.getLogger(__name__)

LOCAL, GLOBAL = "local", "global"


def _peft_params(model: torch.nn.Module, adapter: str) -> dict[str, torch.nn.Parameter]:
    """Conventional (peft) LoRA weights of ``adapter``, keyed without the adapter name."""
    out = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        for i in range(1, len(parts)):
            if parts[i] == adapter and parts[i - 1] in ("lora_A", "lora_B"):
                out[".".join(parts[:i] + parts[i + 1:])] = p
                break
    return out


class MosaicAdapters:
    """FedMosaic's :class:`~baselines.base.AdapterSet` on one shared base model.

    States are flat dicts with three prefixes: ``pq.`` (``P``/``Q`` keyed by block, identical
    across architectures), ``lora.`` (peft weights, architecture-specific) and, for the local
    adapter only, ``gate.`` (every β).
    """

    names = [LOCAL, GLOBAL]

    def __init__(self, model: torch.nn.Module, pq_lr_scale: float = 1.0) -> None:
        self.model = model
        self.has_pq = any(isinstance(m, PQLoRALinear) for m in model.modules())
        self.pq_lr_scale = float(pq_lr_scale)

    def state(self, name: str) -> dict[str, torch.Tensor]:
        out = {f"lora.{k}": p.detach().to("cpu", copy=True)
               for k, p in sorted(_peft_params(self.model, name).items())}
        if self.has_pq:
            out.update({f"pq.{k}": v for k, v in pq_state(self.model, name).items()})
        if name == LOCAL:
            out.update({f"gate.{k}": v for k, v in gate_state(self.model).items()})
        return out

    def load(self, name: str, state: Mapping[str, torch.Tensor]) -> None:
        parts: dict[str, dict[str, torch.Tensor]] = {"lora": {}, "pq": {}, "gate": {}}
        for key, value in state.items():
            prefix, _, rest = key.partition(".")
            if prefix not in parts:
                raise KeyError(f"FedMosaic state key {key!r} has no lora./pq./gate. prefix")
            parts[prefix][rest] = value
        targets = _peft_params(self.model, name)
        if set(targets) != set(parts["lora"]):
            raise KeyError(f"FedMosaic {name} LoRA state does not fit this model: missing "
                           f"{sorted(set(targets) - set(parts['lora']))[:3]}, unexpected "
                           f"{sorted(set(parts['lora']) - set(targets))[:3]}")
        with torch.no_grad():
            for key, p in targets.items():
                p.copy_(parts["lora"][key].to(p.dtype))
        if self.has_pq:
            load_pq_state(self.model, name, parts["pq"])
        if name == LOCAL and parts["gate"]:
            load_gate_state(self.model, parts["gate"])

    def params(self, name: str) -> list[torch.nn.Parameter]:
        return [p for _, group in self.param_groups(name) for p in group]

    def param_groups(self, name: str) -> list[tuple[float, list[torch.nn.Parameter]]]:
        """(learning-rate scale, parameters) of adapter ``name``: the LoRA and gate weights at
        the run's rate, ``P`` and ``Q`` at ``pq_lr_scale`` times it (the paper trains them at
        5e-5 beside 2e-5)."""
        base = list(_peft_params(self.model, name).values())
        if name == LOCAL:
            base += gate_parameters(self.model)
        pq = [t for m in (pq_modules(self.model).values() if self.has_pq else ())
              for t in (m.P[name], m.Q[name])]
        return [(1.0, base), *([(self.pq_lr_scale, pq)] if pq else [])]

    def activate(self, names: Sequence[str], weights: Sequence[float] | None = None,
                 trainable: Sequence[str] = ()) -> None:
        # the gates, not ``weights``, mix local and global (Eq. 9)
        activate(self.model, list(names), trainable=list(trainable))


class FedMosaic(Method):
    """FedMosaic: PQ-LoRA shared across architectures, SIMA-weighted, gated local/global.

    Parameters
    ----------
    num_blocks : int
        ``N_B`` (4 in the paper); lowered to the shallowest model's depth when it is smaller
        (the tiny 2-layer model), which the run's hyper-parameters then record.
    tau : float
        SIMA softmax temperature (0.5).
    every : int
        ``f``: local steps between proxy gradients (10).
    ema_alpha : float
        EMA ratio α of Eq. 4 (the public code's running mean is 0.5).
    noise_std, keep_fraction : float
        Sanitisation of the uploaded gradient: Gaussian noise and the kept share of coordinates.
    exclude_self, similarity
        The public code's SIMA variant: self left out of the weighted sum, and ``"columnwise"``
        (per-column cosine, averaged) instead of the paper's ``"flat"`` cosine; columnwise
        sanitises as the public code does, keeping the first rows of the 2-D gradient
        (recorded as ``subsample`` in the run's hyper-parameters).
    align : bool
        Align the larger models' ``A``/``B`` to the smallest model's on public data.
    align_samples : int
        Public samples used for the alignment.
    b_features : {"adapter", "layer"}
        What B's alignment correlates: B's outputs (the paper, default) or the base layer's
        (see :mod:`baselines.fedmosaic.align`).
    pq_lr_scale : float
        ``P``/``Q``'s learning rate over the run's (2.5: the paper's 5e-5 beside 2e-5), a
        parameter group of its own.

    Local steps: 0.94 of SFT's at equal compute (``compute_ratio``), as the public code gives
    FedMosaic 94 of SFT's 100 iterations for its proxy gradients.
    """

    name = "fedmosaic"
    compute_ratio = 0.94
    pqlora = True
    sima = True
    needs_proxy = True
    kinds = ("llava",)  # PQ-LoRA blocks are decoder layers

    def __init__(self, lr: float = 1e-3, num_blocks: int = 4, tau: float = 0.5, every: int = 10,
                 ema_alpha: float = 0.5, noise_std: float = 1e-4, keep_fraction: float = 0.4,
                 exclude_self: bool = False, similarity: str = "flat", align: bool = True,
                 align_samples: int = 256, b_features: str = "adapter",
                 pq_lr_scale: float = 2.5, **hp: Any) -> None:
        if similarity not in ("flat", "columnwise"):
            raise ValueError(f"similarity must be 'flat' or 'columnwise', got {similarity!r}")
        if b_features not in ("adapter", "layer"):
            raise ValueError(f"b_features must be 'adapter' (B's outputs, the paper) or 'layer' "
                             f"(the base layer's outputs), got {b_features!r}")
        if not float(pq_lr_scale) > 0:
            raise ValueError(f"pq_lr_scale must be > 0, got {pq_lr_scale!r}")
        super().__init__(lr=lr, num_blocks=num_blocks, tau=tau, every=every, ema_alpha=ema_alpha,
                         noise_std=noise_std, keep_fraction=keep_fraction,
                         exclude_self=exclude_self, similarity=similarity, align=align,
                         align_samples=align_samples, b_features=b_features,
                         pq_lr_scale=pq_lr_scale, **hp)
        self.b_features, self.pq_lr_scale = b_features, float(pq_lr_scale)
        self.num_blocks, self.tau, self.every = num_blocks, tau, every
        self.exclude_self, self.similarity = exclude_self, similarity
        self.align, self.align_samples = align, align_samples
        self.ema_alpha, self.noise_std, self.keep_fraction = ema_alpha, noise_std, keep_fraction
        self.tracker: GradientTracker | None = None
        self._extra_flops: list[float] = []

    def adapters(self):
        return {LOCAL: AdapterConfig(), GLOBAL: AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {LOCAL: 1.0, GLOBAL: 1.0}

    # --- set-up ------------------------------------------------------------------------------
    def install(self, model, *, arch, lora, seed, peers=None):
        from drake.models import add_lora

        depths = {a: len(decoder_layers(b.model)) for a, b in (peers or {}).items()}
        depth = len(decoder_layers(model))
        nb = min([self.num_blocks, depth, *depths.values()])
        if nb != self.num_blocks:
            log.info("FedMosaic: N_B lowered from %d to %d (shallowest model)", self.num_blocks, nb)
        self.hparams["num_blocks_used"] = nb
        if self.pqlora:
            bmap = block_map(depth, nb)
            regex = lora_target_regex(bmap)
        else:
            bmap, regex = None, lora["target_regex"]
        if regex is not None:
            for i, name in enumerate((LOCAL, GLOBAL)):
                model = add_lora(model, name, r=lora["r"], alpha=lora["alpha"],
                                 dropout=lora["dropout"], target_regex=regex, seed=seed + i)
            gate_lora_layers(model, LOCAL, GLOBAL)
        if bmap is not None:
            # every architecture starts from the same seed; alignment then moves A/B of the
            # larger ones onto the smallest model's (setup)
            inject_pqlora(model, bmap, r=lora["r"], adapters=(LOCAL, GLOBAL), seed=seed)
        activate(model, [LOCAL, GLOBAL], trainable=[LOCAL])
        return MosaicAdapters(model, pq_lr_scale=self.pq_lr_scale)

    def setup(self, bundles, public, *, seed, cache_dir=None) -> None:
        if self.sima:
            # the columnwise cosine compares columns over rows, so its variant keeps whole rows
            # (the public code's prefix rows) where the paper's flat cosine keeps coordinates
            subsample = "prefix_rows" if self.similarity == "columnwise" else "random"
            self.hparams["subsample"] = subsample
            sanitizer = Sanitizer(noise_std=self.noise_std, keep_fraction=self.keep_fraction,
                                  subsample=subsample, seed=seed)
            self.tracker = GradientTracker(alpha=self.ema_alpha, every=self.every,
                                           sanitizer=sanitizer)
        if not (self.pqlora and self.align and len(bundles) > 1):
            return
        if not public:
            # P and Q are shared across architectures by block index: with A and B unaligned
            # they would be averaged between unrelated bases (paper §4.2.2 aligns on public data)
            from drake.errors import DrakeError

            raise DrakeError(
                f"FedMosaic aligns the PQ-LoRA A/B of the {len(bundles)} architectures "
                f"({', '.join(sorted(bundles))}) on public samples, and this build has none: "
                "build a benchmark that declares public_tasks (drake-synth, drake and hflb do; "
                "rebuild an older build), or run one architecture (--model NAME), or turn the "
                "alignment off knowingly with --hp align=false")
        from baselines.fedmosaic.align import align_pair, aligned_pair

        def size(b):
            return sum(p.numel() for p in b.model.parameters())

        pivot_arch = min(bundles, key=lambda a: (size(bundles[a]), a))
        pivot = bundles[pivot_arch]
        samples = list(public[: self.align_samples])
        for arch in sorted(bundles):
            if arch == pivot_arch:
                continue
            other = bundles[arch]
            same_tok = type(pivot.tokenizer) is type(other.tokenizer) and \
                pivot.tokenizer.get_vocab() == other.tokenizer.get_vocab()
            pool = "tokens" if same_tok else "mean"
            with torch.enable_grad():
                if cache_dir is None:
                    report, hit = align_pair(pivot, other, samples, pool=pool, seed=seed,
                                             b_features=self.b_features), False
                else:
                    report, hit = aligned_pair(pivot, other, samples, pool=pool, seed=seed,
                                               b_features=self.b_features,
                                               cache_dir=Path(cache_dir) / "fedmosaic-align")
            # what the alignment reached: seed-dependent diagnostics, not hyper-parameters (the
            # runs of one setting differ in them)
            self.diagnostics[f"align.{arch}.mse_before"] = round(report.mse_before, 6)
            self.diagnostics[f"align.{arch}.mse_after"] = round(report.mse_after, 6)
            log.info("FedMosaic: aligned %s to %s (held-out MSE %.4g -> %.4g%s)", arch,
                     pivot_arch, report.mse_before, report.mse_after, ", cached" if hit else "")

    # --- client ------------------------------------------------------------------------------
    def local_train(self, client) -> Payload:
        if self.tracker is not None:  # the client's ĝ lives in its record, not here
            self.tracker.put_client(client.id, {k[len("sima."):]: v for k, v in
                                                client.state.items() if k.startswith("sima.")})
        total, calls = 0.0, 0
        for step in range(client.steps):
            batch = client.next_batch()
            loss = client.loss(batch, [LOCAL, GLOBAL], trainable=[LOCAL])
            client.step(LOCAL, loss)
            total += float(loss.detach())
            if self.tracker is not None and self.tracker.due(step):
                proxy = client.proxy
                grad = proxy_gradient(proxy, proxy.collate(list(client.last_samples), train=True))
                if self.similarity == "flat":
                    grad = grad.flatten()
                self.tracker.add(client.id, grad, round=client.round)
                calls += 1
        state = client.get(LOCAL)
        tensors = {LOCAL: {k: v for k, v in state.items() if not k.startswith("gate.")}}
        meta: dict[str, Any] = {"loss": total / client.steps if client.steps else 0.0}
        if self.tracker is not None:
            ghat = self.tracker.end_round(client.id, round=client.round)
            if ghat is not None:
                tensors["sima"] = {"ghat": ghat}
            client.state.update({f"sima.{k}": v
                                 for k, v in self.tracker.pop_client(client.id).items()})
            own = sum(p.numel() for p in client.bundle.model.parameters())
            proxy_n = sum(p.numel() for p in client.proxy.model.parameters())
            # forward + backward of the proxy on ``calls`` batches, against ``steps`` of training
            meta["flops_extra_pct"] = 100.0 * proxy_n * calls / (own * max(client.steps, 1))
        return Payload(tensors, meta)

    # --- server ------------------------------------------------------------------------------
    def _weights(self, uploads, ids, allowed) -> torch.Tensor:
        n = len(ids)
        grads = [uploads[i].tensors.get("sima", {}).get("ghat") for i in ids]
        if self.sima and all(g is not None for g in grads):
            sim = cosine_matrix(grads, mode=self.similarity)
            return sima_weights(sim, self.tau, exclude_self=self.exclude_self, allowed=allowed)
        mask = torch.ones(n, n, dtype=torch.bool) if allowed is None else allowed
        w = mask.double()
        return w / w.sum(dim=1, keepdim=True)

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        ids = sorted(uploads)
        self._extra_flops += [float(uploads[i].meta["flops_extra_pct"]) for i in ids
                              if "flops_extra_pct" in uploads[i].meta]
        archs = [clients[i].arch for i in ids]
        same = arch_mask(archs)
        lora = {i: {k: v for k, v in uploads[i].tensors[LOCAL].items() if k.startswith("lora.")}
                for i in ids}
        pq = {i: {k: v for k, v in uploads[i].tensors[LOCAL].items() if k.startswith("pq.")}
              for i in ids}
        out: dict[int, dict[str, torch.Tensor]] = {i: {} for i in ids}
        if any(lora.values()):
            for i, g in personalized(lora, self._weights(uploads, ids, same), ids).items():
                out[i].update(g)
        if any(pq.values()):
            allowed = None if self.pqlora else same
            for i, g in personalized(pq, self._weights(uploads, ids, allowed), ids).items():
                out[i].update(g)
        return {i: Payload({GLOBAL: out[i]}) for i in ids}

    def server_state(self) -> dict[str, torch.Tensor]:
        state = super().server_state()
        state["flops_extra"] = torch.tensor(self._extra_flops, dtype=torch.float64)
        return state

    def load_server_state(self, state) -> None:
        super().load_server_state(state)
        if "flops_extra" in state:
            self._extra_flops = [float(x) for x in state["flops_extra"].tolist()]

    @property
    def flops_extra_pct(self) -> float | None:
        """Mean extra training FLOPs against SFT's, in percent (SIMA's proxy passes)."""
        if not self.sima:
            return 0.0
        vals = [x for x in self._extra_flops if math.isfinite(x)]
        return sum(vals) / len(vals) if vals else None


@register
class FedMosaicPQ(FedMosaic):
    """Tab. 5 '(+) PQ-LoRA': PQ-LoRA across architectures, equal weights, no SIMA."""

    name = "fedmosaic-pqlora"
    sima = False
    needs_proxy = False


@register
class FedMosaicVanilla(FedMosaic):
    """Tab. 5 'Vanilla': gated local/global LoRA, global = equal-weight mean within a type."""

    name = "fedmosaic-vanilla"
    pqlora = False
    sima = False
    needs_proxy = False


@register
class FedMosaicHomo(FedMosaic):
    """FedMosaic for a single architecture: SIMA over conventional LoRA on every layer."""

    name = "fedmosaic-homo"
    pqlora = False

    def install(self, model, *, arch, lora, seed, peers=None):
        if peers and len(peers) > 1:
            raise ValueError(f"fedmosaic-homo needs one architecture, the federation has "
                             f"{sorted(peers)}; use fedmosaic (or a homo- model mix)")
        return super().install(model, arch=arch, lora=lora, seed=seed, peers=peers)


register(FedMosaic)
