"""SIMA, FedMosaic's similarity-aware aggregation (§4.1, Eq. 3-5, Alg. 1).

Each client describes its task by the gradient of a *frozen* small proxy model ``W_s`` (the
smallest client model, adapters off) on its own batches, last layer only (Eq. 3), sampled every
``f = 10`` local steps. A decayed gradient tracks the drifting stream (Eq. 4)::

    ĝ_i(t) = (1 - α) ĝ_i(t-1) + α g_i(t),    ĝ_i(0) = 0

with ``g_i(t)`` the mean of the round's sampled gradients (Alg. 1 applies Eq. 4 once per round).
The server turns the decayed gradients into personal mixing weights (Eq. 5)::

    S_ij = cos(ĝ_i, ĝ_j),   w_ij = softmax_j(S_ij / τ),   G_i = Σ_j w_ij L_j,   τ = 0.5

Before a gradient leaves the client it is *sanitised*: a subset of its coordinates is kept
(the same subset for every client, or cosines would compare different coordinates) and Gaussian
noise is added, as the public code (and the Co-LoRA summary) does.

This module is pure tensors plus one small stateful :class:`GradientTracker`; the Method
plugs them into its client and server hooks.

Deviations of the public code, offered as options:

* it excludes client ``i`` from its own global module (``exclude_self=True``: the softmax runs
  over the others);
* its similarity is "layer-wise": the gradient is a matrix and the cosine is taken per column,
  then averaged over columns (``mode="columnwise"``);
* it keeps the first 40 % of the gradient's rows instead of a random subset
  (``Sanitizer(subsample="prefix_rows")``), with noise std 1e-4;
* its first decayed gradient is the round's gradient itself, not ``α g`` (``first="copy"``),
  and it uses ``(old + new) / 2``, i.e. α = 0.5;
* its "last layer" is the last decoder layer's ``mlp.down_proj`` (the LM head's gradient has a
  vocabulary-sized dimension); :func:`proxy_gradient` does the same by default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from baselines.fedmosaic.pqlora import adapters_off, decoder_layers

__all__ = [
    "ema",
    "Sanitizer",
    "cosine_matrix",
    "arch_mask",
    "sima_weights",
    "mix",
    "personalized",
    "GradientTracker",
    "proxy_gradient",
]

State = dict[str, torch.Tensor]


def ema(prev: torch.Tensor | None, new: torch.Tensor, alpha: float) -> torch.Tensor:
    """Eq. 4: ``(1 - α) prev + α new``; ``prev=None`` stands for the zero start of Alg. 1."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"EMA ratio alpha must be in (0, 1], got {alpha}")
    if prev is None:
        return alpha * new
    if prev.shape != new.shape:
        raise ValueError(f"EMA of shapes {tuple(prev.shape)} and {tuple(new.shape)}; "
                         "every gradient of a client must come from the same proxy layer")
    return (1.0 - alpha) * prev + alpha * new


@dataclass(frozen=True)
class Sanitizer:
    """Coordinate subsampling plus Gaussian noise on a gradient before it is shared.

    Parameters
    ----------
    noise_std : float
        Standard deviation of the added Gaussian noise (0 turns it off). Public code: 1e-4.
    keep_fraction : float
        Fraction of coordinates kept, in (0, 1] (1 keeps all). Public code: 0.4.
    subsample : {"random", "prefix_rows"}
        ``random``: a uniformly random subset of the flattened coordinates, drawn from ``seed``
        and the gradient's shape only, so it is the same for every client; the result is 1-D.
        ``prefix_rows``: the first ``keep_fraction`` of the rows of a 2-D gradient (public
        code); the result stays 2-D, as :func:`cosine_matrix`'s ``columnwise`` mode needs.
    seed : int
        Seed of the coordinate subset and base seed of the noise.

    Example
    -------
    >>> s = Sanitizer(noise_std=0.0, keep_fraction=0.5, seed=1)
    >>> s(torch.arange(4.0), key=(0,)).shape
    torch.Size([2])
    """

    noise_std: float = 1e-4
    keep_fraction: float = 0.4
    subsample: Literal["random", "prefix_rows"] = "random"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {self.noise_std}")
        if not 0.0 < self.keep_fraction <= 1.0:
            raise ValueError(f"keep_fraction must be in (0, 1], got {self.keep_fraction}")
        if self.subsample not in ("random", "prefix_rows"):
            raise ValueError(f"subsample must be 'random' or 'prefix_rows', got {self.subsample!r}")

    def indices(self, numel: int) -> torch.Tensor:
        """The kept coordinates (sorted) of a flattened gradient of ``numel`` entries."""
        k = max(1, int(numel * self.keep_fraction))
        rng = np.random.default_rng([int(self.seed), int(numel), 0x5133])
        return torch.from_numpy(np.sort(rng.permutation(numel)[:k]))

    def __call__(self, grad: torch.Tensor, *, key: Sequence[int]) -> torch.Tensor:
        """Sanitise ``grad``: :meth:`keep` then :meth:`noisy`."""
        return self.noisy(self.keep(grad), key=key)

    def keep(self, grad: torch.Tensor) -> torch.Tensor:
        """The kept part of ``grad`` (float32, on the CPU), without noise."""
        g = grad.detach().to(torch.float32).cpu()
        if self.subsample == "random":
            kept = g.reshape(-1)
            if self.keep_fraction < 1.0:
                kept = kept[self.indices(kept.numel())]
            return kept
        if g.ndim != 2:
            raise ValueError(f"prefix_rows subsampling needs a 2-D gradient, got {g.ndim}-D")
        return g[: max(1, int(g.shape[0] * self.keep_fraction))]

    def noisy(self, kept: torch.Tensor, *, key: Sequence[int]) -> torch.Tensor:
        """``kept`` plus Gaussian noise of std ``noise_std``, a function of ``(seed, *key)``."""
        if self.noise_std <= 0:
            return kept
        rng = np.random.default_rng([int(self.seed), *(int(x) for x in key), 0x4E01])
        noise = torch.from_numpy(rng.standard_normal(tuple(kept.shape))).to(kept.dtype)
        return kept + self.noise_std * noise

    def settings(self) -> dict[str, Any]:
        """JSON-able settings, for results files."""
        return {"noise_std": self.noise_std, "keep_fraction": self.keep_fraction,
                "subsample": self.subsample, "seed": self.seed}


