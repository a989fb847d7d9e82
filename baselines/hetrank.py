"""Federated LoRA with a different rank on every client: FediLoRA, HetLoRA and FlexLoRA.

FediLoRA's setting (``shared/papers/fedilora.txt`` §3, its Tab. 1 baselines): client ``k``
trains a LoRA on the query and value maps (:data:`TARGETS`) of rank ``r_k`` (default :data:`FEDILORA_RANKS`, cycled over the clients) with a
common ``alpha``, so its update is ``ΔW_k = (alpha / r_k) B_k A_k``; it uploads ``A_k`` (``r_k``
rows) and ``B_k`` (``r_k`` columns) only. The server builds a global LoRA of rank
``r_g = max_k r_k`` and sends each client its first ``r_k`` rows / columns (truncation). The
methods differ in the server's rule:

* **FediLoRA** (Eq. 3-5), :func:`dimension_wise`: row ``d`` of ``A_g`` (column ``d`` of
  ``B_g``) is the average of the clients that *have* dimension ``d``, their data-size weights
  renormalised over them, so zero padding never dilutes a high-rank client (a row no client of
  the round holds keeps the last global's: partial participation neither cuts nor zeroes the
  high-rank clients' dimensions). Plus layer-wise editing (Eq. 6-8),
  :func:`edit_least_similar`: after local training, the LoRA layer whose
  ``A`` is least similar (cosine) to the global ``A`` received this round is pulled toward it,
  ``A ← γ A + (1 − γ) A_g``, when ``γ`` is below a threshold (0.95), one layer per round.
* **HetLoRA** (Cho et al. 2024), :func:`norm_weighted`: zero-pad every client to ``r_g`` and
  average with weights proportional to the Frobenius norm of each client's ``B_k A_k``, module by
  module ("sparsity-weighted aggregation"). Plus local rank self-pruning,
  :func:`tail_penalty`: local training adds ``λ Σ_modules ‖B[:, t:r]‖_F ‖A[t:r]‖_F`` over the
  tail ``t = ⌊γ r⌋`` of the client's current rank ``r``; when the tail's norm is smaller after
  training than before, the client prunes it (``r ← ⌊γ r⌋``, the tail zeroed) and keeps the
  smaller rank in later rounds (λ 1e-3, γ 0.99 as the reimplementations the reference notes
  list; the public FediLoRA code runs HetLoRA without pruning, ``prune=False``). The penalty
  keeps its gradient (one public reimplementation computes it on detached data, so it never
  acts).
* **FLoRA** (Wang et al. 2024), :func:`stack`: the server stacks the clients' LoRAs,
  ``A = [p_1 A_1; …; p_K A_K]`` and ``B = [B_1 … B_K]``, so that ``B A = Σ_k p_k B_k A_k``
  exactly, sends the stack, and every client merges ``s B A`` into its base weights (``s`` the
  clients' common scale, ``alpha_k / r_k = 2`` as FLoRA sets ``alpha_k = 2 r_k``) and starts the
  next round from a fresh LoRA. Its global model is the merged base.
* **FlexLoRA** (Bai et al. 2024), :func:`svd_redistribute`: the server averages the full
  updates ``ΔW = Σ_k p_k ΔW_k`` and gives client ``k`` the best rank-``r_k`` approximation of it
  (truncated SVD, Eckart-Young), split into ``B = U_r √S_r`` and ``A = √S_r V_rᵀ`` and divided by
  the client's scale ``alpha / r_k``.

Inside the suite every client of an architecture shares one model whose adapter has rank
``r_g``; client ``k`` keeps rows ``≥ r_k`` of ``A`` and columns ``≥ r_k`` of ``B`` at zero
(their gradients are then zero too, so they stay zero under AdamW without weight decay), and its
scale ``alpha / r_k`` is the adapter's ``alpha / r_g`` times the activation weight ``r_g / r_k``.
The global model (the generation protocol's "global" numbers) is scored at scale
``global_alpha / r_g``, ``global_alpha = 2 r_g`` by default, as the FediLoRA code configures its
global LoRA.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F

from baselines.base import (
    AdapterConfig,
    ClientInfo,
    Method,
    Payload,
    State,
    group_by_arch,
    register,
)

__all__ = ["FEDILORA_RANKS", "FLORA_RANKS", "FLoRA", "FediLoRA", "FlexLoRA", "HetLoRA",
           "dimension_wise", "edit_least_similar", "extend", "modules", "norm_weighted", "pad",
           "pruned_rank", "stack", "svd_redistribute", "tail_norms", "tail_penalty", "truncate"]

#: FediLoRA's client ranks (its code's default for 10 clients).
FEDILORA_RANKS = (32, 32, 16, 16, 8, 8, 4, 4, 4, 4)
#: FLoRA's setting of the same experiment.
FLORA_RANKS = (64, 32, 16, 16, 8, 8, 4, 4, 4, 4)
LOCAL = "local"


def modules(state: Mapping[str, torch.Tensor]) -> list[str]:
    """The LoRA modules of a state: each key prefix that has a ``lora_A`` and a ``lora_B``."""
    prefixes = sorted({k.rsplit(".lora_A.", 1)[0] for k in state if ".lora_A." in k})
    missing = [p for p in prefixes if f"{p}.lora_B.weight" not in state]
    if missing or len(prefixes) * 2 != len(state):
        example = missing[:1] or sorted(state)[:2]
        raise ValueError(f"not a LoRA state of lora_A/lora_B pairs (e.g. {example})")
    return prefixes


def _a(prefix: str) -> str:
    return f"{prefix}.lora_A.weight"


def _b(prefix: str) -> str:
    return f"{prefix}.lora_B.weight"


def truncate(state: Mapping[str, torch.Tensor], r: int) -> State:
    """The first ``r`` rows of every ``A`` and columns of every ``B`` (a rank-``r`` LoRA)."""
    out: State = {}
    for p in modules(state):
        out[_a(p)] = state[_a(p)][:r].clone()
        out[_b(p)] = state[_b(p)][:, :r].clone()
    return out


def pad(state: Mapping[str, torch.Tensor], r: int) -> State:
    """Zero-pad every ``A`` to ``r`` rows and ``B`` to ``r`` columns."""
    out: State = {}
    for p in modules(state):
        a, b = state[_a(p)], state[_b(p)]
        if a.shape[0] > r:
            raise ValueError(f"{p}: rank {a.shape[0]} is above the padded rank {r}")
        out[_a(p)] = torch.cat([a, a.new_zeros(r - a.shape[0], a.shape[1])])
        out[_b(p)] = torch.cat([b, b.new_zeros(b.shape[0], r - b.shape[1])], dim=1)
    return out


def _rank(state: Mapping[str, torch.Tensor]) -> int:
    return int(state[_a(modules(state)[0])].shape[0])


def extend(state: Mapping[str, torch.Tensor], base: Mapping[str, torch.Tensor]) -> State:
    """``state``'s rows of ``A`` and columns of ``B``, then ``base``'s beyond ``state``'s rank:
    a LoRA of rank ``max(rank(state), rank(base))``."""
    top = max(_rank(state), _rank(base))
    out = pad(state, top)
    r = _rank(state)
    for p in modules(state):
        out[_a(p)][r:] = base[_a(p)][r:top]
        out[_b(p)][:, r:] = base[_b(p)][:, r:top]
    return out


def dimension_wise(states: Sequence[Mapping[str, torch.Tensor]], weights: Sequence[float],
                   previous: Mapping[str, torch.Tensor] | None = None) -> State:
    """FediLoRA's aggregation (Eq. 3-5): row ``d`` of the global ``A`` (column ``d`` of ``B``)
    is ``Σ_k p̃_k^(d) A_k[d]`` with ``p̃_k^(d) = mask_k^(d) p_k / Σ_j mask_j^(d) p_j`` and
    ``mask_k^(d) = 1`` iff ``d < r_k``. The result has rank ``max_k r_k``.

    A row no state holds (a round of partial participation without the highest-rank clients)
    has no weights at all in Eq. 4; it is not aggregated: it keeps ``previous``'s row (the last
    global LoRA), so that the result then has ``previous``'s rank, ``r_g``, and a high-rank
    client's dimensions are neither cut from its next message nor zeroed."""
    ranks = [_rank(s) for s in states]
    top = max(ranks)
    p = torch.tensor([float(w) for w in weights], dtype=torch.float64)
    if len(p) != len(states) or not bool((p > 0).all()):
        raise ValueError(f"need one positive weight per state, got {list(weights)}")
    mask = torch.tensor([[1.0 if d < r else 0.0 for d in range(top)] for r in ranks],
                        dtype=torch.float64)  # [K, r_g]
    share = mask * p[:, None]
    share = share / share.sum(dim=0, keepdim=True)  # p̃_k^(d); every column has a client
    padded = [pad(s, top) for s in states]
    out: State = {}
    for m in modules(states[0]):
        a = sum(share[k][:, None] * padded[k][_a(m)].double() for k in range(len(states)))
        b = sum(share[k][None, :] * padded[k][_b(m)].double() for k in range(len(states)))
        out[_a(m)] = a.to(states[0][_a(m)].dtype)
        out[_b(m)] = b.to(states[0][_b(m)].dtype)
    if previous is not None and _rank(previous) > top:
        out = extend(out, previous)
    return out


