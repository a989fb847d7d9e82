"""PQ-LoRA (FedMosaic §4.2, Eq. 6, 9, 20) and the gated local/global fusion of all adapters.

PQ-LoRA replaces the low-rank update of a linear map by ``B (P A h + Q)`` (Eq. 6)::

    h_O = W_p h_I + B (P A h_I + Q),   A in R^{r x d_I}, B in R^{d_O x r}, P in R^{r x r}, Q in R^r

``A`` and ``B`` are frozen, with orthonormal rows and columns (``A Aᵀ = I``, ``Bᵀ B = I``,
Eq. 20); only ``P`` and ``Q`` train. Their shapes depend on the rank alone, so the ``P``/``Q`` of
a 64-wide and of a 96-wide model average key by key, once block ``k`` of one is paired with block
``k`` of the other (:mod:`baselines.fedmosaic.blocks`). With frozen, shared ``A`` and ``B`` the
average of ``P`` is exactly the average of the updates ``B P A`` (Theorem 2), and with orthonormal
ones the updates ``B P A`` span all ``r²`` directions they can (Theorem 1).

Each client holds a trainable *local* adapter and a frozen *global* one received from the server;
at every adapted linear layer their outputs are mixed by a learnable gate (Eq. 9)::

    h_O = W_p h_I + (1 - σ(β)) h_L + σ(β) h_G,   β = 0 at the start (Alg. 1)

This module gives

* :class:`PQLoRALinear`, which wraps any ``nn.Linear`` and holds named ``(P, Q)`` pairs (``local``,
  ``global``) over one frozen ``(A, B)`` and one gate;
* :func:`inject_pqlora`, which puts it on the block-end layers of a (possibly peft-wrapped) model,
  and :func:`pq_state` / :func:`load_pq_state`, which move ``P``/``Q`` as plain tensors keyed by
  block (``block0.self_attn.q_proj.P``), identical across architectures;
* :func:`gate_lora_layers`, which gives the conventional (peft) LoRA layers the same gate between
  a local and a global peft adapter, as the paper's global module covers them too (Fig. 2, Alg. 1:
  one β per adapted layer);
* :func:`activate` and :func:`adapters_off` to switch adapters on, off and trainable.

Adapter ``n``'s ``P``/``Q`` are the parameters ``...lora_PQ.<n>.P|Q`` and a layer's gate is
``...lora_gate.<local>.beta``, named like peft's ``...lora_A.<n>.weight``, so that
:func:`drake.models.adapter_state` (with which the runtime swaps clients) carries them: the local
adapter's state holds its peft weights, ``P``, ``Q`` and every ``β``; the global one's its peft
weights, ``P`` and ``Q``.

Choices the paper leaves open, and how the public code differs:

* ``P`` and ``Q`` start at zero, so a fresh PQ-LoRA leaves the model's output unchanged while
  ``∂L/∂P = Bᵀ (∂L/∂h_O) (A h_I)ᵀ`` is non-zero. The paper does not state their initialisation;
  the public code builds ``P = I`` (``colora``) or ``P = 0, Q`` Kaiming (``colora_abinit``) but
  zeroes both after the A/B alignment, before federated training starts.
* No ``alpha / r`` factor by default (Eq. 6 has none); the public code multiplies the PQ branch
  by ``alpha / r`` (``scale``).
* The public code applies ``P`` on the right of row vectors (``(A x) @ P``, i.e. ``Pᵀ`` in Eq. 6);
  this module follows Eq. 6. Aggregation is unaffected as long as every client uses one convention.
* β: the paper has one scalar per layer; the public code uses an input-dependent, noisy gate
  ``σ(mean_t(x_t · w))`` with ``w ∈ R^{d_I}`` per linear layer. We keep the paper's scalar, one per
  adapted linear layer.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from baselines.fedmosaic.blocks import LLM_LINEAR_MODULES, BlockMap

__all__ = [
    "FusionGate",
    "PQPair",
    "PQLoRALinear",
    "orthonormal_rows",
    "decoder_layers",
    "inject_pqlora",
    "pq_modules",
    "pq_state",
    "load_pq_state",
    "pq_frozen_state",
    "load_pq_frozen_state",
    "gate_lora_layers",
    "gate_state",
    "load_gate_state",
    "gate_parameters",
    "activate",
    "adapters_off",
]

_PEFT_PREFIX = "base_model.model."


def orthonormal_rows(r: int, d: int, *, seed: int, stream: str = "") -> torch.Tensor:
    """An ``r x d`` float32 matrix with orthonormal rows (``M Mᵀ = I_r``), a function of its arguments.

    Drawn as the Q factor of a Gaussian ``d x r`` matrix from ``np.random.default_rng([seed,
    crc32(stream)])``, with the signs fixed so that the R factor has a positive diagonal (which
    makes the factorisation unique). ``stream`` separates the matrices of different layers.
    """
    if not 1 <= r <= d:
        raise ValueError(f"need 1 <= r <= d for orthonormal rows, got r={r}, d={d}")
    rng = np.random.default_rng([int(seed), zlib.crc32(stream.encode())])
    gauss = torch.from_numpy(rng.standard_normal((d, r)))
    q, rmat = torch.linalg.qr(gauss)
    q = q * torch.sign(torch.diagonal(rmat)).unsqueeze(0)
    return q.T.contiguous().to(torch.float32)


class FusionGate(nn.Module):
    """The gate of Eq. 9: weights ``(1 - σ(β), σ(β))`` for the local and the global adapter.

    ``β`` starts at 0 (both weights ½), as in Alg. 1.
    """

    def __init__(self) -> None:
        super().__init__()
        self.beta = nn.Parameter(torch.zeros(()))

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(1 - σ(β), σ(β))``: the local and the global weight."""
        g = torch.sigmoid(self.beta)
        return 1.0 - g, g


