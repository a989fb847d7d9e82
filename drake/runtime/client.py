"""The runtime's side of :class:`baselines.base.ClientHandle`: one client on a shared base model.

All clients of an architecture share one frozen base model carrying the method's named LoRA
adapters. A client's adapter weights and optimiser state live in a :class:`ClientRecord`
(CPU tensors) and are swapped into the shared model for the client's turn, so memory grows by
adapter + optimiser state per client, never by a model copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from drake.models import adapter_state, load_adapter_state

#: Seed tags of a handle's sample draws: a training turn's and an evaluation's.
TRAIN_STREAM, EVAL_STREAM = 17, 29


@dataclass
class ClientRecord:
    """What persists for a client between turns (and in checkpoints): its adapters, their
    optimiser states, and ``state``, the named tensors a method keeps per client (SIMA's
    gradient average); the method object itself holds no per-client state."""

    adapters: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    optim: dict[str, dict[str, Any]] = field(default_factory=dict)
    state: dict[str, torch.Tensor] = field(default_factory=dict)


def lora_layers(model: torch.nn.Module) -> list[Any]:
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


class PeftAdapters:
    """The default :class:`~baselines.base.AdapterSet`: named peft LoRA adapters on one model.

    LoRA deltas of active adapters add up; a weight w scales adapter a's delta by w (its
    ``scaling`` becomes w · alpha / r), which is how FedDPA's ½G + ½L and instance-wise
    weights are applied.
    """

    def __init__(self, model: torch.nn.Module, names: Sequence[str]) -> None:
        self.model = model
        self.layers = lora_layers(model)
        self.base = [{n: layer.scaling[n] for n in names} for layer in self.layers]
        self.names = list(names)
        self._params = {n: [p for k, p in model.named_parameters()
                            if "lora_" in k and f".{n}." in k] for n in names}

    def state(self, name: str) -> dict[str, torch.Tensor]:
        return adapter_state(self.model, name)

    def load(self, name: str, state: Mapping[str, torch.Tensor]) -> None:
        load_adapter_state(self.model, name, dict(state))

    def params(self, name: str) -> list[torch.nn.Parameter]:
        return self._params[name]

    def activate(self, names: Sequence[str], weights: Sequence[float] | None = None,
                 trainable: Sequence[str] = ()) -> None:
        names = list(names)
        weights = list(weights) if weights is not None else [1.0] * len(names)
        for layer, base in zip(self.layers, self.base):
            layer.set_adapter(names)
            for n, w in zip(names, weights):
                layer.scaling[n] = base[n] * w
        for n, params in self._params.items():
            for p in params:
                p.requires_grad_(n in trainable)


class TapAdapters(PeftAdapters):
    """The adapter set of a TAP model: named peft adapters, each TAP's LoRA plus its own copy
    of the fully trained modules (peft's ``modules_to_save``). Usually one adapter is active
    (TAP's personal model X and FL copy W are two adapters, never mixed). Several active
    adapters with weights (FedDAT's Dual-Adapter Teacher) add their LoRA deltas, each scaled by
    its weight, as :class:`PeftAdapters` does, and each fully trained module gives the weighted
    sum of its copies' outputs: the same mix of the adapters' contributions, at the output of
    modules that have no frozen base."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str]) -> None:
        from peft.utils.other import ModulesToSaveWrapper

        from drake.models.lora import _adapter_params

        super().__init__(model, names)
        self._params = {n: list(_adapter_params(model, n).values()) for n in self.names}
        self.wrappers = [m for m in model.modules() if isinstance(m, ModulesToSaveWrapper)]

    def activate(self, names: Sequence[str], weights: Sequence[float] | None = None,
                 trainable: Sequence[str] = ()) -> None:
        names = list(names)
        weights = [1.0] * len(names) if weights is None else [float(w) for w in weights]
        if len(weights) != len(names):
            raise ValueError(f"{len(names)} adapters {names} but {len(weights)} weights")
        self.model.set_adapter(names[0])
        mix = list(zip(names, weights)) if (len(names), weights) != (1, [1.0]) else None
        for wrapper in self.wrappers:
            if mix is None:
                wrapper.__dict__.pop("_forward_wrapped", None)
            else:  # an instance attribute shadows peft's one-copy forward
                wrapper.__dict__["_forward_wrapped"] = _mixed_forward(wrapper, mix)
        super().activate(names, weights, trainable)


def _mixed_forward(wrapper: Any, mix: Sequence[tuple[str, float]]):
    """A ``modules_to_save`` wrapper's forward that sums its copies' outputs, weighted."""

    def forward(*args: Any, **kwargs: Any) -> torch.Tensor:
        return sum(w * wrapper.modules_to_save[n](*args, **kwargs) for n, w in mix)

    return forward


class RuntimeClient:
    """A client's handle for one turn: the Method API's ClientHandle."""

    def __init__(self, cid: int, arch: str, bundle, control, record: ClientRecord,
                 memory: Sequence[str], data, *, round_: int, steps: int, batch_size: int,
                 lr: float, seed: int, proxy=None,
                 optimizer: tuple[str, Mapping[str, Any]] = ("adamw", {"weight_decay": 0.0}),
                 fresh_optimizer: bool = False, stream: int = TRAIN_STREAM,
                 public: Sequence[Mapping[str, Any]] = (), source=None) -> None:
        self.id = cid
        self.arch = arch
        self.round = round_
        self.steps = steps
        self.bundle = bundle
        self.control = control
        self.record = record
        self.memory = list(memory)
        self.num_samples = len(self.memory)
        self.data = data
        self.batch_size = batch_size
        self.lr = lr
        # training and evaluation handles of one round draw from different streams, so that a
        # method's batch drawn before evaluation is not the round's first training batch again
        self.rng = np.random.default_rng([seed, round_, cid, stream])
        self.proxy = proxy
        #: the benchmark's public samples (distillation data), and what turns the handle's
        #: ``memory`` entries into training samples (default: the build's rows by id)
        self.public = public
        self._source = source if source is not None else (
            lambda ids: self.data.training_samples(ids))
        self.last_samples: list[Mapping[str, Any]] = []
        self._optims: dict[str, torch.optim.Optimizer] = {}
        #: the method's local optimiser (name, keyword arguments), and whether each turn starts
        #: a fresh one instead of the client's saved state
        self.optimizer, self.fresh_optimizer = optimizer, fresh_optimizer
        #: the method's per-client tensors; kept (in the record) only when the turn is saved
        self.state: dict[str, torch.Tensor] = dict(record.state)
        for name, state in record.adapters.items():
            control.load(name, state)

    @property
    def tasks(self) -> list[str]:
        """The client's own tasks (none for the server's handle)."""
        data = self.data
        if data is None or not hasattr(data, "client_tasks") or self.id >= data.num_clients:
            return []
        return list(data.client_tasks[self.id])

    # --- state ---------------------------------------------------------------------------
    def get(self, adapter: str) -> dict[str, torch.Tensor]:
        return self.control.state(adapter)

    def set(self, adapter: str, state: Mapping[str, torch.Tensor]) -> None:
        self.control.load(adapter, state)

    def params(self, adapter: str) -> list[torch.nn.Parameter]:
        return self.control.params(adapter)

    def _optimizer(self, adapter: str) -> torch.optim.Optimizer:
        if adapter not in self._optims:
            name, kwargs = self.optimizer
            kind = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[name]
            # an adapter set may train some of its parameters at a scaled rate (FedMosaic's P/Q)
            groups = getattr(self.control, "param_groups", None)
            scaled = groups(adapter) if groups else [(1.0, self.params(adapter))]
            opt = kind([{"params": ps, "lr": self.lr * scale} for scale, ps in scaled if ps],
                       lr=self.lr, **kwargs)
            saved = None if self.fresh_optimizer else self.record.optim.get(adapter)
            if saved:
                opt.load_state_dict(saved)
            self._optims[adapter] = opt
        return self._optims[adapter]

    def save(self) -> ClientRecord:
        """Copy the client's adapters, optimiser and method states out of the turn."""
        self.record.state = {k: v.detach().clone() for k, v in self.state.items()}
        for name in self.control.names:
            self.record.adapters[name] = self.get(name)
        for name, opt in self._optims.items():
            if self.fresh_optimizer:  # nothing carried to the client's next turn
                continue
            sd = opt.state_dict()
            self.record.optim[name] = {
                "state": {k: {kk: (vv.detach().clone() if torch.is_tensor(vv) else vv)
                              for kk, vv in v.items()} for k, v in sd["state"].items()},
                "param_groups": sd["param_groups"],
            }
        return self.record

    # --- data ----------------------------------------------------------------------------
    def _draw(self, k: int) -> list[Mapping[str, Any]]:
        if not self.memory:
            raise RuntimeError(f"client {self.id} has no training sample by round {self.round}")
        replace = len(self.memory) < k
        idx = self.rng.choice(len(self.memory), size=k, replace=replace)
        return self._source([self.memory[i] for i in idx])

    def next_batch(self) -> dict[str, torch.Tensor]:
        self.last_samples = self._draw(self.batch_size)
        return self.bundle.collate(self.last_samples, train=True)

    def batch(self, samples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """A training batch of the given samples (distillation on fixed public batches)."""
        return self.bundle.collate(list(samples), train=True)

    def train_samples(self, k: int) -> list[Mapping[str, Any]]:
        return self._draw(min(k, len(self.memory))) if self.memory else []

    # --- compute -------------------------------------------------------------------------
    def _train_with(self, adapters: Sequence[str], weights: Sequence[float] | None,
                    trainable: Sequence[str] | None) -> None:
        """``adapters`` active (weighted), gradients to ``trainable`` (default all of them),
        the model in training mode."""
        self.control.activate(adapters, weights,
                              trainable=adapters if trainable is None else trainable)
        self.bundle.model.train()

    def loss(self, batch, adapters: Sequence[str], weights: Sequence[float] | None = None,
             trainable: Sequence[str] | None = None):
        self._train_with(adapters, weights, trainable)
        return self.bundle.loss(batch)

    def logits(self, batch, adapters: Sequence[str], weights: Sequence[float] | None = None,
               trainable: Sequence[str] | None = None):
        self._train_with(adapters, weights, trainable)
        return self.bundle.label_logits(batch)

    def step(self, adapter, loss: torch.Tensor, reset_to=None) -> None:
        names = [adapter] if isinstance(adapter, str) else list(adapter)
        for name in self.control.names:
            for p in self.control.params(name):
                p.grad = None
        loss.backward()
        if reset_to is not None:
            for name in names:
                self.set(name, reset_to)
        for name in names:
            self._optimizer(name).step()

    def hidden(self, samples, adapters: Sequence[str]) -> torch.Tensor:
        self.control.activate(adapters)
        self.bundle.model.eval()
        with torch.no_grad():
            return self.bundle.last_hidden(list(samples))