def norm_weighted(states: Sequence[Mapping[str, torch.Tensor]]) -> State:
    """HetLoRA's sparsity-weighted aggregation: every client zero-padded to the largest rank,
    then per module ``Σ_k (‖B_k A_k‖_F / Σ_j ‖B_j A_j‖_F) · (A_k, B_k)``; a module no client has
    moved (all norms 0) is averaged uniformly."""
    top = max(_rank(s) for s in states)
    padded = [pad(s, top) for s in states]
    out: State = {}
    for m in modules(states[0]):
        norms = torch.stack([torch.linalg.matrix_norm(s[_b(m)].double() @ s[_a(m)].double())
                             for s in states])
        w = norms / norms.sum() if float(norms.sum()) > 0 else torch.full_like(norms,
                                                                                1 / len(states))
        out[_a(m)] = sum(w[k] * padded[k][_a(m)].double() for k in range(len(states))).to(
            states[0][_a(m)].dtype)
        out[_b(m)] = sum(w[k] * padded[k][_b(m)].double() for k in range(len(states))).to(
            states[0][_b(m)].dtype)
    return out


def stack(states: Sequence[Mapping[str, torch.Tensor]], weights: Sequence[float]) -> State:
    """FLoRA's stacking: per module ``A = [p_1 A_1; …; p_K A_K]`` (rows) and
    ``B = [B_1 … B_K]`` (columns), ``p_k`` the weights normalised, so that
    ``B A = Σ_k p_k B_k A_k`` with no aggregation noise; the rank is ``Σ_k r_k``."""
    p = torch.tensor([float(w) for w in weights], dtype=torch.float64)
    if len(p) != len(states) or not bool((p > 0).all()):
        raise ValueError(f"need one positive weight per state, got {list(weights)}")
    p = p / p.sum()
    out: State = {}
    for m in modules(states[0]):
        out[_a(m)] = torch.cat([(w * s[_a(m)].double()).to(s[_a(m)].dtype)
                                for w, s in zip(p, states)])
        out[_b(m)] = torch.cat([s[_b(m)] for s in states], dim=1)
    return out


