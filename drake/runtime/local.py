"""The local runtime: one process, one frozen base model per architecture, swapped adapters.

Round r:
  1. sample clients (fraction ``frac``; draws from ``default_rng([seed, r])``; with
     ``first_round_all`` every client takes part in round 0, as pFedMMA's protocol);
  2. each sampled client, in id order, loads its pending server message, trains on batches
     drawn from its episodic memory (all samples streamed to it by round r) and uploads;
  3. at evaluation rounds every client is scored on every task with the adapters it holds right
     after its local training (as the FedMosaic code evaluates), giving Self and Others over
     the tasks that have started by then (``eval_tasks="all"``: over every task);
  4. the method aggregates the uploads into per-client messages, delivered at the client's
     next turn (a method with ``eval_after_aggregation``, the CLIP prompt learners', is scored
     here instead of in step 3, each client with its message delivered to a copy of its
     state);
  5. a checkpoint (safetensors + JSON) is written atomically.

After the last round, a method with a post-FL stage (TAP's distillation) runs it on every
client, after delivering the client's pending message; the evaluation that follows replaces the
last point. Evaluation, checkpointing and ``metrics.jsonl`` are :class:`Hook` objects around
this loop (pfl-research's callbacks); a run takes more through ``hooks=``.

Every random draw is a function of (seed, round, client), so a run resumed from the checkpoint
of round k continues exactly as the unbroken run would.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from baselines.base import ClientInfo, Method, Payload, get_method
from drake.build import sha256_file
from drake.errors import DrakeError
from drake.locks import exclusive
from drake.runtime.client import (
    EVAL_STREAM,
    TRAIN_STREAM,
    ClientRecord,
    PeftAdapters,
    RuntimeClient,
)
from drake.runtime.data import FederatedData

log = logging.getLogger(__name__)


CHECKPOINT_FILES = ("state.safetensors", "state.json")


class ClientFailed(DrakeError):
    """A client raised during local training and the run was told to stop."""


@dataclass
class RunConfig:
    """Everything needed to rerun a federated run (written to ``config.json``)."""

    data: str
    scenario: str
    method: str
    out: str
    seed: int = 0
    rounds: int | None = None
    local_steps: int | None = None
    #: Local epochs per round instead of a step budget (pFedMMA's and FediLoRA's protocols):
    #: each client takes ``ceil(local_epochs * rows arrived / batch_size)`` steps.
    local_epochs: float | None = None
    compute_budget: int = 20
    batch_size: int = 4
    lr: float = 2e-3
    eval_every: int = 1
    eval_per_task: int | None = 20
    frac: float = 1.0
    first_round_all: bool = False
    mc_scoring: str = "generate"
    #: tokens a generated answer may have; default 8 (short answers), 64 under the generation
    #: protocol (captions)
    max_new_tokens: int | None = None
    model_mix: str | None = None
    #: one model for every client (a zoo name or Hub id) instead of a model mix: a real CLIP or
    #: LLaVA backbone on a benchmark whose default is a tiny model
    model: str | None = None
    lora_r: int | None = None
    lora_alpha: int | None = None
    pretrained: bool = True
    model_cache: str | None = None
    on_client_error: str = "stop"
    #: Which tasks Self/Others average at each evaluation point: ``started`` (each client's
    #: tasks with a sample arrived by then, as the FedMosaic code's anytime evaluation) or
    #: ``all`` (every task of the scenario, arrived or not).
    eval_tasks: str = "started"
    #: Also score the clients before any training (written to metrics.jsonl as round 0, over
    #: every task so that it compares with A_last, and kept out of results.json's curves so
    #: that A_last / A_AUC keep the paper's definition).
    eval_initial: bool = False
    #: After the last round, also score every client's final model on the benchmark's unseen
    #: tasks (``metrics.unseen_a_last`` and ``unseen`` in results.json; Self/Others only).
    eval_unseen: bool = False
    #: After the last round, fine-tune each architecture's aggregated model (and, to compare,
    #: the method's fresh adapters on the pretrained model) on each unseen task for this many
    #: iterations, scoring it every ``fast_adapt_every`` (FedMosaic's Fig. 5: 200; 0 = off)
    fast_adapt: int = 0
    fast_adapt_every: int = 25
    method_hparams: dict[str, Any] = field(default_factory=dict)
    #: the preset the budget and evaluation settings came from (:mod:`drake.presets`);
    #: recorded, the values above are what runs
    preset: str = "cpu"

    def validate(self) -> None:
        if self.mc_scoring not in ("generate", "loglik"):
            raise ValueError(f"mc_scoring must be generate or loglik, got {self.mc_scoring!r}")
        if self.eval_tasks not in ("started", "all"):
            raise ValueError(f"eval_tasks must be started or all, got {self.eval_tasks!r}")
        if self.on_client_error not in ("stop", "skip"):
            raise ValueError(f"on_client_error must be stop or skip, got {self.on_client_error!r}")
        if not 0 < self.frac <= 1:
            raise ValueError(f"frac must be in (0, 1], got {self.frac}")
        for name in ("batch_size", "eval_every", "compute_budget"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.local_epochs is not None and not self.local_epochs > 0:
            raise ValueError(f"local_epochs must be > 0, got {self.local_epochs}")
        if self.local_epochs is not None and self.local_steps is not None:
            raise ValueError(f"give local steps ({self.local_steps}) or local epochs "
                             f"({self.local_epochs}), not both")
        for name in ("rounds", "local_steps", "eval_per_task", "lora_r", "lora_alpha",
                     "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 (or left out for the default), got "
                                 f"{value}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.fast_adapt < 0 or self.fast_adapt_every < 1:
            raise ValueError(f"fast_adapt must be >= 0 and fast_adapt_every >= 1, got "
                             f"{self.fast_adapt} and {self.fast_adapt_every}")
        if self.model and self.model_mix:
            raise ValueError(f"give a model mix ({self.model_mix!r}) or one model "
                             f"({self.model!r}), not both")

    def sha256(self) -> str:
        keep = {k: v for k, v in asdict(self).items() if k not in ("out", "data", "model_cache")}
        return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()


def _flatten(prefix: str, state: Mapping[str, torch.Tensor], out: dict[str, torch.Tensor]):
    for k, v in state.items():
        out[f"{prefix}{k}"] = v.detach().contiguous().clone()


def _unflatten(prefix: str, flat: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in flat.items() if k.startswith(prefix)}


def record_to_flat(record: ClientRecord, prefix: str, flat: dict[str, torch.Tensor]
                   ) -> dict[str, Any]:
    """Put a client's record into ``flat`` as named tensors under ``prefix`` (adapters, method
    state, optimiser tensors); return the rest of its optimiser state (param groups and
    scalars, JSON-able) by adapter. The form of checkpoints and of Flower's client state."""
    for name, st in record.adapters.items():
        _flatten(f"{prefix}adapter/{name}/", st, flat)
    _flatten(f"{prefix}state/", record.state, flat)
    optim_meta: dict[str, Any] = {}
    for name, opt in record.optim.items():
        optim_meta[name] = {"param_groups": opt["param_groups"], "state": {}}
        for idx, st in opt["state"].items():
            scalars = {}
            for key, val in st.items():
                if torch.is_tensor(val):
                    flat[f"{prefix}optim/{name}/{idx}/{key}"] = val.contiguous().clone()
                else:
                    scalars[key] = val
            optim_meta[name]["state"][str(idx)] = scalars
    return optim_meta