def cosine_matrix(grads: Sequence[torch.Tensor],
                  mode: Literal["flat", "columnwise"] = "flat") -> torch.Tensor:
    """``S_ij = cos(ĝ_i, ĝ_j)`` (Eq. 5), float64 ``N x N``.

    ``flat`` compares the flattened gradients (the paper). ``columnwise`` takes 2-D gradients
    and averages the per-column cosines (the public code's "layer-wise" similarity). A zero
    gradient has cosine 0 with everything.
    """
    if not grads:
        raise ValueError("cosine_matrix needs at least one gradient")
    shapes = {tuple(g.shape) for g in grads}
    if len(shapes) != 1:
        raise ValueError(f"gradients have different shapes {sorted(shapes)}; all clients must "
                         "use the same proxy layer and sanitiser")
    if mode == "flat":
        G = torch.stack([g.detach().reshape(-1).to(torch.float64) for g in grads])
        G = torch.nn.functional.normalize(G, dim=1)
        return G @ G.T
    if mode == "columnwise":
        if grads[0].ndim != 2:
            raise ValueError("columnwise similarity needs 2-D gradients (rows x columns)")
        G = torch.stack([g.detach().to(torch.float64) for g in grads])  # N x rows x cols
        G = torch.nn.functional.normalize(G, dim=1)
        return torch.einsum("irc,jrc->ij", G, G) / G.shape[2]
    raise ValueError(f"mode must be 'flat' or 'columnwise', got {mode!r}")


def arch_mask(archs: Sequence[str]) -> torch.Tensor:
    """``allowed[i, j]`` = clients ``i`` and ``j`` share an architecture (for conventional LoRA)."""
    return torch.tensor([[a == b for b in archs] for a in archs], dtype=torch.bool)