def svd_redistribute(delta: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """FlexLoRA's redistribution: ``(B, A)`` with ``B A`` the best rank-``r`` approximation of
    ``delta`` (truncated SVD), ``B = U_r √S_r`` and ``A = √S_r V_rᵀ``."""
    u, s, vh = torch.linalg.svd(delta.double(), full_matrices=False)
    root = s[:r].sqrt()
    return (u[:, :r] * root).to(delta.dtype), (root[:, None] * vh[:r]).to(delta.dtype)


def edit_least_similar(local: Mapping[str, torch.Tensor], global_: Mapping[str, torch.Tensor],
                       *, threshold: float = 0.95, matrices: str = "A", mode: str = "interp"
                       ) -> tuple[State, str | None, float]:
    """FediLoRA's layer-wise editing (Eq. 6-8) of a client's LoRA after local training.

    ``γ_y`` is the cosine similarity of layer ``y``'s local and global (received, same rank)
    ``A`` (``B`` when ``matrices="B"``); the layer ``y* = argmin γ_y`` is edited when
    ``γ_{y*} < threshold``: ``mode="interp"`` (the paper) sets ``X ← γ X + (1 − γ) X_g``,
    ``"half"`` averages, ``"full"`` replaces by the global one. ``matrices`` is ``"A"``
    (the paper), ``"B"`` or ``"both"`` (the ablations of its Tab. 2; ``"both"`` chooses the layer
    by ``A``). Returns the edited state, the edited layer (or None) and ``γ_{y*}``.
    """
    if matrices not in ("A", "B", "both") or mode not in ("interp", "half", "full"):
        raise ValueError(f"matrices must be A, B or both and mode interp, half or full; got "
                         f"{matrices!r}, {mode!r}")
    key = _b if matrices == "B" else _a
    sims = {m: float(F.cosine_similarity(local[key(m)].flatten().double(),
                                         global_[key(m)].flatten().double(), dim=0))
            for m in modules(local)}
    layer = min(sims, key=lambda m: (sims[m], m))
    gamma = sims[layer]
    out = {k: v.clone() for k, v in local.items()}
    if gamma >= threshold:
        return out, None, gamma
    keep = {"interp": gamma, "half": 0.5, "full": 0.0}[mode]
    for k in ([_a(layer), _b(layer)] if matrices == "both" else [key(layer)]):
        out[k] = (keep * local[k].double() + (1 - keep) * global_[k].double()).to(local[k].dtype)
    return out, layer, gamma


def tail_norms(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], r: int, gamma: float
               ) -> torch.Tensor:
    """HetLoRA's tail penalty before λ: ``Σ_modules ‖B[:, t:r]‖_F ‖A[t:r]‖_F`` with
    ``t = ⌊γ r⌋``, over ``(A, B)`` pairs (differentiable)."""
    t = pruned_rank(r, gamma)
    return sum(torch.linalg.matrix_norm(b[:, t:r]) * torch.linalg.matrix_norm(a[t:r])
               for a, b in pairs)