class PQPair(nn.Module):
    """One adapter's shareable modules: ``P`` (``r x r``) and ``Q`` (``r``), both starting at zero."""

    def __init__(self, r: int, *, device: torch.device | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.P = nn.Parameter(torch.zeros(r, r, device=device, dtype=dtype))
        self.Q = nn.Parameter(torch.zeros(r, device=device, dtype=dtype))


class PQLoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus PQ-LoRA adapters (Eq. 6) fused by a gate (Eq. 9).

    Parameters
    ----------
    base : nn.Linear
        The pre-trained layer ``W_p`` (any ``in_features``/``out_features``); it stays frozen.
    r : int
        Rank; ``1 <= r <= min(in_features, out_features)`` so that ``A`` and ``B`` can be
        orthonormal.
    adapters : sequence of str
        Names of the ``(P, Q)`` pairs to create, local first, e.g. ``("local", "global")``.
    seed : int
        Seed of the orthonormal ``A``, ``B`` (Eq. 20); mixed with ``stream``.
    stream : str
        Distinguishes the layers of one model (e.g. ``"block0.self_attn.q_proj"``); clients of one
        architecture built with the same seed get the same ``A`` and ``B``.
    scale : float
        Factor on the PQ branch (1 in Eq. 6; ``alpha / r`` in the public code). Per adapter in
        ``scaling``, which a runtime may rescale as it does peft's.
    block, module_path : int or None, str
        Where the layer sits (set by :func:`inject_pqlora`); they name its block-keyed states.

    Notes
    -----
    ``A`` (``r x d_I``) and ``B`` (``d_O x r``) are buffers: they move with the module and sit in
    its ``state_dict`` but are never returned by ``parameters()``. Adapter ``n``'s ``P``/``Q`` are
    the parameters ``lora_PQ.<n>.P``/``.Q`` and the gate is ``lora_gate.<local>.beta``: named like
    peft's ``lora_A.<n>.weight``, so :func:`drake.models.adapter_state` of the local adapter
    carries them (``P``, ``Q`` and ``β``) and that of the global adapter its ``P``, ``Q``, with
    arch-specific keys; :func:`pq_state` gives the block-keyed, arch-free view. With one active
    adapter ``n`` the output is ``W_p h + s_n B(P_n A h + Q_n)``; with two, ``(local, global)``,
    it is Eq. 9; with none, ``W_p h``.
    """

    def __init__(self, base: nn.Linear, r: int, *, adapters: Sequence[str] = ("local",),
                 seed: int = 0, stream: str = "", scale: float = 1.0,
                 block: int | None = None, module_path: str = "") -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"PQLoRALinear wraps an nn.Linear, got {type(base).__name__}")
        d_in, d_out = base.in_features, base.out_features
        if not 1 <= r <= min(d_in, d_out):
            raise ValueError(
                f"rank r={r} does not fit a {d_in}->{d_out} linear layer; PQ-LoRA needs "
                f"1 <= r <= {min(d_in, d_out)} for orthonormal A and B"
            )
        names = list(adapters)
        if not names or len(set(names)) != len(names) or any(not n or "." in n for n in names):
            raise ValueError(f"adapters must be distinct non-empty names without dots, got {names}")
        self.base = base
        self.base.requires_grad_(False)
        self.r = int(r)
        self.stream = stream
        self.block = block
        self.module_path = module_path
        w = base.weight
        self.register_buffer("A", orthonormal_rows(r, d_in, seed=seed, stream=stream + ":A")
                             .to(device=w.device, dtype=w.dtype))
        self.register_buffer("B", orthonormal_rows(r, d_out, seed=seed, stream=stream + ":B")
                             .T.contiguous().to(device=w.device, dtype=w.dtype))
        self.lora_PQ = nn.ModuleDict({n: PQPair(r, device=w.device, dtype=w.dtype) for n in names})
        self.lora_gate = nn.ModuleDict({names[0]: FusionGate().to(device=w.device)})
        self.scaling: dict[str, float] = {n: float(scale) for n in names}
        self.active: tuple[str, ...] = (names[0],)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def adapter_names(self) -> list[str]:
        return list(self.lora_PQ.keys())

    @property
    def P(self) -> dict[str, nn.Parameter]:
        """Adapter name -> its ``P``."""
        return {n: pair.P for n, pair in self.lora_PQ.items()}

    @property
    def Q(self) -> dict[str, nn.Parameter]:
        """Adapter name -> its ``Q``."""
        return {n: pair.Q for n, pair in self.lora_PQ.items()}

    @property
    def gate(self) -> FusionGate:
        """The Eq. 9 gate (owned by the first, local, adapter)."""
        return next(iter(self.lora_gate.values()))

    @property
    def active_adapters(self) -> list[str]:
        return list(self.active)

    def set_active(self, names: Sequence[str]) -> None:
        """Activate ``()`` (base only), ``(n,)`` (Eq. 6) or ``(local, global)`` (Eq. 9, in that order)."""
        names = tuple(names)
        unknown = [n for n in names if n not in self.lora_PQ]
        if unknown:
            raise KeyError(f"PQ-LoRA has no adapter {unknown[0]!r}; it has {self.adapter_names}")
        if len(names) > 2 or len(set(names)) != len(names):
            raise ValueError(f"activate at most two distinct adapters (local, global), got {names}")
        self.active = names

    def set_adapter(self, names: str | Sequence[str]) -> None:
        """peft-style activation: the known names among ``names`` become active (unknown ones are
        ignored, as peft does for layers without that adapter)."""
        names = [names] if isinstance(names, str) else list(names)
        self.set_active(tuple(n for n in names if n in self.lora_PQ))

    def _inner(self, z: torch.Tensor, name: str) -> torch.Tensor:
        pair = self.lora_PQ[name]
        return F.linear(z, pair.P) + pair.Q

    def branch(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """``B (P_name A x + Q_name)`` without the base output, the scaling or the gate."""
        z = F.linear(x.to(self.A.dtype), self.A)
        return F.linear(self._inner(z, name), self.B)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        if not self.active:
            return out
        z = F.linear(x.to(self.A.dtype), self.A)
        if len(self.active) == 1:
            n = self.active[0]
            u = self.scaling[n] * self._inner(z, n)
        else:
            local, glob = self.active
            w_local, w_global = self.gate.weights()
            # B is linear, so mixing in the r-dim space equals mixing h_L and h_G (Eq. 9)
            u = (w_local * self.scaling[local] * self._inner(z, local)
                 + w_global * self.scaling[glob] * self._inner(z, glob))
        return out + F.linear(u, self.B).to(out.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, r={self.r}, "
                f"adapters={self.adapter_names}, active={list(self.active)}")


# --------------------------------------------------------------------------- model surgery

def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of the language model of ``model`` (raw or peft-wrapped LLaVA, or a LM).

    Raises
    ------
    ValueError
        When no unique ``...layers`` module list of the language model is found.
    """
    found = [(n, m) for n, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and n.split(".")[-1] == "layers"
             and "vision" not in n]
    lm = [(n, m) for n, m in found if "language_model" in n]
    pick = lm or found
    if len(pick) != 1:
        names = [n for n, _ in pick] or "none"
        raise ValueError(f"cannot find the language model's decoder layers (candidates: {names}); "
                         "pass a LLaVA-style or decoder-only model")
    return pick[0][1]


def _resolve(layer: nn.Module, path: str) -> tuple[nn.Module, str, nn.Module]:
    parent = layer
    parts = path.split(".")
    for p in parts[:-1]:
        parent = getattr(parent, p)
    return parent, parts[-1], getattr(parent, parts[-1])


def inject_pqlora(
    model: nn.Module,
    bmap: BlockMap,
    *,
    r: int,
    adapters: Sequence[str] = ("local", "global"),
    seed: int = 0,
    modules: Sequence[str] = LLM_LINEAR_MODULES,
    scale: float = 1.0,
) -> dict[str, PQLoRALinear]:
    """Put a :class:`PQLoRALinear` on ``modules`` of every block-end layer of ``bmap`` (Alg. 2).

    Works on a raw model and on a peft model, before or after conventional LoRA is added, as long
    as peft did not adapt the block-end layers (build its regex with
    :func:`~baselines.fedmosaic.blocks.lora_target_regex`). Adding a peft adapter afterwards
    freezes every parameter outside peft's own layers, ``P``/``Q`` included; call
    :func:`activate` after the last ``add_lora``.

    Returns
    -------
    dict
        ``"block{k}.{module}"`` -> the new layer, in block order.

    Raises
    ------
    ValueError
        When the model's depth differs from ``bmap.num_layers``, a target is already adapted
        (by peft or an earlier call), or ``r`` does not fit a layer.
    """
    layers = decoder_layers(model)
    if len(layers) != bmap.num_layers:
        raise ValueError(f"block map is for {bmap.num_layers} layers, the model has {len(layers)}; "
                         "build it with block_map(<model depth>, num_blocks)")
    out: dict[str, PQLoRALinear] = {}
    for k, idx in enumerate(bmap.layers):
        for mod in modules:
            parent, leaf, target = _resolve(layers[idx], mod)
            if type(target) is not nn.Linear:
                raise ValueError(
                    f"layer {idx} {mod} is a {type(target).__name__}, not a plain nn.Linear: "
                    "exclude PQ-LoRA layers from peft LoRA (lora_target_regex) and inject once"
                )
            key = f"block{k}.{mod}"
            pq = PQLoRALinear(target, r, adapters=adapters, seed=seed, stream=key, scale=scale,
                              block=k, module_path=mod)
            setattr(parent, leaf, pq)
            out[key] = pq
    return out


def pq_modules(model: nn.Module) -> dict[str, PQLoRALinear]:
    """``"block{k}.{module}"`` -> :class:`PQLoRALinear` of a model prepared by :func:`inject_pqlora`."""
    found: dict[str, PQLoRALinear] = {}
    for m in model.modules():
        if isinstance(m, PQLoRALinear):
            key = m.stream if m.block is None else f"block{m.block}.{m.module_path}"
            if key in found:
                raise ValueError(f"two PQ-LoRA layers claim {key}; inject PQ-LoRA once per model")
            found[key] = m
    return dict(sorted(found.items(), key=lambda kv: _block_sort(kv[0])))


def _block_sort(key: str) -> tuple[int, str]:
    head, _, rest = key.partition(".")
    return (int(head[5:]) if head[5:].isdigit() else -1, rest)


def _require(mods: Mapping[str, PQLoRALinear]) -> None:
    if not mods:
        raise KeyError("the model has no PQ-LoRA layer; add them with inject_pqlora")


def pq_state(model: nn.Module, adapter: str) -> dict[str, torch.Tensor]:
    """Detached CPU copies of adapter ``adapter``'s ``P`` and ``Q``: ``block{k}.{module}.P|Q``.

    The keys and shapes depend on ``N_B``, the module list and ``r`` only, so the states of a
    Llama and a Qwen client line up for :func:`baselines.base.weighted_average`.
    """
    mods = pq_modules(model)
    _require(mods)
    out: dict[str, torch.Tensor] = {}
    for key, m in mods.items():
        if adapter not in m.P:
            raise KeyError(f"PQ-LoRA {key} has no adapter {adapter!r}; it has {m.adapter_names}")
        out[f"{key}.P"] = m.P[adapter].detach().to("cpu", copy=True)
        out[f"{key}.Q"] = m.Q[adapter].detach().to("cpu", copy=True)
    return out


def load_pq_state(model: nn.Module, adapter: str, state: Mapping[str, torch.Tensor]) -> None:
    """Copy a :func:`pq_state` dict into adapter ``adapter`` (keys and shapes must match exactly).

    Raises
    ------
    KeyError
        On a missing or unexpected key (e.g. states of a different ``N_B``).
    ValueError
        On a shape mismatch (a different rank).
    """
    mods = pq_modules(model)
    _require(mods)
    params = {}
    for key, m in mods.items():
        if adapter not in m.P:
            raise KeyError(f"PQ-LoRA {key} has no adapter {adapter!r}; it has {m.adapter_names}")
        params[f"{key}.P"] = m.P[adapter]
        params[f"{key}.Q"] = m.Q[adapter]
    _copy_into(params, state, what=f"PQ-LoRA adapter {adapter!r}")


def pq_frozen_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The frozen ``A`` and ``B`` of every PQ-LoRA layer: ``block{k}.{module}.A|B`` (CPU copies)."""
    mods = pq_modules(model)
    _require(mods)
    out: dict[str, torch.Tensor] = {}
    for key, m in mods.items():
        out[f"{key}.A"] = m.A.detach().to("cpu", copy=True)
        out[f"{key}.B"] = m.B.detach().to("cpu", copy=True)
    return out


def load_pq_frozen_state(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Set the frozen ``A`` and ``B`` (e.g. aligned ones) from a :func:`pq_frozen_state` dict."""
    mods = pq_modules(model)
    _require(mods)
    bufs = {}
    for key, m in mods.items():
        bufs[f"{key}.A"] = m.A
        bufs[f"{key}.B"] = m.B
    _copy_into(bufs, state, what="PQ-LoRA A/B")


def _copy_into(targets: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], *,
               what: str) -> None:
    missing = sorted(set(targets) - set(state))
    extra = sorted(set(state) - set(targets))
    if missing or extra:
        raise KeyError(f"state does not fit {what}: missing {missing[:3]}, unexpected {extra[:3]}; "
                       "was it saved with the same N_B and module list?")
    with torch.no_grad():
        for key, t in targets.items():
            v = state[key]
            if tuple(v.shape) != tuple(t.shape):
                raise ValueError(f"{what} {key!r}: state has shape {tuple(v.shape)}, the model "
                                 f"expects {tuple(t.shape)}; ranks must match")
            t.copy_(v.to(device=t.device, dtype=t.dtype))