def sima_weights(sim: torch.Tensor, tau: float = 0.5, *, exclude_self: bool = False,
                 allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Row-wise ``softmax_j(S_ij / τ)`` over the allowed ``j`` (Eq. 5); each row sums to 1.

    Parameters
    ----------
    sim : Tensor
        ``N x N`` similarities.
    tau : float
        Softmax temperature (0.5 in the paper).
    exclude_self : bool
        Leave ``j = i`` out (public code).
    allowed : Tensor of bool, optional
        ``N x N`` mask of admissible pairs, e.g. :func:`arch_mask` for conventional LoRA, which
        can only mix within an architecture.

    Returns
    -------
    Tensor
        ``N x N`` float64 weights; a row with no admissible ``j`` is all zeros.
    """
    if tau <= 0:
        raise ValueError(f"temperature tau must be > 0, got {tau}")
    sim = sim.to(torch.float64)
    n = sim.shape[0]
    if sim.shape != (n, n):
        raise ValueError(f"similarity must be square, got {tuple(sim.shape)}")
    mask = torch.ones(n, n, dtype=torch.bool) if allowed is None else allowed.clone().bool()
    if exclude_self:
        mask.fill_diagonal_(False)
    logits = (sim / tau).masked_fill(~mask, float("-inf"))
    w = torch.softmax(logits, dim=1)
    return torch.where(mask.any(1, keepdim=True), w, torch.zeros_like(w))


def mix(states: Sequence[Mapping[str, torch.Tensor]], weights: Sequence[float] | torch.Tensor
        ) -> State:
    """``Σ_j w_j L_j`` key by key (no renormalisation), accumulated in float64."""
    w = [float(x) for x in weights]
    if len(w) != len(states) or not states:
        raise ValueError(f"{len(states)} states but {len(w)} weights")
    keys = set(states[0])
    for i, s in enumerate(states):
        if set(s) != keys:
            raise KeyError(f"state {i} has keys {sorted(set(s) ^ keys)[:3]} the others lack; "
                           "only modules of one layout can be mixed")
    out: State = {}
    for key in sorted(keys):
        ref = states[0][key]
        acc = torch.zeros(ref.shape, dtype=torch.float64)
        for s, wj in zip(states, w):
            if s[key].shape != ref.shape:
                raise ValueError(f"{key}: shape {tuple(s[key].shape)} != {tuple(ref.shape)}")
            if wj:
                acc += wj * s[key].detach().cpu().to(torch.float64)
        out[key] = acc.to(ref.dtype)
    return out


def personalized(states: Mapping[int, Mapping[str, torch.Tensor]], weights: torch.Tensor,
                 ids: Sequence[int]) -> dict[int, State]:
    """``G_i = Σ_j w_ij L_j`` for every client ``i`` of ``ids`` (rows/columns of ``weights``).

    Columns of clients absent from ``states`` must have zero weight. A client whose row is all
    zeros (nobody admissible, e.g. alone in its architecture with ``exclude_self``) gets a copy
    of its own module, as in the public code.
    """
    ids = list(ids)
    if weights.shape != (len(ids), len(ids)):
        raise ValueError(f"weights are {tuple(weights.shape)} for {len(ids)} clients")
    out: dict[int, State] = {}
    for a, i in enumerate(ids):
        row = weights[a]
        cols = [b for b in range(len(ids)) if float(row[b]) != 0.0]
        missing = [ids[b] for b in cols if ids[b] not in states]
        if missing:
            raise KeyError(f"client {i} gives weight to clients {missing} that sent no module")
        if not cols:
            if i not in states:
                raise KeyError(f"client {i} has no admissible peer and no module of its own")
            out[i] = {k: v.detach().cpu().clone() for k, v in states[i].items()}
            continue
        out[i] = mix([states[ids[b]] for b in cols], [float(row[b]) for b in cols])
    return out


class GradientTracker:
    """Client-side SIMA state: sampled proxy gradients and their decayed average per client.

    Use: during local training, when :meth:`due` (every ``every`` steps), compute the proxy
    gradient and :meth:`add` it; at the end of the client's round, :meth:`end_round` folds the
    round's mean into ``ĝ`` by Eq. 4 and returns ``ĝ`` sanitised for upload.

    Sanitisation: each sampled gradient is subsampled as it is added (so the client keeps only
    the shared coordinates), and the noise is added **once**, to the ``ĝ`` that leaves the
    client, so the upload carries exactly ``noise_std`` of noise per coordinate. (Noise on every
    sample before the mean and the EMA would shrink it by ``√n`` and by α.) The client's own
    ``ĝ`` (what the next round's EMA continues) stays noise-free.

    Parameters
    ----------
    alpha : float
        EMA ratio α of Eq. 4 (the public code's ``(old + new) / 2`` is α = 0.5).
    every : int
        ``f``: sample a gradient every ``every`` local steps (10 in the paper).
    sanitizer : Sanitizer, optional
        Subsamples each gradient as it is added and noises the uploaded ``ĝ``; None shares raw
        gradients.
    first : {"zeros", "copy"}
        ``ĝ(0) = 0`` (Alg. 1) or the first round's gradient itself (public code).
    """

    def __init__(self, *, alpha: float = 0.5, every: int = 10, sanitizer: Sanitizer | None = None,
                 first: Literal["zeros", "copy"] = "zeros") -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if first not in ("zeros", "copy"):
            raise ValueError(f"first must be 'zeros' or 'copy', got {first!r}")
        ema(None, torch.zeros(1), alpha)  # validates alpha
        self.alpha, self.every, self.sanitizer, self.first = alpha, int(every), sanitizer, first
        self._decayed: dict[int, torch.Tensor] = {}
        self._sum: dict[int, torch.Tensor] = {}
        self._count: dict[int, int] = {}

    def due(self, step: int) -> bool:
        """Whether local step ``step`` (0-based) samples a gradient: ``step % every == 0``."""
        return step % self.every == 0

    def add(self, client: int, grad: torch.Tensor, *, round: int) -> torch.Tensor:
        """Subsample ``grad`` and add it to the client's round sum; returns the kept vector."""
        n = self._count.get(client, 0)
        if self.sanitizer is not None:
            g = self.sanitizer.keep(grad).clone()
        else:
            g = grad.detach().to(torch.float32).cpu().clone()
        prev = self._sum.get(client)
        if prev is not None and prev.shape != g.shape:
            raise ValueError(f"client {client}: gradient shape {tuple(g.shape)} differs from the "
                             f"round's earlier {tuple(prev.shape)}")
        self._sum[client] = g.clone() if prev is None else prev + g
        self._count[client] = n + 1
        return g

    def end_round(self, client: int, *, round: int = 0) -> torch.Tensor | None:
        """Fold the round's mean gradient into ``ĝ`` (Eq. 4); returns the upload: ``ĝ`` plus the
        sanitiser's noise, drawn from ``(client, round)`` (None if never fed)."""
        n = self._count.pop(client, 0)
        total = self._sum.pop(client, None)
        if n and total is not None:
            mean = total / n
            prev = self._decayed.get(client)
            if prev is None and self.first == "copy":
                self._decayed[client] = mean
            else:
                self._decayed[client] = ema(prev, mean, self.alpha)
        ghat = self.decayed(client)
        if ghat is None or self.sanitizer is None:
            return ghat
        return self.sanitizer.noisy(ghat, key=(client, round))

    def decayed(self, client: int) -> torch.Tensor | None:
        """The client's current ``ĝ``, or None before its first completed round."""
        g = self._decayed.get(client)
        return None if g is None else g.clone()

    def pop_client(self, client: int) -> dict[str, torch.Tensor]:
        """Remove the client's entries and return them (``ghat``; ``sum``/``count`` of a round
        not yet ended) as named tensors, for the client's own record."""
        out = {}
        if client in self._decayed:
            out["ghat"] = self._decayed.pop(client)
        if client in self._sum:
            out["sum"] = self._sum.pop(client)
        if client in self._count:
            out["count"] = torch.tensor(self._count.pop(client))
        return out

    def put_client(self, client: int, state: Mapping[str, torch.Tensor]) -> None:
        """Replace the client's entries by what :meth:`pop_client` returned."""
        self.pop_client(client)
        for kind, value in state.items():
            if kind == "ghat":
                self._decayed[client] = value.clone()
            elif kind == "sum":
                self._sum[client] = value.clone()
            elif kind == "count":
                self._count[client] = int(value)
            else:
                raise KeyError(f"unexpected GradientTracker client state key {kind!r}")

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors to checkpoint (``{client}.ghat``, ``{client}.sum``, ``{client}.count``)."""
        out = {f"{c}.ghat": g.clone() for c, g in self._decayed.items()}
        out.update({f"{c}.sum": s.clone() for c, s in self._sum.items()})
        out.update({f"{c}.count": torch.tensor(n) for c, n in self._count.items()})
        return out

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict`."""
        self._decayed, self._sum, self._count = {}, {}, {}
        per_client: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in state.items():
            client, _, kind = key.partition(".")
            per_client.setdefault(int(client), {})[kind] = value
        for client, entries in per_client.items():
            self.put_client(client, entries)


def _plain_linear(module: nn.Module) -> nn.Linear:
    for attr in ("base_layer", "base"):  # peft LoraLayer, PQLoRALinear
        inner = getattr(module, attr, None)
        if isinstance(inner, nn.Module):
            return _plain_linear(inner)
    if not isinstance(module, nn.Linear):
        raise TypeError(f"expected a linear layer, got {type(module).__name__}")
    return module


def proxy_gradient(bundle: Any, batch: Mapping[str, torch.Tensor], *,
                   layer: nn.Module | None = None) -> torch.Tensor:
    """Gradient of the proxy's loss on ``batch`` w.r.t. one frozen linear weight (Eq. 3).

    The proxy runs with all adapters off (the frozen pre-trained ``W_s``). Only ``layer``'s weight
    gets a gradient, so backpropagation stops there.

    Parameters
    ----------
    bundle : ModelBundle
        The proxy (``model`` and ``loss``), usually the smallest architecture of the federation.
    batch : mapping
        A train batch from ``bundle.collate(samples, train=True)``.
    layer : nn.Module, optional
        Whose weight; default the last decoder layer's ``mlp.down_proj`` (as the public code).

    Returns
    -------
    Tensor
        ``out x in`` float32 on the CPU.
    """
    model = bundle.model
    if layer is None:
        layer = decoder_layers(model)[-1].mlp.down_proj
    weight = _plain_linear(layer).weight
    was_training = model.training
    try:
        with adapters_off(model):
            for p in model.parameters():
                p.requires_grad_(False)
            weight.requires_grad_(True)
            model.eval()
            loss = bundle.loss(batch)
            (grad,) = torch.autograd.grad(loss, weight)
    finally:
        model.train(was_training)
    return grad.detach().to(torch.float32).cpu()