def tail_penalty(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], r: int, gamma: float,
                 lam: float) -> torch.Tensor:
    """``λ ·`` :func:`tail_norms`, the self-pruning regulariser added to the local loss."""
    return lam * tail_norms(pairs, r, gamma)


def pruned_rank(r: int, gamma: float) -> int:
    """``⌊γ r⌋``, at least 1 (a client never prunes its last rank component)."""
    return max(1, math.floor(gamma * r))


def _ranks(value) -> tuple[int, ...]:
    if isinstance(value, str):
        named = {"fedilora": FEDILORA_RANKS, "flora": FLORA_RANKS}
        if value not in named:
            raise ValueError(f"ranks {value!r}: give a list of ints or one of {sorted(named)}")
        return named[value]
    ranks = tuple(int(r) for r in value)
    if not ranks or min(ranks) < 1:
        raise ValueError(f"ranks must be positive integers, got {value!r}")
    return ranks


#: ``targets``: the modules each client's LoRA adapts, among the model's zoo targets. FediLoRA
#: (and the FLoRA, FlexLoRA and HetLoRA runs it compares with) put LoRA on the attention's query
#: and value maps only (``qv``, the default); ``all`` adapts every linear layer the zoo targets.
TARGETS: dict[str, tuple[str, ...] | None] = {"qv": ("q_proj", "v_proj"), "all": None}