def record_from_flat(fresh: ClientRecord, prefix: str, flat: Mapping[str, torch.Tensor],
                     optim_meta: Mapping[str, Any]) -> ClientRecord:
    """The record :func:`record_to_flat` wrote, on the adapter names of ``fresh``."""
    record = ClientRecord(adapters={name: _unflatten(f"{prefix}adapter/{name}/", flat)
                                    for name in fresh.adapters},
                          state=_unflatten(f"{prefix}state/", flat))
    for name, om in optim_meta.items():
        state = {}
        for idx, scalars in om["state"].items():
            tens = _unflatten(f"{prefix}optim/{name}/{idx}/", flat)
            state[int(idx)] = {**tens, **scalars}
        record.optim[name] = {"state": state, "param_groups": om["param_groups"]}
    return record


def make_method(name: str, lr: float, hparams: Mapping[str, Any]) -> Method:
    """The method ``name`` with its hyper-parameters; a key the method does not declare is an
    error that lists the ones it does (a typo never silently runs the default)."""
    cls = get_method(name)
    # every class's own keywords: a subclass passes **hp on to the ones it extends
    known = sorted({p.name for klass in cls.__mro__ if "__init__" in vars(klass)
                    for p in inspect.signature(klass.__init__).parameters.values()
                    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                    and p.name not in ("self", "lr")})
    unknown = sorted(set(hparams) - set(known))
    if unknown:
        raise DrakeError(f"method {name} has no hyper-parameter {', '.join(map(repr, unknown))};"
                         f" its --hp keys are: {', '.join(known) or 'none (only --lr)'}")
    return cls(lr=lr, **hparams)


def install_models(method: Method, archs: Sequence[str], *, seed: int, pretrained: bool,
                   cache: Path | None, lora_r: int | None = None, lora_alpha: int | None = None,
                   protocol: str = "self_others", classes: Sequence[str] | None = None,
                   task: str | None = None, tap_layout: Any = None
                   ) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """Load one frozen base model per architecture and install ``method``'s adapters on it.

    Returns ``(bundles, controls, proxy)``: the bundles by architecture, the adapter controls
    by architecture, and the method's adapter-free proxy (a copy of the smallest architecture,
    SIMA's) or None. ``classes`` are the class names a CLIP model scores (the plan's training
    classes) and ``task`` the task they belong to; a CLIP model under a protocol without them
    is an error; ``tap_layout`` (a :class:`~drake.models.tap.TapLayout`) names the tasks a TAP
    model is built for. The method's ``setup``
    (FedMosaic's alignment) is the caller's next step.
    """
    from drake.models import load_model
    from drake.models.zoo import get_info

    bundles: dict[str, Any] = {}
    for arch in archs:
        kind = get_info(arch, any_hub_id=True).kind
        if kind not in method.kinds:
            raise DrakeError(f"method {method.name} runs on {', '.join(method.kinds)}"
                             f" models, and {arch} is a {kind} model; choose another method "
                             f"or --model / --model-mix")
        torch.manual_seed(seed)
        bundle = load_model(arch, cache_dir=cache, pretrained=pretrained, seed=seed)
        if kind == "tap":
            if tap_layout is None:
                raise DrakeError(f"{arch} is TAP's multi-task model: it is built for a run's "
                                 f"tasks, and the {protocol} protocol names none")
            bundle.bind(tap_layout)
        for p in bundle.model.parameters():
            p.requires_grad_(False)
        if getattr(bundle, "kind", "llava") == "clip":
            if classes is None:
                raise DrakeError(f"{arch} is a CLIP model: it classifies, and the "
                                 f"{protocol} protocol needs a LLaVA model; pick "
                                 f"another --model or --model-mix")
            bundle.classes = list(classes)
            bundle.task = task
        bundles[arch] = bundle
    proxy = None
    if method.needs_proxy:
        # a separate, adapter-free copy of the smallest architecture (SIMA's proxy)
        small = min(bundles, key=lambda a: sum(p.numel() for p in bundles[a].model.parameters()))
        torch.manual_seed(seed)
        proxy = load_model(small, cache_dir=cache, pretrained=pretrained, seed=seed)
        for p in proxy.model.parameters():
            p.requires_grad_(False)
    controls = install_adapters(method, bundles, seed=seed, lora_r=lora_r,
                                lora_alpha=lora_alpha)
    return bundles, controls, proxy


def install_adapters(method: Method, bundles: Mapping[str, Any], *, seed: int,
                     lora_r: int | None = None, lora_alpha: int | None = None
                     ) -> dict[str, Any]:
    """Install ``method``'s adapters on each (frozen) bundle's model, in place.

    The method's own modules where :meth:`~baselines.base.Method.install` returns them, else
    one peft LoRA per :meth:`~baselines.base.Method.adapters` entry, on the zoo's targets and
    defaults (``lora_r`` / ``lora_alpha`` override the rank and alpha). Returns the adapter
    controls by architecture.
    """
    from drake.models import ZOO, add_lora
    from drake.models.lora import restrict_targets

    peers = dict(bundles)
    controls: dict[str, Any] = {}
    for arch, bundle in bundles.items():
        info = bundle.info if hasattr(bundle, "info") else ZOO[arch]
        defaults = dict(info.lora_defaults)
        lora = {"r": lora_r or defaults["r"], "alpha": lora_alpha or defaults["alpha"],
                "dropout": defaults.get("dropout", 0.0),
                "target_regex": defaults.get("target_regex")}
        control = method.install(bundle.model, arch=arch, lora=lora, seed=seed, peers=peers)
        if control is None:
            model = bundle.model
            for i, (name, acfg) in enumerate(method.adapters().items()):
                init = int(np.random.default_rng([seed, i]).integers(2**31))
                if hasattr(bundle, "add_adapter"):  # a kind with adapters of its own (TAP's)
                    model = bundle.add_adapter(model, name, seed=init)
                    continue
                model = add_lora(model, name, r=acfg.r or lora["r"], seed=init,
                                 alpha=acfg.alpha or lora["alpha"],
                                 dropout=acfg.dropout if acfg.dropout is not None
                                 else lora["dropout"],
                                 target_regex=restrict_targets(
                                     acfg.target_regex or lora["target_regex"], acfg.modules))
            control = bundle.adapter_control(model, list(method.adapters())) \
                if hasattr(bundle, "adapter_control") else PeftAdapters(model,
                                                                      list(method.adapters()))
        bundle.model = control.model
        controls[arch] = control
    return controls