# --------------------------------------------------------------------------- gates on peft LoRA

class _GateHook:
    """Forward hook on ``lora_B[name]`` of a peft LoRA layer: scales its output by the gate weight.

    A callable object (not a closure) so that ``copy.deepcopy`` of a model rebinds it to the copy.
    """

    def __init__(self, layer: nn.Module, local: str, glob: str, side: int) -> None:
        self.layer, self.local, self.glob, self.side = layer, local, glob, side

    def __call__(self, module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        active = self.layer.active_adapters
        if self.local in active and self.glob in active:
            gate = self.layer.lora_gate[self.local]
            return output * gate.weights()[self.side].to(output.dtype)
        return output


def gate_lora_layers(model: nn.Module, local: str = "local", glob: str = "global") -> int:
    """Give every peft LoRA layer that carries both ``local`` and ``glob`` a gate (Eq. 9).

    While both adapters are active in a layer (peft ``set_adapter([local, glob])``), its output
    becomes ``W_p h + (1 - σ(β)) s B_L A_L h + σ(β) s B_G A_G h`` with peft's scaling ``s``; with
    one adapter active the layer is plain LoRA. ``β`` is the parameter ``lora_gate.<local>.beta`` of
    the layer, so :func:`drake.models.adapter_state` of the local adapter carries it (see also
    :func:`gate_state`). Merged adapters bypass the gate: never ``merge_adapter`` a gated model.

    Returns
    -------
    int
        Number of gated layers (0 when the model has no such peft layer).
    """
    from peft.tuners.lora import LoraLayer

    count = 0
    for layer in model.modules():
        if not isinstance(layer, LoraLayer):
            continue
        if local not in layer.lora_B or glob not in layer.lora_B:
            continue
        spec = (local, glob)
        if getattr(layer, "_mosaic_gate_spec", None) is not None:
            if layer._mosaic_gate_spec != spec:
                raise ValueError(f"layer already gated for {layer._mosaic_gate_spec}, not {spec}")
            count += 1
            continue
        weight = layer.lora_B[local].weight
        layer.add_module("lora_gate", nn.ModuleDict({local: FusionGate().to(device=weight.device)}))
        layer.lora_B[local].register_forward_hook(_GateHook(layer, local, glob, 0))
        layer.lora_B[glob].register_forward_hook(_GateHook(layer, local, glob, 1))
        layer._mosaic_gate_spec = spec
        count += 1
    return count


def _gates(model: nn.Module) -> dict[str, FusionGate]:
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, FusionGate):
            owner = name.rsplit(".lora_gate.", 1)[0]
            out[owner[len(_PEFT_PREFIX):] if owner.startswith(_PEFT_PREFIX) else owner] = m
    return out