class _HetRank(Method):
    """Shared by the heterogeneous-rank methods: rank per client, masking, scaling, uploads of
    the client's own rank, truncated messages (see the module docstring)."""

    kinds = ("llava", "clip")

    def __init__(self, lr: float = 1e-3, ranks="fedilora", alpha: int = 32,
                 global_alpha: int | None = None, targets: str = "qv", **hp) -> None:
        self.ranks = _ranks(ranks)
        self.alpha = int(alpha)
        self.global_alpha = int(global_alpha) if global_alpha else 2 * max(self.ranks)
        if targets not in TARGETS:
            raise ValueError(f"targets must be one of {', '.join(TARGETS)}, got {targets!r}")
        self.targets = targets
        super().__init__(lr=lr, ranks=list(self.ranks), alpha=self.alpha,
                         global_alpha=self.global_alpha, targets=targets, **hp)
        #: the last global LoRA of each architecture group, at rank r_g (server state)
        self._global: dict[str, State] = {}

    @property
    def top(self) -> int:
        return max(self.ranks)

    def rank(self, cid: int) -> int:
        return self.ranks[cid % len(self.ranks)]

    def adapters(self) -> dict[str, AdapterConfig]:
        return {LOCAL: AdapterConfig(r=self.top, alpha=self.alpha, modules=TARGETS[self.targets])}

    def _weight(self, cid: int) -> float:
        """Activation weight giving client ``cid`` the scale alpha / r_k on a rank-r_g adapter."""
        return self.top / self.rank(cid)

    def client_rank(self, client) -> int:
        """The rank client ``client`` trains at now (its assigned rank unless it pruned)."""
        return self.rank(client.id)

    def _mask(self, client) -> State:
        """Zero the client's adapter beyond its rank; return its rank-r_k state."""
        own = truncate(client.get(LOCAL), self.client_rank(client))
        client.set(LOCAL, pad(own, self.top))
        return own

    def receive(self, client, message: Payload) -> None:
        client.set(LOCAL, pad(truncate(message.tensors[LOCAL], self.client_rank(client)),
                              self.top))

    def local_train(self, client) -> Payload:
        self._mask(client)
        weight = [self._weight(client.id)]
        total = 0.0
        for _ in range(client.steps):
            loss = client.loss(client.next_batch(), [LOCAL], weight)
            client.step(LOCAL, loss + self._regulariser(client))
            total += float(loss.detach())
        own, events = self._after_training(client, self._mask(client))
        return Payload({LOCAL: own}, {"loss": total / client.steps if client.steps else 0.0,
                                      "rank": self.client_rank(client), "events": events})

    def _regulariser(self, client) -> torch.Tensor | float:
        """A term added to the local loss (none by default)."""
        return 0.0

    def _after_training(self, client, own: State) -> tuple[State, dict[str, tuple[float, str]]]:
        """The upload of client ``client`` (rank-r_k state) after local training, and what
        happened to it for the run's diagnostics (``{key: (value, how)}``, see
        :meth:`Method.count`)."""
        return own, {}

    def predict(self, client, samples, answer):
        return answer(samples, {LOCAL: self._weight(client.id)})

    @abstractmethod
    def _combine(self, states: list[State], infos: list[ClientInfo],
                 previous: State | None = None) -> State:
        """The global LoRA (rank r_g) of one architecture group's uploads: the method's rule;
        ``previous`` is the group's last global LoRA (None before the first)."""

    def _count_events(self, uploads) -> None:
        for cid in sorted(uploads):
            for key, (value, how) in sorted(uploads[cid].meta.get("events", {}).items()):
                self.count(key, value, how)

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        self._count_events(uploads)
        for arch, ids in group_by_arch(clients[i] for i in uploads).items():
            self._global[arch] = self._combine([uploads[i].tensors[LOCAL] for i in ids],
                                               [clients[i] for i in ids],
                                               self._global.get(arch))
        return {cid: Payload({LOCAL: truncate(self._global[info.arch], self.rank(cid))})
                for cid, info in clients.items() if info.arch in self._global}

    def global_model(self, arch: str):
        state = self._global.get(arch)
        return None if state is None else {LOCAL: (pad(state, self.top),
                                                   self.global_alpha / self.alpha)}

    def server_state(self) -> dict[str, torch.Tensor]:
        state = super().server_state()
        for arch, glob in sorted(self._global.items()):
            state.update({f"hetrank/{arch}/{k}": v for k, v in glob.items()})
        return state

    def load_server_state(self, state) -> None:
        super().load_server_state(state)
        self._global = {}
        for name, value in state.items():
            if name.startswith("hetrank/"):
                _, arch, key = name.split("/", 2)
                self._global.setdefault(arch, {})[key] = value