def sample_clients(n: int, frac: float, seed: int, round_: int, *,
                   first_round_all: bool = False) -> list[int]:
    """The clients that train in round ``round_``, in id order.

    ``max(1, round(frac * n))`` of the ``n`` clients, drawn without replacement from
    ``default_rng([seed, round_])`` (so a resumed run draws the same); everyone when that is all
    of them, or in round 0 with ``first_round_all``.
    """
    k = max(1, round(frac * n))
    if k >= n or (first_round_all and round_ == 0):
        return list(range(n))
    rng = np.random.default_rng([seed, round_])
    return sorted(rng.choice(n, size=k, replace=False).tolist())


@dataclass
class RunState:
    """What the round loop carries from round to round, and checkpoints."""

    records: dict[int, ClientRecord]
    pending: dict[int, Payload]
    history: list[dict[str, Any]] = field(default_factory=list)
    comm: dict[str, list[int]] = field(default_factory=lambda: {"up": [], "down": []})
    errors: list[dict[str, Any]] = field(default_factory=list)
    initial: dict[str, Any] | None = None
    round: int = -1  # the last finished round
    post_fl: bool = False  # whether the post-FL stage has run


class Hook:
    """A step around the round loop (pfl-research's callbacks); override what you need.

    Built in, in this order: :class:`Evaluate`, :class:`Checkpoint`, :class:`MetricsLog`; a run
    takes more through ``LocalRuntime(..., hooks=[...])``, called after those.
    """

    def on_train_end(self, runtime: LocalRuntime, st: RunState, r: int) -> None:
        """After the local training of round ``r``, before aggregation."""

    def on_round_end(self, runtime: LocalRuntime, st: RunState, r: int) -> None:
        """After round ``r``'s aggregation."""

    def on_post_fl(self, runtime: LocalRuntime, st: RunState) -> None:
        """After the post-FL stage (methods that have one)."""

    def on_client_end(self, runtime: LocalRuntime, stage: str, r: int, done: int,
                      total: int) -> None:
        """After each client of a stage of round ``r``: ``done`` of ``total`` clients (and once
        with ``done=0`` as the stage starts).

        ``stage`` is ``"train"`` (local training), ``"eval"`` (scoring), ``"initial"`` (scoring
        before any training, ``r`` = 0) or ``"post_fl"``. For progress reports
        (:class:`drake.runtime.progress.RoundProgress`): it sees no state to change.
        """


class Evaluate(Hook):
    """Score every client at evaluation rounds (right after local training, as the FedMosaic
    code does, or after aggregation with each client's message delivered for a method with
    ``eval_after_aggregation``) and after the post-FL stage, which then gives the last point."""

    @staticmethod
    def _due(runtime, r: int) -> bool:
        return (r + 1) % runtime.cfg.eval_every == 0 or r == runtime.rounds - 1

    def on_train_end(self, runtime, st, r):
        if self._due(runtime, r) and not runtime.method.eval_after_aggregation:
            st.history.append(runtime._point(r + 1, r, runtime.evaluate(st.records, r)))

    def on_round_end(self, runtime, st, r):
        """What the plan scores after aggregation (the global model) joins the round's point."""
        if self._due(runtime, r) and runtime.method.eval_after_aggregation:
            st.history.append(runtime._point(
                r + 1, r, runtime.evaluate(st.records, r, pending=st.pending)))
        if st.history and st.history[-1]["round"] == r + 1:
            runtime.plan.after_aggregate(st.history[-1], r)

    def on_post_fl(self, runtime, st):
        last = runtime.rounds - 1
        point = runtime._point(runtime.rounds, last, runtime.evaluate(st.records, last))
        runtime.plan.after_aggregate(point, last)
        point["post_fl"] = True
        if st.history and st.history[-1]["round"] == runtime.rounds:
            st.history[-1] = point
        else:
            st.history.append(point)


class Checkpoint(Hook):
    """Write the run's state atomically after every round and after the post-FL stage."""

    def on_round_end(self, runtime, st, r):
        runtime._save_checkpoint(st)

    def on_post_fl(self, runtime, st):
        runtime._save_checkpoint(st)


class MetricsLog(Hook):
    """Rewrite ``metrics.jsonl`` (one line per evaluation point) whenever a point may be new."""

    def on_round_end(self, runtime, st, r):
        runtime._write_metrics(st)

    def on_post_fl(self, runtime, st):
        runtime._write_metrics(st)


class _StopAfter(Hook):
    """Testing: raise as a crash would, right after round ``k``'s checkpoint."""

    def __init__(self, k: int) -> None:
        self.k = k

    def on_round_end(self, runtime, st, r):
        if r >= self.k:
            raise DrakeError(f"run stopped after round {r} (test hook)")


class ServerModels:
    """The runtime's :class:`~baselines.base.ServerHandle`: the server's side of the shared
    models, trained on the public samples (server-side distillation)."""

    #: seed tag of the server's draws
    STREAM = 37

    def __init__(self, runtime: LocalRuntime) -> None:
        self._rt = runtime
        self.archs = sorted(runtime.bundles)

    @property
    def public(self) -> Sequence[Mapping[str, Any]]:
        return self._rt.data.public_samples()

    def task_modules(self, arch: str, tasks: Sequence[str]) -> list[str] | None:
        """The modules of ``arch``'s model that ``tasks`` run through (TAP's model: their
        encoders, stacks, experts and heads), or None where every task runs through all of it."""
        tap = getattr(self._rt.bundles[arch], "tap", None)
        return None if tap is None else tap.modules_of(tasks)

    def model(self, arch: str, adapters: Mapping[str, Mapping[str, torch.Tensor]], *,
              round: int, lr: float | None = None,
              optimizer: tuple[str, Mapping[str, Any]] | None = None) -> RuntimeClient:
        rt = self._rt
        if arch not in rt.bundles:
            raise ValueError(f"the server holds no model {arch!r}; it holds {self.archs}")
        record = rt.arch_record(arch, adapters)
        public = self.public
        torch.manual_seed(int(np.random.default_rng([rt.cfg.seed, round, self.STREAM])
                              .integers(2**31)))
        return RuntimeClient(rt.data.num_clients, arch, rt.bundles[arch], rt.controls[arch],
                             record, list(range(len(public))), rt.data, round_=round,
                             steps=0, batch_size=rt.cfg.batch_size,
                             lr=rt.cfg.lr if lr is None else lr, seed=rt.cfg.seed,
                             proxy=rt.proxy, optimizer=optimizer or rt.method.optimizer,
                             stream=self.STREAM, public=public,
                             source=lambda idx: [public[i] for i in idx])