def gate_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every gate's ``β``, keyed by the gated layer's path (peft's prefix removed); CPU copies."""
    return {k: g.beta.detach().to("cpu", copy=True) for k, g in sorted(_gates(model).items())}


def load_gate_state(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Set the gates' ``β`` from a :func:`gate_state` dict (keys must match exactly)."""
    _copy_into({k: g.beta for k, g in _gates(model).items()}, state, what="gates")


def gate_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The ``β`` parameters of all gates (PQ-LoRA and peft layers), in :func:`gate_state` order."""
    return [g.beta for _, g in sorted(_gates(model).items())]


# --------------------------------------------------------------------------- switching

def _peft_layers(model: nn.Module) -> list[nn.Module]:
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [m for m in model.modules() if isinstance(m, BaseTunerLayer)]


def activate(model: nn.Module, names: Sequence[str], *, trainable: Sequence[str] = (),
             train_gates: bool | None = None) -> None:
    """Activate adapters ``names`` on every PQ-LoRA and peft LoRA layer, and set what trains.

    ``names = (local,)`` trains or evaluates the local adapter alone; ``names = (local, global)``
    applies Eq. 9 wherever a layer has both (PQ-LoRA layers, and peft layers gated by
    :func:`gate_lora_layers`). Only the ``P``/``Q`` and peft weights of ``trainable`` adapters
    get ``requires_grad``; the gates train when ``train_gates`` (default: when two adapters are
    active). Base weights and ``A``/``B`` never train.
    """
    names = list(names)
    trainable = set(trainable)
    if not trainable <= set(names):
        raise ValueError(f"trainable adapters {sorted(trainable)} must be among the active {names}")
    if train_gates is None:
        train_gates = len(names) == 2
    for m in model.modules():
        if isinstance(m, PQLoRALinear):
            m.set_active(tuple(n for n in names if n in m.P))
            for n in m.adapter_names:
                m.P[n].requires_grad_(n in trainable)
                m.Q[n].requires_grad_(n in trainable)
    for layer in _peft_layers(model):
        layer.set_adapter(names)
        for attr in getattr(layer, "adapter_layer_names", ()):
            for n, sub in getattr(layer, attr).items():
                sub.requires_grad_(n in trainable)
    for g in _gates(model).values():
        g.beta.requires_grad_(bool(train_gates))


@contextlib.contextmanager
def adapters_off(model: nn.Module) -> Iterator[None]:
    """Within the block, ``model`` computes with its base weights only (PQ-LoRA and peft off).

    Active adapters and every ``requires_grad`` flag are restored afterwards. This is how the
    alignment reads base features (Alg. 3, ``scale=0``) and how SIMA's proxy model runs.
    """
    pq = [(m, m.active) for m in model.modules() if isinstance(m, PQLoRALinear)]
    peft_layers = [(m, m.disable_adapters) for m in _peft_layers(model)]
    flags = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for m, _ in pq:
            m.active = ()
        for m, _ in peft_layers:
            m.enable_adapters(False)
        yield
    finally:
        for m, active in pq:
            m.active = active
        for m, disabled in peft_layers:
            m.enable_adapters(not disabled)
        for p, flag in flags:
            p.requires_grad_(flag)