@register
class FediLoRA(_HetRank):
    """FediLoRA: dimension-wise reweighting at the server, layer-wise editing at the client.

    ``edit``: ``"A"`` (the paper), ``"B"``, ``"both"`` or ``"none"``; ``edit_mode``: ``"interp"``
    (Eq. 8), ``"half"`` or ``"full"``; ``threshold`` 0.95. Editing starts with the first global
    model a client receives (round 1 on), as the FediLoRA code does.
    """

    name = "fedilora"

    def __init__(self, lr: float = 1e-3, edit: str = "A", edit_mode: str = "interp",
                 threshold: float = 0.95, **hp) -> None:
        if edit not in ("A", "B", "both", "none"):
            raise ValueError(f"edit must be A, B, both or none, got {edit!r}")
        super().__init__(lr=lr, edit=edit, edit_mode=edit_mode, threshold=threshold, **hp)
        self.edit, self.edit_mode, self.threshold = edit, edit_mode, float(threshold)

    def receive(self, client, message: Payload) -> None:
        # The global LoRA this client starts from (A_{g,t-1}), kept for editing after training.
        # A message below the client's rank (no client of that rank has uploaded yet, under
        # partial participation) leaves the client's own rows beyond it as they are: it starts,
        # and is compared, at its full rank.
        r = self.client_rank(client)
        start = truncate(extend(truncate(message.tensors[LOCAL], r), client.get(LOCAL)), r)
        client.set(LOCAL, pad(start, self.top))
        for k, v in start.items():
            client.state[f"received/{k}"] = v

    def _after_training(self, client, own: State) -> State:
        received = {k.removeprefix("received/"): v for k, v in client.state.items()
                    if k.startswith("received/")}
        for k in [k for k in client.state if k.startswith("received/")]:
            del client.state[k]
        if self.edit == "none" or not received:
            return own, {}
        edited, layer, gamma = edit_least_similar(own, received, threshold=self.threshold,
                                                  matrices=self.edit, mode=self.edit_mode)
        client.set(LOCAL, pad(edited, self.top))
        # every check, the edits it made and the lowest similarity seen (A-editing never fires
        # while local A stays within the threshold of the global one)
        return edited, {"edit_checks": (1.0, "sum"), "edits": (float(layer is not None), "sum"),
                        "edit_similarity_min": (gamma, "min")}

    def _combine(self, states, infos, previous=None):
        return dimension_wise(states, [max(i.num_samples, 1) for i in infos], previous)