class LocalRuntime:
    """Run a method on a scenario of a built benchmark; see the module docstring."""

    #: recorded in results.json (``software.runtime``)
    runtime_name = "local"

    def __init__(self, config: RunConfig, progress: Callable | None = None,
                 hooks: Sequence[Hook] = ()) -> None:
        config.validate()
        from drake.runtime.results import _git_hash

        _git_hash()  # the code this run imported: read now, recorded in its results
        self.cfg = config
        self.hooks = list(hooks)
        self._eval_stage = "eval"  # what the evaluation under way is, for on_client_end
        #: messages delivered before scoring a client (evaluation after aggregation)
        self._eval_pending: dict[int, Payload] = {}
        self._hooks: list[Hook] = self.hooks  # those of the current run(), built-ins included
        self.out = Path(config.out)
        self.progress = progress
        self.method = make_method(config.method, config.lr, config.method_hparams)
        self.data = FederatedData(Path(config.data), config.scenario, rounds=config.rounds,
                                  eval_per_task=config.eval_per_task)
        spec = self.data.spec
        from drake.models.zoo import DEFAULT_MODEL
        from drake.runtime.plans import PLANS, make_plan, protocol_of

        self.protocol = protocol_of(spec, self.data.scenario_entry["scenario"])
        if self.protocol not in PLANS:
            raise DrakeError(f"benchmark {spec['name']} declares protocol {self.protocol!r}, "
                             f"which `drake eval` cannot score yet; it scores "
                             f"{', '.join(PLANS)}")
        mixes = dict(spec.get("model_mixes") or {})
        if not mixes:  # one architecture for every client: the protocol's default model
            mixes = {"default": (DEFAULT_MODEL[self.protocol],)}
        mix = config.model_mix or spec.get("default_mix") or "default"
        if config.model:  # one model for every client, named as a mix of its own
            from drake.models.zoo import get_info

            info = get_info(config.model, any_hub_id=True)
            mix = "homo-" + re.sub(r"[^a-z0-9]", "", info.name.lower())
            mixes[mix] = (info.name,)
        if mix not in mixes:
            raise DrakeError(f"benchmark {spec['name']} has no model mix {mix!r}; known: "
                             f"{sorted(mixes)}")
        self.mix = mix
        #: each task's metrics, as its spec lists them (the first one scores Self/Others)
        self.task_metrics = {t["id"]: tuple(t["metrics"]) for t in spec["tasks"]}
        #: each task's text normalisation before its generation metrics ("" or "evalai")
        self.task_normalise = {t["id"]: t.get("normalise", "") for t in spec["tasks"]}
        from evaluators import MetricInputError, resolve

        for task, names in self.task_metrics.items():
            for name in names:  # an unknown metric fails here, not after hours of training
                try:
                    resolve(name)
                except MetricInputError as exc:
                    raise DrakeError(f"task {task!r} of {spec['name']}: {exc}") from exc
        # clients beyond the mix's length (e.g. a 100-client iid scenario) cycle through it
        self.models = [mixes[mix][c % len(mixes[mix])] for c in range(self.data.num_clients)]
        self.rounds = self.data.rounds
        self.steps = (config.local_steps if config.local_steps is not None
                      else max(1, round(config.compute_budget * self.method.compute_ratio)))
        self.max_new_tokens = config.max_new_tokens or (64 if self.protocol == "generation"
                                                        else 8)
        self.plan = make_plan(self, self.protocol)
        if (config.eval_unseen or config.fast_adapt) and (self.protocol != "self_others"
                                                          or not self.data.unseen_tasks):
            raise DrakeError(f"{self.data.root} holds no unseen tasks of {spec['name']} to "
                             f"score (DRAKE, HFLB and drake-synth declare them; a --tasks build "
                             f"keeps only the tasks it names): build them, or run with "
                             f"--no-eval-unseen")
        #: each client's score on each unseen task after the last round (``eval_unseen``)
        self.unseen_scores: dict[int, dict[str, float]] | None = None
        #: the fast-adaptation curves (``fast_adapt``), see :meth:`fast_adaptation`
        self.fast_adapt_curves: dict[str, Any] | None = None
        self._load_models()

    # --- set-up ------------------------------------------------------------------------------
    def _load_models(self) -> None:
        from drake.models.zoo import cache_dir as default_cache_dir

        cache = Path(self.cfg.model_cache) if self.cfg.model_cache else None
        if self.cfg.pretrained:
            self._check_pretrained(sorted(set(self.models)), cache)
        self.bundles, self.controls, self.proxy = install_models(
            self.method, sorted(set(self.models)), seed=self.cfg.seed,
            pretrained=self.cfg.pretrained, cache=cache, lora_r=self.cfg.lora_r,
            lora_alpha=self.cfg.lora_alpha, protocol=self.protocol,
            classes=getattr(self.plan, "train_classes", None),
            task=getattr(self.plan, "task", None), tap_layout=self._tap_layout())
        self.method.server = ServerModels(self)
        # methods cache reusable artefacts next to the models, never in a folder of their own
        self.method.setup(self.bundles, self.data.public_samples(), seed=self.cfg.seed,
                          cache_dir=cache if cache is not None else default_cache_dir())
        self.init_state = {arch: {n: control.state(n) for n in control.names}
                           for arch, control in self.controls.items()}

    def _tap_layout(self) -> Any:
        """The tasks a TAP model of this run holds (those some client trains on), or None when
        no client runs a TAP model."""
        from drake.models.zoo import get_info

        if all(get_info(a, any_hub_id=True).kind != "tap" for a in set(self.models)):
            return None
        from drake.models.tap_bundle import layout_for

        specs = [t for t in self.data.spec["tasks"] if t["id"] in self.data.held_tasks]
        classes = {t["id"]: max(self.data.class_names(t["id"]), default=-1) + 1
                   for t in specs if t.get("answer_type") == "classification"}
        return layout_for(specs, classes)

    @staticmethod
    def _check_pretrained(archs: Sequence[str], cache: Path | None) -> None:
        """Fail before loading anything when pretrained weights are missing, naming every model
        that lacks them and the `drake eval` flags that fix it."""
        from drake.models.errors import ModelNotPretrained
        from drake.models.loading import pretrained_missing
        from drake.models.shipped import shipped_folder
        from drake.models.zoo import cache_dir as default_cache_dir

        missing = {a: m for a in archs if (m := pretrained_missing(a, cache))}
        if not missing:
            return
        names = ", ".join(missing)
        files = ", ".join(sorted({f for m in missing.values() for f in m}))
        if cache is not None:
            shipped = all(shipped_folder(a) is not None for a in missing)
            raise ModelNotPretrained(
                f"--model-cache {cache} holds no pretrained {names} (missing {files} in "
                f"{cache}/<model>/); "
                + ("leave out --model-cache to use the weights shipped with drake, " if shipped
                   else "")
                + "point --model-cache at a folder that `drake models pretrain --cache-dir DIR` "
                "or `drake quickstart --pretrain --out OUT` wrote (DIR, or OUT/models), or pass "
                "--untrained for random weights")
        raise ModelNotPretrained(
            f"no pretrained {names} in the model cache {default_cache_dir()} and this "
            f"installation ships no weights for them; pass --model-cache DIR for a cache "
            f"`drake models pretrain --cache-dir DIR` wrote, run `drake models pretrain "
            f"--model all` (about two hours on two cores), or pass --untrained for random "
            f"weights")

    def _fresh_records(self) -> dict[int, ClientRecord]:
        return {c: self.fresh_record(c) for c in range(self.data.num_clients)}

    def fresh_record(self, c: int) -> ClientRecord:
        """Client ``c``'s record before any training: its architecture's fresh adapters."""
        return self.arch_record(self.models[c])

    def arch_record(self, arch: str,
                    states: Mapping[str, Mapping[str, torch.Tensor]] | None = None
                    ) -> ClientRecord:
        """A record of ``arch``'s fresh adapters with copies of ``states`` (``{adapter:
        state}``) in place of those it names."""
        adapters = {**self.init_state[arch], **(states or {})}
        return ClientRecord(adapters={n: {k: v.detach().clone() for k, v in s.items()}
                                      for n, s in adapters.items()})

    def client_steps(self, c: int, round_: int) -> int:
        """Client ``c``'s local steps in ``round_``: the run's (budget or ``local_steps``), or
        ``local_epochs`` passes over the rows it has by then."""
        if self.cfg.local_epochs is None:
            return self.steps
        seen = len(self.data.streams[c].seen(round_))
        return max(1, math.ceil(self.cfg.local_epochs * seen / self.cfg.batch_size))

    def _handle(self, c: int, record: ClientRecord, round_: int,
                stream: int = TRAIN_STREAM) -> RuntimeClient:
        arch = self.models[c]
        return RuntimeClient(c, arch, self.bundles[arch], self.controls[arch], record,
                             self.data.streams[c].seen(round_), self.data, round_=round_,
                             steps=self.client_steps(c, round_), batch_size=self.cfg.batch_size, lr=self.cfg.lr,
                             seed=self.cfg.seed, proxy=self.proxy,
                             optimizer=self.method.optimizer,
                             fresh_optimizer=self.method.fresh_optimizer, stream=stream,
                             public=self.data.public_samples())

    # --- evaluation ----------------------------------------------------------------------------
    def _answer(self, handle: RuntimeClient, loglik: bool = False):
        from evaluators import match_choice

        bundle, control = handle.bundle, handle.control
        loglik = loglik or self.cfg.mc_scoring == "loglik"

        def answer(samples: Sequence[Mapping[str, Any]], adapters: Mapping[str, float]):
            control.activate(list(adapters), list(adapters.values()))
            bundle.model.eval()
            scored = [i for i, s in enumerate(samples) if s["choices"]] if loglik else []
            written = sorted(set(range(len(samples))) - set(scored))
            out: list[Any] = [None] * len(samples)
            with torch.no_grad():
                if scored:  # options by likelihood; open questions (and "generate") generated
                    lls = bundle.choice_logliks([samples[i] for i in scored])
                    for i, ll in zip(scored, lls):
                        out[i] = int(np.argmax(ll))
                if written:
                    texts = bundle.generate([samples[i] for i in written],
                                            max_new_tokens=self.max_new_tokens)
                    for i, text in zip(written, texts):
                        out[i] = match_choice(text, samples[i]["choices"]) \
                            if samples[i]["choices"] else text
            return out

        return answer

    def _score(self, task: str, samples, predictions) -> float:
        """The task's score by the first (primary) metric its spec lists, through the metric
        registry (accuracy for multiple choice, token F1 for drake-synth's open tasks, ...)."""
        from evaluators import score_task

        return score_task(self.task_metrics[task][0], predictions, samples)

    def _client_done(self, stage: str, r: int, done: int, total: int) -> None:
        for hook in self._hooks:
            hook.on_client_end(self, stage, r, done, total)

    def evaluate(self, records: Mapping[int, ClientRecord], round_: int, *,
                 stage: str = "eval", pending: Mapping[int, Payload] | None = None
                 ) -> dict[int, dict[str, float]]:
        """Score every client as the run's protocol says (:mod:`drake.runtime.plans`); hooks
        hear of each client scored (``on_client_end`` with ``stage``). With ``pending``, each
        client is scored with its message received first (its record stays as it is)."""
        self._eval_stage = stage
        self._eval_pending = dict(pending or {})
        self._client_done(stage, round_, 0, self.data.num_clients)
        try:
            return self.plan.evaluate(records, round_)
        finally:
            self._eval_pending = {}

    def client_scored(self, round_: int, c: int) -> None:
        """A plan has scored client ``c`` at the evaluation point of ``round_``."""
        self._client_done(self._eval_stage, round_, c + 1, self.data.num_clients)

    def predict(self, c: int, record: ClientRecord, round_: int,
                samples: Sequence[Mapping[str, Any]], *, loglik: bool = False,
                batch: int = 32) -> list[Any]:
        """Client ``c``'s answers to ``samples`` with the adapters it holds, through the
        method's ``predict`` (option indices where scored by likelihood, else text)."""
        return self.client_predict(c, record, round_, samples, loglik=loglik, batch=batch,
                                   message=self._eval_pending.get(c))

    def predict_global(self, arch: str, model: Mapping[str, tuple[Mapping[str, torch.Tensor],
                                                                   float]],
                       round_: int, samples: Sequence[Mapping[str, Any]], *,
                       batch: int = 32) -> list[Any]:
        """The answers of a global model of architecture ``arch`` (``{adapter: (state,
        weight)}``, :meth:`Method.global_model`): fresh adapters with the given states loaded,
        only those active, at their weights."""
        record = self.arch_record(arch, {name: state for name, (state, _) in model.items()})
        server = self.data.num_clients  # an id no client has
        handle = RuntimeClient(server, arch, self.bundles[arch], self.controls[arch], record, [],
                               self.data, round_=round_, steps=0,
                               batch_size=self.cfg.batch_size, lr=self.cfg.lr,
                               seed=self.cfg.seed, proxy=self.proxy)
        torch.manual_seed(int(np.random.default_rng([self.cfg.seed, round_, 31])
                              .integers(2**31)))
        answer = self._answer(handle)
        weights = {name: weight for name, (_, weight) in model.items()}
        preds: list[Any] = []
        for i in range(0, len(samples), batch):
            preds.extend(answer(samples[i:i + batch], weights))
        return preds

    def evaluate_tasks(self, records: Mapping[int, ClientRecord], round_: int
                       ) -> dict[int, dict[str, float]]:
        """Score every client on every client task; batches mix tasks to amortise calls."""
        public = set(self.data.spec.get("public_tasks", []))
        unseen = set(self.data.spec.get("unseen_tasks", []))
        tasks = [t for t in self.data.test_ids if t not in public and t not in unseen]
        samples = [s for t in tasks for s in self.data.samples(self.data.test_ids[t])]
        owner = [t for t in tasks for _ in self.data.test_ids[t]]
        scores: dict[int, dict[str, float]] = {}
        for c in range(self.data.num_clients):
            preds = self.predict(c, records[c], round_, samples)
            scores[c] = {}
            for task in tasks:
                idx = [i for i, t in enumerate(owner) if t == task]
                scores[c][task] = self._score(task, [samples[i] for i in idx],
                                              [preds[i] for i in idx])
            self.client_scored(round_, c)
        return scores

    def _point(self, label: int, round_: int, scores: Mapping[int, Mapping[str, float]], *,
               every_task: bool = False) -> dict[str, Any]:
        """The metrics.jsonl line of the evaluation after training round ``round_``
        (``every_task``: average over all tasks whatever ``eval_tasks`` says)."""
        return self.plan.point(label, round_, scores, every_task=every_task)

    # --- checkpoints ---------------------------------------------------------------------------
    def _save_checkpoint(self, run: RunState) -> None:
        records, pending = run.records, run.pending
        flat: dict[str, torch.Tensor] = {}
        optim_meta: dict[str, Any] = {}
        for c, rec in records.items():
            for name, meta in record_to_flat(rec, f"client/{c}/", flat).items():
                optim_meta[f"{c}/{name}"] = meta
        pending_meta = {}
        for c, msg in pending.items():
            for name, st in msg.tensors.items():
                _flatten(f"pending/{c}/{name}/", st, flat)
            pending_meta[str(c)] = {"meta": msg.meta, "adapters": list(msg.tensors)}
        _flatten("server/", self.method.server_state(), flat)
        tmp = self.out / "checkpoint.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        save_file(flat, str(tmp / "state.safetensors"))
        (tmp / "state.json").write_text(json.dumps(
            {"round": run.round, "optim": optim_meta, "pending": pending_meta,
             "history": run.history, "comm": run.comm, "errors": run.errors,
             "initial": run.initial, "post_fl": run.post_fl}, sort_keys=True))
        (tmp / "sha256.json").write_text(json.dumps(
            {n: sha256_file(tmp / n) for n in CHECKPOINT_FILES}, sort_keys=True))
        # at every instant one complete checkpoint exists: checkpoint/, or checkpoint.old/
        # between the two renames (the loader falls back to it)
        final = self.out / "checkpoint"
        old = self.out / "checkpoint.old"
        if final.exists():
            if old.exists():
                shutil.rmtree(old)
            os.replace(final, old)
        os.replace(tmp, final)
        if old.exists():
            shutil.rmtree(old)

    def _load_checkpoint(self) -> RunState | None:
        """The run state of the last complete checkpoint, checked against its sha256 list."""
        final = self.out / "checkpoint"
        if not final.exists() and (self.out / "checkpoint.old").exists():
            final = self.out / "checkpoint.old"  # a save was cut between its two renames
        if not final.exists():
            return None
        try:
            sums = json.loads((final / "sha256.json").read_text())
            for name in CHECKPOINT_FILES:
                if sha256_file(final / name) != sums[name]:
                    raise DrakeError(f"{final / name} does not match its sha256 in "
                                     f"{final / 'sha256.json'}")
            meta = json.loads((final / "state.json").read_text())
            flat = load_file(str(final / "state.safetensors"))
            return self._restore(meta, flat)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, DrakeError,
                SafetensorError) as exc:
            raise DrakeError(f"the checkpoint in {final} is damaged or was changed ({exc!r}); "
                             f"delete {self.out} to start the run again") from exc

    def _restore(self, meta: dict[str, Any], flat: dict[str, torch.Tensor]) -> RunState:
        """The run state a checkpoint's ``state.json`` and tensors describe."""
        records = self._fresh_records()
        for c in records:
            optim = {key.split("/", 1)[1]: om for key, om in meta["optim"].items()
                     if int(key.split("/", 1)[0]) == c}
            records[c] = record_from_flat(records[c], f"client/{c}/", flat, optim)
        pending = {}
        for cs, pm in meta["pending"].items():
            pending[int(cs)] = Payload(
                {name: _unflatten(f"pending/{cs}/{name}/", flat) for name in pm["adapters"]},
                pm["meta"])
        self.method.load_server_state(_unflatten("server/", flat))
        return RunState(records, pending, history=meta["history"], comm=meta["comm"],
                        errors=meta["errors"], initial=meta.get("initial"), round=meta["round"],
                        post_fl=meta.get("post_fl", False))

    # --- the loop ------------------------------------------------------------------------------
    def run(self, _stop_after: int | None = None) -> dict[str, Any]:
        """Run (or resume) to the last round; write results.json and return it.

        ``_stop_after`` is a testing hook: raise as a crash would, right after the checkpoint of
        that (0-based) round.
        """
        with exclusive(self.out, "run into", advice="wait for that run to finish, or choose "
                       "another --out"):
            return self._run(_stop_after)

    def _run(self, _stop_after: int | None) -> dict[str, Any]:
        self.out.mkdir(parents=True, exist_ok=True)
        config_path = self.out / "config.json"
        cfg_json = json.dumps(asdict(self.cfg), indent=2, sort_keys=True)
        if config_path.exists():
            try:
                held = json.loads(config_path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise DrakeError(f"{config_path} is not valid JSON; delete {self.out} to start "
                                 f"the run again, or choose another --out") from None
            if held != asdict(self.cfg):
                raise DrakeError(f"{self.out} holds a run with another config; choose a new "
                                 f"--out or delete it")
        config_path.write_text(cfg_json + "\n")
        hooks = [Evaluate(), Checkpoint(), MetricsLog(), *self.hooks]
        if _stop_after is not None:
            hooks.append(_StopAfter(_stop_after))
        self._hooks = hooks
        st = self._load_checkpoint()
        if st is not None:
            log.info("resuming %s from round %d", self.out, st.round + 1)
        else:
            st = RunState(self._fresh_records(), {})
            if self.cfg.eval_initial:
                # the untrained reference averages every task, as A_last does at the end of a
                # stream, so that the two compare (round 0 alone has only first tasks started)
                st.initial = self._point(0, 0, self.evaluate(st.records, 0, stage="initial"),
                                         every_task=True)
                st.initial["initial"] = True
        t0 = time.perf_counter()
        rounds_iter = range(st.round + 1, self.rounds)
        if self.progress:
            rounds_iter = self.progress(rounds_iter, self.rounds - st.round - 1)
        for r in rounds_iter:
            uploads = self.train_round(r, st.records, st.pending, st.errors)
            for hook in hooks:
                hook.on_train_end(self, st, r)
            infos = {c: ClientInfo(c, self.models[c], len(self.data.streams[c].seen(r)),
                                   tuple(self.data.client_tasks[c]))
                     for c in range(self.data.num_clients)}
            messages = self.method.aggregate(uploads, infos, r) if uploads else {}
            st.pending.update(messages)
            st.comm["up"].append(sum(u.nbytes() for u in uploads.values()))
            st.comm["down"].append(sum(m.nbytes() for m in messages.values()))
            st.round = r
            for hook in hooks:
                hook.on_round_end(self, st, r)
        if self.has_post_fl and not st.post_fl:
            self.post_fl(st)
            for hook in hooks:
                hook.on_post_fl(self, st)
        if self.cfg.eval_unseen:  # no training after it: a resumed run recomputes it exactly
            self.unseen_scores = self.evaluate_unseen(st.records)
        if self.cfg.fast_adapt:  # likewise
            self.fast_adapt_curves = self.fast_adaptation(st.records)
        return self._write_results(st, time.perf_counter() - t0)

    def evaluate_unseen(self, records: Mapping[int, ClientRecord]) -> dict[int, dict[str, float]]:
        """Every client's final model on every unseen task's test rows (the first
        ``eval_per_task``), scored by the task's primary metric."""
        tasks = self.data.unseen_tasks
        per_task = {t: list(self.data.unseen_samples(t)) for t in tasks}
        samples = [s for t in tasks for s in per_task[t]]
        last = self.rounds - 1
        self._eval_stage = "unseen"
        self._client_done("unseen", last, 0, self.data.num_clients)
        scores: dict[int, dict[str, float]] = {}
        for c in range(self.data.num_clients):
            preds = self.predict(c, records[c], last, samples)
            scores[c], start = {}, 0
            for t in tasks:
                n = len(per_task[t])
                scores[c][t] = self._score(t, per_task[t], preds[start:start + n])
                start += n
            self.client_scored(last, c)
        return scores

    #: seed tag of fast adaptation's draws
    FAST_STREAM = 41

    def aggregated_model(self, arch: str, records: Mapping[int, ClientRecord]
                         ) -> dict[str, dict[str, torch.Tensor]]:
        """Architecture ``arch``'s aggregated local model: each of the method's inference
        adapters averaged over the group's clients' final records, weighted by the samples
        each has seen."""
        from baselines.base import weighted_average

        last = self.rounds - 1
        group = [c for c in range(self.data.num_clients) if self.models[c] == arch]
        weights = [max(len(self.data.streams[c].seen(last)), 1) for c in group]
        return {name: weighted_average([records[c].adapters[name] for c in group], weights)
                for name in self.method.eval_adapters()}

    def fast_adaptation(self, records: Mapping[int, ClientRecord]) -> dict[str, Any]:
        """FedMosaic's fast adaptation (Fig. 5, A.17): per architecture and unseen task, two
        starts fine-tuned for ``fast_adapt`` iterations on the task's training rows (CE on the
        method's inference adapters, at their weights, with the method's optimiser and the
        run's rate and batch size), scored on its test rows at iteration 0 and every
        ``fast_adapt_every``: ``aggregated`` (:meth:`aggregated_model`) and ``pretrained``
        (the method's fresh adapters: the pretrained model with randomly initialised
        adapters)."""
        iters, every = self.cfg.fast_adapt, self.cfg.fast_adapt_every
        steps = sorted({0, *range(every, iters + 1, every), iters})
        eval_ = self.method.eval_adapters()
        names, weights = list(eval_), list(eval_.values())
        curves: dict[str, dict[str, dict[str, list[float]]]] = {}
        self._eval_stage = "fast_adapt"
        archs = sorted(set(self.models))
        jobs = [(a, t) for a in archs for t in self.data.unseen_tasks]
        aggregated = {a: self.aggregated_model(a, records) for a in archs}
        self._client_done("fast_adapt", self.rounds - 1, 0, len(jobs))
        for done, (arch, task) in enumerate(jobs, 1):
            train = self.data.unseen_train_samples(task)
            test = list(self.data.unseen_samples(task))
            starts = {"aggregated": aggregated[arch], "pretrained": {}}
            for start, states in starts.items():
                record = self.arch_record(arch, states)
                torch.manual_seed(int(np.random.default_rng(
                    [self.cfg.seed, archs.index(arch), self.data.unseen_tasks.index(task),
                     self.FAST_STREAM]).integers(2**31)))
                handle = RuntimeClient(self.data.num_clients, arch, self.bundles[arch],
                                       self.controls[arch], record, list(range(len(train))),
                                       self.data, round_=self.rounds, steps=iters,
                                       batch_size=self.cfg.batch_size, lr=self.cfg.lr,
                                       seed=self.cfg.seed, proxy=self.proxy,
                                       optimizer=self.method.optimizer,
                                       stream=self.FAST_STREAM,
                                       source=lambda idx, rows=train: [rows[i] for i in idx])
                answer = self._answer(handle)
                curve = []
                for it in range(iters + 1):
                    if it in steps:
                        preds = [p for i in range(0, len(test), 32)
                                 for p in answer(test[i:i + 32], eval_)]
                        curve.append(self._score(task, test, preds))
                    if it < iters:
                        loss = handle.loss(handle.next_batch(), names, weights)
                        handle.step(names, loss)
                curves.setdefault(arch, {}).setdefault(start, {})[task] = curve
            self._client_done("fast_adapt", self.rounds - 1, done, len(jobs))
        mean = {start: [fmean(curves[a][start][t][i] for a in archs
                              for t in self.data.unseen_tasks) for i in range(len(steps))]
                for start in ("aggregated", "pretrained")}
        return {"iterations": iters, "every": every, "steps": steps, "curves": curves,
                "mean": mean}

    @property
    def has_post_fl(self) -> bool:
        """Whether the method has a post-FL stage (TAP's distillation)."""
        return type(self.method).post_fl is not Method.post_fl

    def post_fl(self, st: RunState) -> None:
        """Every client's post-FL stage after the last round (its pending message delivered
        first), saved to its record."""
        last = self.rounds - 1
        self._client_done("post_fl", last, 0, self.data.num_clients)
        for c in range(self.data.num_clients):
            try:
                st.records[c] = self.client_post_fl(c, st.records[c], st.pending.pop(c, None))
            except Exception as exc:  # reported, then stop or skip as configured
                self._client_failed(st.errors, last, c, exc, stage="post_fl")
            self._client_done("post_fl", last, c + 1, self.data.num_clients)
        st.post_fl = True

    def train_round(self, r: int, records: dict[int, ClientRecord],
                    pending: dict[int, Payload], errors: list[dict[str, Any]]
                    ) -> dict[int, Payload]:
        """Local training of round ``r`` for the sampled clients; returns their uploads."""
        sampled = sample_clients(self.data.num_clients, self.cfg.frac, self.cfg.seed, r,
                                 first_round_all=self.cfg.first_round_all)
        uploads: dict[int, Payload] = {}
        self._client_done("train", r, 0, len(sampled))
        for done, c in enumerate(sampled, 1):
            upload = self._train_client(c, r, records, pending, errors)
            if upload is not None:
                uploads[c] = upload
            self._client_done("train", r, done, len(sampled))
        return uploads

    def _train_client(self, c: int, r: int, records: dict[int, ClientRecord],
                      pending: dict[int, Payload], errors: list[dict[str, Any]]
                      ) -> Payload | None:
        """Client ``c``'s local training in round ``r``: its upload, or None (no data yet, or
        a failure skipped by ``on_client_error="skip"``)."""
        if not self.data.streams[c].seen(r):
            return None
        try:
            records[c], upload = self.client_train(c, r, records[c], pending.pop(c, None))
        except Exception as exc:  # reported, then stop or skip as configured
            self._client_failed(errors, r, c, exc)
            return None
        return upload

    def _client_failed(self, errors: list[dict[str, Any]], r: int, c: int, exc: BaseException,
                       stage: str = "train", detail: str = "") -> None:
        """Record client ``c``'s failure, then stop the run or skip the client as configured
        (``detail``: the client's traceback where it ran elsewhere)."""
        entry = {"round": r, "client": c, "error": repr(exc)}
        if stage != "train":
            entry["stage"] = stage
        if detail:
            entry["traceback"] = detail
        errors.append(entry)
        where = f"in round {r}" if stage == "train" else "in the post-FL stage"
        log.error("client %d failed %s: %r%s", c, where, exc, f"\n{detail}" if detail else "")
        if self.cfg.on_client_error == "stop":
            raise ClientFailed(f"client {c} raised {exc!r} {where}; rerun with "
                               f"--on-client-error skip to continue without it"
                               + (f"\nthe client's traceback:\n{detail}" if detail else "")
                               ) from exc

    # --- one client's turn: what runs where the client lives (here, or a Flower ClientApp) --
    def client_train(self, c: int, r: int, record: ClientRecord, message: Payload | None
                     ) -> tuple[ClientRecord, Payload]:
        """Client ``c``'s turn in round ``r``: deliver its pending ``message``, train, and
        return its new record and its upload (raises what the method raises)."""
        handle = self._handle(c, record, r)
        torch.manual_seed(int(np.random.default_rng([self.cfg.seed, r, c]).integers(2**31)))
        if message is not None:
            self.method.receive(handle, message)
        upload = self.method.local_train(handle)
        return handle.save(), upload

    def client_predict(self, c: int, record: ClientRecord, round_: int,
                       samples: Sequence[Mapping[str, Any]], *, loglik: bool = False,
                       batch: int = 32, message: Payload | None = None) -> list[Any]:
        """Client ``c``'s answers with the adapters of ``record`` (``message`` delivered
        first to a copy, for scoring after aggregation; the record is never changed)."""
        handle = self._handle(c, record, round_, stream=EVAL_STREAM)
        if message is not None:  # scored after aggregation: the handle is never saved
            self.method.receive(handle, message)
        torch.manual_seed(int(np.random.default_rng([self.cfg.seed, round_, c, 23])
                              .integers(2**31)))
        self.method.before_eval(handle)
        answer = self._answer(handle, loglik=loglik)
        preds: list[Any] = []
        for i in range(0, len(samples), batch):
            preds.extend(self.method.predict(handle, samples[i:i + batch], answer))
        self.method.after_eval(handle)
        return preds

    def client_post_fl(self, c: int, record: ClientRecord, message: Payload | None
                       ) -> ClientRecord:
        """Client ``c``'s post-FL stage after the last round, its pending ``message``
        delivered first; returns its new record."""
        last = self.rounds - 1
        handle = self._handle(c, record, last)
        torch.manual_seed(int(np.random.default_rng([self.cfg.seed, last, c, 29])
                              .integers(2**31)))
        if message is not None:
            self.method.receive(handle, message)
        self.method.post_fl(handle)
        return handle.save()

    def _write_metrics(self, st: RunState) -> None:
        points = ([st.initial] if st.initial else []) + st.history
        tmp = self.out / "metrics.jsonl.tmp"
        tmp.write_text("".join(json.dumps(h, sort_keys=True) + "\n" for h in points))
        os.replace(tmp, self.out / "metrics.jsonl")

    def _write_results(self, st: RunState, wall: float) -> dict[str, Any]:
        """Write one results file per view of the plan (``results.json`` first, then
        ``results-<view>.json``) and return the first."""
        from drake.runtime.results import build_results, results_file

        views = self.plan.views(st.history)
        written = []
        for view in views:
            results = build_results(self, view, st.comm, st.errors, wall)
            path = self.out / results_file(view, views)
            path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
            written.append(results)
        return written[0]
