"""The Method API: what a federated method computes, separate from the runtime that runs it.

A method is a handful of hooks, in the spirit of pfl-research's algorithm/backend split:

* :meth:`Method.adapters` — the named adapters each client model carries (``{"local": ...}`` or
  ``{"global": ..., "personal": ...}``).
* :meth:`Method.receive` — load the server's message into a client.
* :meth:`Method.local_train` — train on the client's stream for a step budget and return an
  :class:`Payload` upload.
* :meth:`Method.aggregate` — turn the uploads into one message per client (personalised
  messages are the norm).
* :meth:`Method.before_eval` / :meth:`Method.after_eval` — optional personalisation around
  evaluation (Per-FedAvg's one-step adaptation), and :meth:`Method.post_fl`.
* :meth:`Method.eval_adapters` / :meth:`Method.predict` — which adapters answer at inference.

Methods never touch files, clocks or processes: the runtime hands them a :class:`ClientHandle`
(model, optimiser, data and per-client state for one client) and plain tensors; the method
object holds only configuration and server state. Methods that compute at the server
(PerAda's, TAKFL's and FedMKT's distillation on public data) use ``Method.server``, a
:class:`ServerHandle` on each architecture's model and the benchmark's public samples. Uploads and messages are
:class:`Payload` objects — named tensors per adapter plus JSON-able metadata — which map one to
one onto Flower's ``ArrayRecord`` / ``ConfigRecord``.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import torch

from drake.errors import UnknownNameError

State = dict[str, torch.Tensor]


@dataclass
class Payload:
    """Named tensors per adapter plus JSON-able metadata: an upload or a message."""

    tensors: dict[str, State] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def nbytes(self) -> int:
        """Bytes on the wire (tensor payload only)."""
        return sum(t.numel() * t.element_size() for s in self.tensors.values()
                   for t in s.values())


@dataclass(frozen=True)
class AdapterConfig:
    """A LoRA adapter a method asks for; ``None`` fields take the model zoo's defaults."""

    r: int | None = None
    alpha: int | None = None
    dropout: float | None = None
    #: last names of the modules to adapt among the zoo's targets (e.g. ``("q_proj",
    #: "v_proj")``); None adapts every zoo target
    modules: tuple[str, ...] | None = None
    #: peft regex of the modules to adapt, in place of the zoo's targets (CLIP-LoRA's q, k and v
    #: of both encoders); None keeps the zoo's
    target_regex: str | None = None


@dataclass(frozen=True)
class ClientInfo:
    """What the server knows of a client: id, architecture, samples seen, and its own tasks
    (TAP's server sends each client the components of its tasks only)."""

    id: int
    arch: str
    num_samples: int
    tasks: tuple[str, ...] = ()