@register
class HetLoRA(_HetRank):
    """HetLoRA: zero padding, sparsity (‖B A‖_F) weighted aggregation, truncation, and local
    rank self-pruning (``prune``, ``lam`` λ, ``gamma`` γ; see the module docstring).

    A client's current rank lives in its own state (``client.state["rank"]``); messages are
    truncated to it on arrival. The scale stays ``alpha / r_k`` of the assigned rank, so pruning
    removes components without rescaling the rest."""

    name = "hetlora"

    def __init__(self, lr: float = 1e-3, prune: bool = True, lam: float = 1e-3,
                 gamma: float = 0.99, **hp) -> None:
        if not 0 < float(gamma) < 1 or float(lam) < 0:
            raise ValueError(f"HetLoRA needs 0 < gamma < 1 and lam >= 0, got gamma {gamma!r}, "
                             f"lam {lam!r}")
        super().__init__(lr=lr, prune=bool(prune), lam=float(lam), gamma=float(gamma), **hp)
        self.prune, self.lam, self.gamma = bool(prune), float(lam), float(gamma)

    def client_rank(self, client) -> int:
        if "rank" in client.state:
            return int(client.state["rank"])
        return self.rank(client.id)

    def _pairs(self, client) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The live (A, B) parameters of the client's adapter, module by module (peft orders
        each module's lora_A before its lora_B)."""
        params = client.params(LOCAL)
        pairs = list(zip(params[0::2], params[1::2]))
        if len(params) % 2 or any(a.shape[0] != self.top or b.shape[1] != self.top
                                  for a, b in pairs):
            raise ValueError(f"{self.name}: the adapter's parameters are not (lora_A, lora_B) "
                             f"pairs of rank {self.top}")
        return pairs

    def local_train(self, client) -> Payload:
        if self.prune:
            with torch.no_grad():
                client.state["tail_before"] = tail_norms(self._pairs(client),
                                                         self.client_rank(client), self.gamma)
        return super().local_train(client)

    def _regulariser(self, client):
        if not self.prune:
            return 0.0
        return tail_penalty(self._pairs(client), self.client_rank(client), self.gamma, self.lam)

    def _after_training(self, client, own: State) -> State:
        before = client.state.pop("tail_before", None)
        r = self.client_rank(client)
        if not self.prune or before is None:
            return own, {}
        with torch.no_grad():
            after = tail_norms(self._pairs(client), r, self.gamma)
        smaller = pruned_rank(r, self.gamma)
        pruned = float(after) < float(before) and smaller < r
        if pruned:
            client.state["rank"] = torch.tensor(smaller)
            own = truncate(own, smaller)
            client.set(LOCAL, pad(own, self.top))
        return own, {"prunes": (float(pruned), "sum"), "rank_min": (float(_rank(own)), "min")}

    def _combine(self, states, infos, previous=None):
        return norm_weighted(states)


@register
class FlexLoRA(_HetRank):
    """FlexLoRA: the data-weighted mean of the clients' full updates ΔW_k, redistributed to
    each client's rank by truncated SVD."""

    name = "flexlora"

    def _combine(self, states, infos, previous=None):
        weights = torch.tensor([float(max(i.num_samples, 1)) for i in infos],
                               dtype=torch.float64)
        weights = weights / weights.sum()
        out: State = {}
        for m in modules(states[0]):
            delta = sum(w * (self.alpha / _rank(s)) * s[_b(m)].double() @ s[_a(m)].double()
                        for w, s in zip(weights, states))
            b, a = svd_redistribute(delta, self.top)
            # stored at the client scale of rank r_g; truncation to r_k keeps the r_k leading
            # singular directions, rescaled in aggregate's messages (see _rescaled)
            out[_a(m)] = (a / (self.alpha / self.top)).to(states[0][_a(m)].dtype)
            out[_b(m)] = b.to(states[0][_b(m)].dtype)
        return out

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        messages = super().aggregate(uploads, clients, round)
        return {cid: Payload({LOCAL: self._rescaled(m.tensors[LOCAL], self.rank(cid))})
                for cid, m in messages.items()}

    def _rescaled(self, state: State, r: int) -> State:
        """A rank-r truncation of the global (stored at scale alpha / r_g) for a client whose
        scale is alpha / r: A is multiplied by r / r_g so that (alpha / r) B A is the best
        rank-r approximation of the mean update."""
        return {k: (v * (r / self.top) if ".lora_A." in k else v) for k, v in state.items()}

    def global_model(self, arch: str):
        state = self._global.get(arch)
        # the global update itself, at the scale its A was stored for (alpha / r_g)
        return None if state is None else {LOCAL: (state, 1.0)}


@register
class FLoRA(_HetRank):
    """FLoRA: stacked aggregation, merged into every client's base each round, a fresh LoRA per
    round (see the module docstring). ``scale`` is the clients' common LoRA scale (2)."""

    name = "flora"

    def __init__(self, lr: float = 1e-3, ranks="flora", scale: float = 2.0, **hp) -> None:
        self.scale = float(scale)
        super().__init__(lr=lr, ranks=ranks, scale=self.scale, **hp)
        #: per architecture: the model whose base weights take the merges, the merged sum the
        #: base should carry (server state) and what it carries now (this process)
        self._models: dict[str, torch.nn.Module] = {}
        self._target: dict[str, State] = {}
        self._applied: dict[str, State] = {}

    def adapters(self) -> dict[str, AdapterConfig]:
        # alpha = scale * r_g: every client's scale alpha_k / r_k is `scale` at weight 1
        return {LOCAL: AdapterConfig(r=self.top, alpha=int(round(self.scale * self.top)),
                                     modules=TARGETS[self.targets])}

    def _weight(self, cid: int) -> float:
        return 1.0

    def install(self, model, *, arch, lora, seed, peers=None):
        self._models[arch] = model  # peft injects the LoRA layers into this model in place
        return None

    def _sync(self, arch: str) -> None:
        """Add to the base weights of ``arch`` what the merged sum has and they do not yet."""
        model, target = self._models.get(arch), self._target.get(arch, {})
        if model is None:
            return
        applied = self._applied.setdefault(arch, {})
        with torch.no_grad():
            for m, delta in target.items():
                step = delta - applied.get(m, torch.zeros_like(delta))
                if bool(step.any()):
                    model.get_submodule(m).base_layer.weight += step.to(
                        model.get_submodule(m).base_layer.weight.dtype)
                    applied[m] = delta.clone()

    def receive(self, client, message: Payload) -> None:
        """The merge already happened at the server's side of this process (:meth:`aggregate`
        syncs the shared base); the client starts from a fresh LoRA."""
        self._sync(client.arch)
        fresh = {}
        for k, v in client.get(LOCAL).items():
            if ".lora_A." in k:
                fresh[k] = torch.nn.init.kaiming_uniform_(torch.empty_like(v), a=math.sqrt(5))
            else:
                fresh[k] = torch.zeros_like(v)
        client.set(LOCAL, fresh)

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        self._count_events(uploads)
        out = {}
        for arch, ids in group_by_arch(clients[i] for i in uploads).items():
            stacked = self._combine([uploads[i].tensors[LOCAL] for i in ids],
                                    [clients[i] for i in ids])
            merged = self._target.setdefault(arch, {})
            for m in modules(stacked):
                delta = self.scale * stacked[_b(m)].double() @ stacked[_a(m)].double()
                merged[m] = merged.get(m, torch.zeros_like(delta)) + delta
            self._sync(arch)
            # the global model is the merged base: a zero adapter on top
            self._global[arch] = {k: torch.zeros_like(v) for k, v in
                                  pad(uploads[ids[0]].tensors[LOCAL], self.top).items()}
            out.update({cid: Payload({LOCAL: stacked}) for cid, info in clients.items()
                        if info.arch == arch})
        return out

    def _combine(self, states, infos, previous=None):
        return stack(states, [max(i.num_samples, 1) for i in infos])

    def global_model(self, arch: str):
        """The merged base with no LoRA on top (a zero adapter)."""
        zero = self._global.get(arch)
        return None if zero is None else {LOCAL: (zero, 1.0)}

    def server_state(self) -> dict[str, torch.Tensor]:
        state = Method.server_state(self)
        for arch, merged in sorted(self._target.items()):
            state.update({f"flora/{arch}/{m}": v for m, v in merged.items()})
        return state

    def load_server_state(self, state) -> None:
        Method.load_server_state(self, state)
        self._target = {}
        for name, value in state.items():
            if name.startswith("flora/"):
                _, arch, m = name.split("/", 2)
                self._target.setdefault(arch, {})[m] = value
        for arch in self._target:
            self._sync(arch)