class ClientHandle(Protocol):
    """One client's view of its model, optimisers and data during a round (runtime-provided)."""

    id: int
    arch: str
    round: int
    steps: int
    num_samples: int
    batch_size: int
    #: the client's own tasks (empty for the server's handle)
    tasks: Sequence[str]

    def get(self, adapter: str) -> State: ...

    def set(self, adapter: str, state: Mapping[str, torch.Tensor]) -> None: ...

    def params(self, adapter: str) -> list[torch.nn.Parameter]: ...

    def next_batch(self) -> dict[str, torch.Tensor]: ...

    def loss(self, batch: Mapping[str, torch.Tensor], adapters: Sequence[str],
             weights: Sequence[float] | None = None,
             trainable: Sequence[str] | None = None) -> torch.Tensor:
        """LM loss with ``adapters`` active; gradients reach ``trainable`` (default: all of
        ``adapters``)."""

    def logits(self, batch: Mapping[str, torch.Tensor], adapters: Sequence[str],
               weights: Sequence[float] | None = None,
               trainable: Sequence[str] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits, labels)`` of the batch's labelled positions with ``adapters`` active, as
        :meth:`loss` scores them (a LLaVA model: each answer token's next-token logits; a CLIP
        model: each image's class logits), for distillation between adapters."""

    def step(self, adapter: str | Sequence[str], loss: torch.Tensor,
             reset_to: Mapping[str, torch.Tensor] | None = None) -> None:
        """Backward ``loss`` and take one optimiser step on the adapter(s).

        With ``reset_to``, the adapter is set to that state after the backward pass and before
        the step: the gradient taken at the current point is applied at ``reset_to``
        (first-order MAML / Per-FedAvg).
        """

    def hidden(self, samples: Sequence[Mapping[str, Any]], adapters: Sequence[str]) -> torch.Tensor:
        ...

    def train_samples(self, k: int) -> list[Mapping[str, Any]]: ...

    def batch(self, samples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """A training batch of the given samples (e.g. a fixed batch of public samples)."""

    public: Sequence[Mapping[str, Any]]
    """The benchmark's public samples (drake-synth's public split; empty where a benchmark has
    none): the unlabelled-by-clients data distillation methods share."""

    last_samples: list[Mapping[str, Any]]
    """The raw samples of the last :meth:`next_batch`."""

    state: dict[str, torch.Tensor]
    """Named tensors the method keeps for this client between its turns (checkpointed with
    the client; changes made during evaluation are not kept). Per-client state belongs here,
    never on the method object, so that clients can live in other processes or machines."""

    bundle: Any
    """The client's (shared) model bundle, for read-only questions such as its size."""

    proxy: Any
    """The frozen, adapter-free proxy bundle (smallest architecture) for methods with
    ``needs_proxy``; ``None`` otherwise."""


class ServerHandle(Protocol):
    """What a method's server side may compute with (runtime-provided as ``Method.server``):
    each architecture's shared model and the benchmark's public samples, for the server-side
    distillation of PerAda, TAKFL and FedMKT."""

    archs: list[str]
    public: Sequence[Mapping[str, Any]]

    def model(self, arch: str, adapters: Mapping[str, Mapping[str, torch.Tensor]], *,
              round: int, lr: float | None = None,
              optimizer: tuple[str, Mapping[str, Any]] | None = None) -> ClientHandle:
        """A handle on ``arch``'s shared model with ``adapters`` loaded (the method's other
        adapters fresh), whose training data are the public samples; ``lr`` and ``optimizer``
        default to the run's and the method's. Seeded by the run's seed and ``round``; nothing
        it does reaches a client's record."""

    def task_modules(self, arch: str, tasks: Sequence[str]) -> list[str] | None:
        """The modules of ``arch``'s model that ``tasks`` run through, or None where every task
        runs through all of it (TAP's model holds parts per modality and task)."""


class AdapterSet(Protocol):
    """The trainable modules a method puts into one shared base model, addressed by name.

    The runtime's default is a set of peft LoRA adapters (one per :meth:`Method.adapters`
    entry); a method with modules of its own (FedMosaic's PQ-LoRA and gates) returns its own
    from :meth:`Method.install`. States are plain named tensors that never contain the name.
    """

    names: list[str]
    model: torch.nn.Module  # the (possibly wrapped) model the adapters live in

    def state(self, name: str) -> State: ...

    def load(self, name: str, state: Mapping[str, torch.Tensor]) -> None: ...

    def params(self, name: str) -> list[torch.nn.Parameter]: ...

    # Optional: ``param_groups(name) -> [(lr_scale, params), ...]`` trains each group at
    # ``lr_scale`` times the run's learning rate (one optimiser, several groups).

    def activate(self, names: Sequence[str], weights: Sequence[float] | None = None,
                 trainable: Sequence[str] = ()) -> None:
        """Make ``names`` answer (scaled by ``weights``) and ``trainable`` get gradients."""


class Method(ABC):
    """Base class of every federated method. Subclasses set ``name`` and override hooks.

    Parameters
    ----------
    lr : float
        Learning rate of the adapters' optimiser.
    **hparams
        Method-specific hyper-parameters; all are recorded in results.
    """

    name: ClassVar[str] = ""
    #: Local steps relative to SFT at equal compute (FedMosaic's NUM_ITER / 100).
    compute_ratio: ClassVar[float] = 1.0
    #: Architecture groups: parameter averaging happens only inside a group.
    group_by_arch: ClassVar[bool] = True
    #: Ask the runtime for a frozen proxy model (the smallest architecture, no adapters);
    #: clients then offer :meth:`ClientHandle.proxy_gradient` (FedMosaic's SIMA).
    needs_proxy: ClassVar[bool] = False
    #: Model kinds the method can run on (``drake.models.zoo.ModelInfo.kind``).
    kinds: ClassVar[tuple[str, ...]] = ("llava", "clip")
    #: The local optimiser, ``(name, keyword arguments)`` with name ``adamw`` or ``sgd``; the
    #: learning rate is the run's.
    optimizer: ClassVar[tuple[str, Mapping[str, Any]]] = ("adamw", {"weight_decay": 0.0})
    #: A fresh optimiser at each of a client's turns (no momentum carried from its last round),
    #: as the CLIP prompt-learning methods run; by default a client keeps its optimiser state.
    fresh_optimizer: ClassVar[bool] = False
    #: Score clients after the round's aggregation, each with its message delivered (the new
    #: global part beside its own personal part), as the CLIP prompt-learning repositories
    #: test; by default clients are scored right after their local training, as the FedMosaic
    #: code does.
    eval_after_aggregation: ClassVar[bool] = False

    def __init__(self, lr: float = 1e-3, **hparams: Any) -> None:
        self.lr = lr
        self.hparams = {"lr": lr, **hparams}
        #: the last mean of each (adapter, architecture group), see share_within_groups
        self._group_means: dict[tuple[str, str], State] = {}
        #: what the method counted over the run (see :meth:`count`), written to results.json
        self.diagnostics: dict[str, float] = {}
        #: the server's models and public data (:class:`ServerHandle`), set by the runtime
        #: before :meth:`setup`; ``None`` where no runtime holds models (parameter counts)
        self.server: ServerHandle | None = None

    # --- set-up --------------------------------------------------------------------------------
    def setup(self, bundles: Mapping[str, Any], public: Sequence[Mapping[str, Any]], *,
              seed: int, cache_dir: Any = None) -> None:
        """One-off step before federated training, after :meth:`install`, on the shared models
        (one bundle per architecture, adapters in place and fresh) and the benchmark's public
        samples: FedMosaic's weight alignment. ``cache_dir`` is a folder the runtime gives the
        method for reusable artefacts (``None``: cache nothing)."""

    def install(self, model: torch.nn.Module, *, arch: str, lora: Mapping[str, Any],
                seed: int, peers: Mapping[str, Any] | None = None) -> AdapterSet | None:
        """Put the method's own trainable modules into ``model`` (base weights already frozen).

        Return ``None`` (the default) for peft LoRA adapters named by :meth:`adapters`, with
        ``lora`` (``r``, ``alpha``, ``dropout``, ``target_regex``) as the zoo's defaults.
        ``peers`` holds every architecture's bundle (before installation), for methods whose
        layout depends on the whole federation (FedMosaic's block count).
        """
        return None

    # --- client side -------------------------------------------------------------------------
    def adapters(self) -> dict[str, AdapterConfig]:
        return {"local": AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        """Adapters active at inference, with their weights."""
        return {next(iter(self.adapters())): 1.0}

    def receive(self, client: ClientHandle, message: Payload) -> None:
        """Load a server message: by default, each adapter state it carries replaces the client's."""
        for adapter, state in message.tensors.items():
            client.set(adapter, state)

    @abstractmethod
    def local_train(self, client: ClientHandle) -> Payload:
        """Train on the client's stream for ``client.steps`` steps; return the upload."""

    def before_eval(self, client: ClientHandle) -> None:
        """Called before a client is evaluated (after its local training)."""

    def predict(self, client: ClientHandle, samples: Sequence[Mapping[str, Any]], answer):
        """Answer ``samples``; ``answer(samples, {adapter: weight})`` is the runtime's scorer."""
        return answer(samples, self.eval_adapters())

    def after_eval(self, client: ClientHandle) -> None:
        """Called after a client is evaluated; undo what before_eval changed."""

    def post_fl(self, client: ClientHandle) -> None:
        """Optional stage after the last round (TAP's post-FL distillation)."""

    # --- server side -------------------------------------------------------------------------
    @abstractmethod
    def aggregate(self, uploads: Mapping[int, Payload], clients: Mapping[int, ClientInfo],
                  round: int) -> dict[int, Payload]:
        """One message per client that should receive one this round."""

    def count(self, key: str, value: float = 1.0, how: str = "sum") -> None:
        """Record a diagnostic at the server (``how``: ``sum``, ``min`` or ``max`` over the
        run), e.g. FediLoRA's layer edits; totals are checkpointed and written to the results
        file's ``diagnostics``."""
        if how not in ("sum", "min", "max"):
            raise ValueError(f"how must be sum, min or max, got {how!r}")
        old = self.diagnostics.get(key)
        value = float(value)
        self.diagnostics[key] = (value if old is None else old + value if how == "sum"
                                 else min(old, value) if how == "min" else max(old, value))

    def server_state(self) -> dict[str, torch.Tensor]:
        """Tensors the server keeps between rounds (checkpointed by the runtime); subclasses
        that add their own extend this one."""
        state = {f"group/{adapter}/{arch}/{key}": value
                 for (adapter, arch), mean in sorted(self._group_means.items())
                 for key, value in mean.items()}
        state.update({f"diagnostics/{key}": torch.tensor(value, dtype=torch.float64)
                      for key, value in sorted(self.diagnostics.items())})
        return state

    def load_server_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore :meth:`server_state` after a resume."""
        self._group_means = {}
        self.diagnostics = {name.removeprefix("diagnostics/"): float(value)
                            for name, value in state.items() if name.startswith("diagnostics/")}
        for name, value in state.items():
            if name.startswith("group/"):
                _, adapter, arch, key = name.split("/", 3)
                self._group_means.setdefault((adapter, arch), {})[key] = value

    def global_model(self, arch: str) -> dict[str, tuple[State, float]] | None:
        """The server's global model of architecture group ``arch``: ``{adapter: (state,
        weight)}`` to load and activate, or ``None`` where the method keeps none (SFT trains
        alone; FedMosaic's server only sends personalised mixtures).

        By default it is every adapter the server shares within groups (FedAvg's, Ditto's w,
        FedDPA's global adapter, FedSim's shared one, Per-FedAvg's meta-model), at weight 1:
        what a client would hold right after receiving the last message, without anything
        personal. The generation protocol scores it on the global test rows (FediLoRA's
        "global" numbers).
        """
        shared = {adapter: (mean, 1.0) for (adapter, group), mean in
                  sorted(self._group_means.items()) if group == arch}
        return shared or None

    def share_within_groups(self, uploads: Mapping[int, Payload],
                            clients: Mapping[int, ClientInfo], adapter: str
                            ) -> dict[int, Payload]:
        """FedIT's message: every client gets its architecture group's data-size-weighted mean
        of ``adapter`` (:func:`average_within_groups`).

        Under partial participation (``--frac``) or a skipped client a group may have no upload
        this round: its clients then get the group's last mean again, and a group that never
        uploaded sends nothing (its clients keep their own adapter). The last means are server
        state, checkpointed with it.
        """
        for arch, mean in average_within_groups(uploads, clients, adapter).items():
            self._group_means[(adapter, arch)] = mean
        out = {}
        for cid, info in clients.items():
            mean = self._group_means.get((adapter, info.arch))
            if mean is not None:
                out[cid] = Payload({adapter: mean})
        return out

    # --- shared pieces -----------------------------------------------------------------------
    def train_adapter(self, client: ClientHandle, adapter: str | Sequence[str], steps: int,
                      extra=None) -> float:
        """Plain CE training of one adapter (or several together) for ``steps`` steps;
        ``extra(client)`` adds a term.

        Returns the mean loss over the steps (0 when ``steps`` is 0).
        """
        names = [adapter] if isinstance(adapter, str) else list(adapter)
        total = 0.0
        for _ in range(steps):
            loss = client.loss(client.next_batch(), names)
            if extra is not None:
                loss = loss + extra(client)
            client.step(adapter, loss)
            total += float(loss.detach())
        return total / steps if steps else 0.0


def weighted_average(states: Sequence[State], weights: Sequence[float]) -> State:
    """Σ_k w_k θ_k / Σ_k w_k, key by key (states must share keys and shapes).

    Raises
    ------
    ValueError
        On an empty list, mismatched keys or shapes, or non-positive total weight.
    """
    if not states:
        raise ValueError("weighted_average needs at least one state")
    if len(states) != len(weights):
        raise ValueError(f"{len(states)} states but {len(weights)} weights")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError(f"weights must add up to a positive number, got {list(weights)}")
    keys = set(states[0])
    out: State = {}
    for i, s in enumerate(states):
        if set(s) != keys:
            raise ValueError(f"state {i} has keys {sorted(set(s) ^ keys)[:3]} the others lack; "
                             f"only identical architectures can be averaged")
    for key in sorted(keys):
        ref = states[0][key]
        acc = torch.zeros_like(ref, dtype=torch.float64)
        for s, w in zip(states, weights):
            if s[key].shape != ref.shape:
                raise ValueError(f"{key}: shape {tuple(s[key].shape)} != {tuple(ref.shape)}")
            acc += s[key].to(torch.float64) * (w / total)
        out[key] = acc.to(ref.dtype)
    return out


def group_by_arch(clients: Iterable[ClientInfo]) -> dict[str, list[int]]:
    """Client ids per architecture, in id order."""
    groups: dict[str, list[int]] = {}
    for info in sorted(clients, key=lambda c: c.id):
        groups.setdefault(info.arch, []).append(info.id)
    return groups


def average_within_groups(uploads: Mapping[int, Payload], clients: Mapping[int, ClientInfo],
                          adapter: str) -> dict[str, State]:
    """Data-size-weighted average of ``adapter`` within each architecture group (FedIT)."""
    out = {}
    for arch, ids in group_by_arch(clients[i] for i in uploads).items():
        states = [uploads[i].tensors[adapter] for i in ids]
        out[arch] = weighted_average(states, [max(clients[i].num_samples, 1) for i in ids])
    return out


def proximal(params: Sequence[torch.nn.Parameter], anchor: Sequence[torch.Tensor],
             lam: float) -> torch.Tensor:
    """(λ/2) Σ ‖p − a‖², the proximal pull of FedProx and Ditto."""
    total = torch.zeros(())
    for p, a in zip(params, anchor, strict=True):
        total = total + ((p - a) ** 2).sum()
    return 0.5 * lam * total


# --- registry ---------------------------------------------------------------------------------
_REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make a method available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"method name {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


#: Modules to import for methods of one's own (comma-separated), so that every process that
#: runs clients (a Flower SuperNode, a Ray actor) registers them too.
METHOD_MODULES_ENV = "DRAKE_METHOD_MODULES"


def method_names() -> list[str]:
    import baselines  # noqa: F401  (registers every built-in method)

    for module in filter(None, (m.strip() for m in
                                os.environ.get(METHOD_MODULES_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UnknownNameError(f"{METHOD_MODULES_ENV} names module {module!r}, which "
                                   f"cannot be imported ({exc}); put it on PYTHONPATH or fix "
                                   f"the variable") from exc
    return sorted(_REGISTRY)


def get_method(name: str) -> type[Method]:
    names = method_names()
    if name not in _REGISTRY:
        raise UnknownNameError(f"unknown method {name!r}; `drake methods` lists them: "
                               f"{', '.join(names)}")
    return _REGISTRY[name]
