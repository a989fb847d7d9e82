"""TAP (Two-stage Adaptive Personalization, TAP §3.2-3.3, Alg. 1), and its baselines TAP's
FedAvg, Per-FedAvg and DisentAFL, on TAP's multi-task, multi-modal model (the ``tap`` model kind,
:mod:`drake.models.tap`).

Every client holds two copies of its part of the model: the FL copy ``W`` (adapter ``local``)
and the personal model ``X`` (adapter ``personal``). In a round a selected client

1. trains ``W`` for ``steps`` iterations and records, per task ``o`` it saw, the mean training
   loss ``h_l[o]``;
2. uploads the part of ``W`` its tasks reach (the server averages each component over the
   round's clients that hold it, weighted by their sample counts: TAP's per-component FedAvg);
3. replaces, for every task with ``h_l[o] + m_o < h_p[o]`` (Eq. 3), the part of ``X`` that task
   runs through by ``W``'s (Eq. 4; :meth:`drake.models.tap.TapModel.task_modules`);
4. trains ``X`` for ``steps`` iterations and records ``h_p[o]``.

After the last round (``post_fl``), every client fine-tunes ``W`` for ``post_steps`` iterations,
then trains ``X`` for ``post_steps`` iterations on ``sum_o lambda_o l_o + sum_o beta_o KD_o``
with ``W`` as the teacher (Eq. 5-6). ``X`` is what is evaluated.

Settings (TAP Tab. 21-22 and its released code): margins 0.01, and 0.005 for reconstruction and
text classification (FLAVA; ViLT 0.02 / 0.01); KD at temperature 1, weight 2e-3, and 1.0 for
text classification; a fresh AdamW each local session. Departures, where the release departs
from the paper: the history is each task's own mean loss (the release keeps a task-share
weighted sum, which the paper's "average local training loss ... for each task" does not
describe); the replaced part of a classification task includes its experts (the release skips
them, a name mismatch); the aggregated backbone reaches the clients (the release drops it, a
key-prefix mismatch). The paper defines KD on logits only; a reconstruction has none, so its KD
term is the MSE to the teacher's image (the release's softmax over the image width has no
meaning).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from baselines.base import AdapterConfig, ClientInfo, Method, Payload, State, register
from baselines.distill import kd_loss
from baselines.feddat import FedDAT
from baselines.perfedavg import PerFedAvg

__all__ = ["DisentAFL", "Tap", "TapFedAvg", "TapFedDAT", "TapPerFedAvg", "component_mean",
           "disentanglement", "kd_term", "replaced", "task_keys"]

#: task kinds that take the smaller margin (TAP Tab. 22)
SMALL_MARGIN_KINDS = ("image_generation", "text_classification")


def task_keys(keys: Sequence[str], modules: Sequence[str]) -> list[str]:
    """The state keys under any of ``modules`` (module names, matched on whole name parts)."""
    return [k for k in keys if any(k == m or k.startswith(m + ".") for m in modules)]


def replaced(personal: State, fl: State, flags: Mapping[str, bool],
             modules: Mapping[str, Sequence[str]]) -> State:
    """TAP's Eq. 4: ``X_[i,o] <- W_[i,o]`` for every task ``o`` whose flag is set, where
    ``X_[i,o]`` is the part of the model under ``modules[o]``; every other key stays ``X``'s."""
    out = dict(personal)
    for task, flag in flags.items():
        if flag:
            for key in task_keys(list(personal), modules[task]):
                out[key] = fl[key].clone()
    return out


def replacement_flags(fl_history: Mapping[str, float], personal_history: Mapping[str, float],
                      margins: Mapping[str, float]) -> dict[str, bool]:
    """TAP's Eq. 3: ``R[o] = 1`` iff ``h_l[o] + m_o < h_p[o]``, for the tasks with both
    histories (a task without either is never replaced)."""
    return {t: fl_history[t] + margins[t] < personal_history[t]
            for t in fl_history if t in personal_history}


def component_mean(states: Sequence[State], weights: Sequence[float]) -> State:
    """Each key's weighted mean over the states that hold it (TAP's per-component FedAvg:
    a component is averaged over the round's clients that hold it)."""
    out: State = {}
    keys = sorted({k for s in states for k in s})
    for key in keys:
        held = [(s[key], w) for s, w in zip(states, weights, strict=True) if key in s]
        total = sum(w for _, w in held)
        out[key] = sum(v.float() * (w / total) for v, w in held).to(held[0][0].dtype)
    return out


def disentanglement(latents: Mapping[tuple[str, str], torch.Tensor]) -> torch.Tensor:
    """DisentAFL's orthogonality term: the representations of each (modality, task kind) pair
    (rows of ``latents[pair]``) L2-normalised; for every two different pairs, the mean squared
    cosine over all their row pairs; the mean over the pairs of pairs. Zero with fewer than two
    pairs (a client of one modality and one task has nothing to disentangle)."""
    keys = sorted(latents)
    if len(keys) < 2:
        return torch.zeros(())
    unit = {k: F.normalize(latents[k], dim=-1) for k in keys}
    terms = [(unit[a] @ unit[b].T).pow(2).mean() for i, a in enumerate(keys)
             for b in keys[i + 1:]]
    return torch.stack(terms).mean()


def kd_term(kind: str, student: torch.Tensor, teacher: torch.Tensor,
            labels: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """TAP's Eq. 5 for one task's outputs: ``T^2 KL(softmax(z_t/T) || softmax(z_s/T))``, the
    mean over rows (classification) or over the answer's tokens (text generation, ``labels``
    -100 elsewhere); a reconstruction's is the MSE to the teacher's image."""
    teacher = teacher.detach()
    if kind == "image_generation":
        return F.mse_loss(student, teacher)
    if kind == "text_generation":
        keep = labels.flatten() != -100
        return kd_loss(student.flatten(0, 1)[keep], teacher.flatten(0, 1)[keep], temperature)
    return kd_loss(student, teacher, temperature)


class _TapCommon(Method):
    """What TAP and its FedAvg share: the FL copy ``local``, its per-task training, its upload
    of the client's part, and the server's per-component mean."""

    kinds = ("tap",)
    fresh_optimizer = True  # the release builds a new AdamW at every local session
    #: the adapter whose part each client uploads and the server averages per component
    shared = "local"

    def adapters(self) -> dict[str, AdapterConfig]:
        return {"local": AdapterConfig()}

    def _modules(self, client) -> dict[str, list[str]]:
        return {t: client.bundle.tap.task_modules(t) for t in client.tasks}

    def _owned(self, client, state: State) -> State:
        return {k: state[k] for k in task_keys(list(state),
                                               client.bundle.tap.modules_of(client.tasks))}

    #: weight of DisentAFL's orthogonality term in local training (0: none)
    disent_weight = 0.0

    def _train(self, client, adapter: str, steps: int, kd=None) -> dict[str, float]:
        """``steps`` iterations of TAP's task-share weighted loss (plus ``kd(batch)``, plus
        DisentAFL's term where it has a weight); returns each task's mean training loss over
        the iterations that held it."""
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for _ in range(steps):
            batch = client.next_batch()
            loss = client.loss(batch, [adapter])
            for task, value in client.bundle.last_losses.items():
                sums[task] = sums.get(task, 0.0) + value
                counts[task] = counts.get(task, 0) + 1
            if self.disent_weight:
                loss = loss + self.disent_weight * disentanglement(client.bundle.last_latents)
            if kd is not None:
                loss = loss + kd(batch)
            client.step(adapter, loss)
        return {t: sums[t] / counts[t] for t in sums}

    def global_model(self, arch: str) -> None:
        """None: the server's ``W`` is a set of components, each client's model a different
        part of it; TAP scores the clients' models (each on its own tasks)."""
        return None

    def receive(self, client, message: Payload) -> None:
        """The server sends the client's part of ``W``: it replaces those keys only."""
        for adapter, part in message.tensors.items():
            client.set(adapter, {**client.get(adapter), **part})

    def aggregate(self, uploads: Mapping[int, Payload], clients: Mapping[int, ClientInfo],
                  round: int) -> dict[int, Payload]:
        """Per architecture, each uploaded component's sample-weighted mean over the clients
        that uploaded it, kept as the server's ``W`` (components nobody uploaded keep their last
        mean); every client with a part of it gets that part."""
        by_arch: dict[str, list[int]] = {}
        for cid in sorted(uploads):
            by_arch.setdefault(clients[cid].arch, []).append(cid)
        for arch, ids in by_arch.items():
            mean = component_mean([uploads[i].tensors[self.shared] for i in ids],
                                  [max(clients[i].num_samples, 1) for i in ids])
            self._group_means[(self.shared, arch)] = {
                **self._group_means.get((self.shared, arch), {}), **mean}
        out = {}
        for cid, info in clients.items():
            held = self._group_means.get((self.shared, info.arch))
            if not held:
                continue
            modules = self.server.task_modules(info.arch, info.tasks)
            part = dict(held) if modules is None else {
                k: held[k] for k in task_keys(list(held), modules)}
            if part:
                out[cid] = Payload({self.shared: part})
        return out


@register
class TapFedAvg(_TapCommon):
    """TAP's FedAvg baseline: each client trains its part of the model, the server averages
    each component over the round's clients that hold it. ``post_steps`` > 0 is "FedAvg +
    Post-train": the final ``W`` fine-tuned on each client's data."""

    name = "tap-fedavg"
    #: TAP reports FedAvg's final global model of each client: scored with its message in
    eval_after_aggregation = True

    def __init__(self, lr: float = 3e-4, post_steps: int = 0, **hp) -> None:
        super().__init__(lr=lr, post_steps=post_steps, **hp)
        self.post_steps = int(post_steps)

    def local_train(self, client) -> Payload:
        history = self._train(client, "local", client.steps)
        return Payload({"local": self._owned(client, client.get("local"))},
                       {"loss": sum(history.values()) / max(len(history), 1)})

    def post_fl(self, client) -> None:
        self._train(client, "local", self.post_steps)  # nothing where post_steps is 0


@register
class DisentAFL(TapFedAvg):
    """DisentAFL (Chen & Zhang 2024) as TAP runs it: TAP's FedAvg with an auxiliary loss that
    makes the private representations of different (modality, task) pairs orthogonal
    (:func:`disentanglement`, weight 0.5; the release's latent is the private path's MoTE
    output, mean-pooled). ``post_steps`` > 0 is "DisentAFL + Post-train", with the same term."""

    name = "disentafl"

    def __init__(self, lr: float = 3e-4, post_steps: int = 0, disent_weight: float = 0.5,
                 **hp) -> None:
        super().__init__(lr=lr, post_steps=post_steps, disent_weight=disent_weight, **hp)
        self.disent_weight = float(disent_weight)


@register
class TapPerFedAvg(_TapCommon, PerFedAvg):
    """Per-FedAvg (first order, :class:`~baselines.perfedavg.PerFedAvg`) on TAP's model: each
    client's meta-step on its part of the model, the per-component mean at the server, one
    personalising step before evaluation. ``post_steps`` > 0 is "Per-FedAvg + Post-train"."""

    name = "tap-per-fedavg"

    def __init__(self, lr: float = 3e-4, alpha: float = 3e-4, post_steps: int = 0,
                 **hp) -> None:
        PerFedAvg.__init__(self, lr=lr, alpha=alpha, post_steps=post_steps, **hp)
        self.post_steps = int(post_steps)

    def local_train(self, client) -> Payload:
        payload = PerFedAvg.local_train(self, client)
        return Payload({"local": self._owned(client, payload.tensors["local"])}, payload.meta)

    def post_fl(self, client) -> None:
        self._train(client, "local", self.post_steps)  # nothing where post_steps is 0


@register
class TapFedDAT(_TapCommon, FedDAT):
    """FedDAT (:class:`~baselines.feddat.FedDAT`, the same steps) on TAP's model: the shared
    adapter's part is uploaded and averaged per component; the task loss of a forward is TAP's
    task-share weighted sum of its tasks' losses, and the distillation between the shared
    adapter and the Dual-Adapter Teacher is TAP's per-task term (:func:`kd_term`: KL on logits,
    the MSE between two reconstructions), weighted alike. Each adapter holds its own copy of
    the fully trained modules; the DAT runs both copies and averages their outputs, as it
    averages the two adapters' LoRA deltas (:class:`drake.runtime.client.TapAdapters`).
    ``post_steps`` > 0 is "FedDAT + Post-train": after the last round each client runs that
    many more of FedDAT's local iterations on its data."""

    name = "tap-feddat"
    shared = "shared"
    #: TAP gives every method the same local iterations (FedMosaic's 0.43 is its own budget)
    compute_ratio = 1.0

    def __init__(self, lr: float = 3e-4, temperature: float = 3.0, post_steps: int = 0,
                 **hp) -> None:
        FedDAT.__init__(self, lr=lr, temperature=temperature, post_steps=post_steps, **hp)
        self.post_steps = int(post_steps)

    adapters = FedDAT.adapters
    aggregate = _TapCommon.aggregate

    def local_train(self, client) -> Payload:
        payload = FedDAT.local_train(self, client)
        return Payload({"shared": self._owned(client, payload.tensors["shared"])}, payload.meta)

    def post_fl(self, client) -> None:
        if self.post_steps:
            self.dat_steps(client, self.post_steps)

    def supervised(self, client, batch, logits, labels) -> torch.Tensor:
        return sum(share * client.bundle.tap.output_loss(task, logits[task], batch["tasks"][task])
                   for task, share in _shares(batch).items())

    def distil(self, client, batch, student, teacher, labels) -> torch.Tensor:
        layout = client.bundle.layout
        return sum(share * kd_term(layout.task(task).kind, student[task], teacher[task],
                                   labels.get(task), self.temperature)
                   for task, share in _shares(batch).items())


def _shares(batch: Mapping[str, Any]) -> dict[str, float]:
    """Each task's share of a collated batch's rows (TAP's task weighting)."""
    total = sum(batch["counts"].values())
    return {t: n / total for t, n in batch["counts"].items()}


@register
class Tap(_TapCommon):
    """TAP: the FL copy ``W`` (``local``) trains and is shared; the personal model ``X``
    (``personal``) takes ``W``'s part of a task when ``W`` beats it by the task's margin, and
    learns from ``W`` by distillation after the last round (see the module docstring)."""

    name = "tap"

    def __init__(self, lr: float = 3e-4, margin: float = 0.01, small_margin: float = 0.005,
                 kd_weight: float = 2e-3, text_cls_kd_weight: float = 1.0,
                 temperature: float = 1.0, post_steps: int = 50, **hp) -> None:
        super().__init__(lr=lr, margin=margin, small_margin=small_margin, kd_weight=kd_weight,
                         text_cls_kd_weight=text_cls_kd_weight, temperature=temperature,
                         post_steps=post_steps, **hp)
        self.margin, self.small_margin = float(margin), float(small_margin)
        self.kd_weight, self.text_cls_kd_weight = float(kd_weight), float(text_cls_kd_weight)
        self.temperature, self.post_steps = float(temperature), int(post_steps)

    def adapters(self) -> dict[str, AdapterConfig]:
        return {"local": AdapterConfig(), "personal": AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {"personal": 1.0}

    def _kind(self, client, task: str) -> str:
        return client.bundle.layout.task(task).kind

    def _history(self, client, name: str) -> dict[str, float]:
        """A history of the client's tasks from its state (NaN: no value yet)."""
        values = client.state.get(name)
        if values is None:
            return {}
        return {t: float(v) for t, v in zip(client.tasks, values.tolist()) if not math.isnan(v)}

    def _remember(self, client, name: str, history: Mapping[str, float]) -> None:
        old = self._history(client, name)
        merged = {**old, **history}
        client.state[name] = torch.tensor([merged.get(t, math.nan) for t in client.tasks],
                                          dtype=torch.float64)

    def local_train(self, client) -> Payload:
        fl = self._train(client, "local", client.steps)
        self._remember(client, "h_fl", fl)
        upload = self._owned(client, client.get("local"))
        margins = {t: self.small_margin if self._kind(client, t) in SMALL_MARGIN_KINDS
                   else self.margin for t in client.tasks}
        flags = replacement_flags(fl, self._history(client, "h_personal"), margins)
        if any(flags.values()):
            client.set("personal", replaced(client.get("personal"), client.get("local"), flags,
                                            self._modules(client)))
        personal = self._train(client, "personal", client.steps)
        self._remember(client, "h_personal", personal)
        return Payload({"local": upload},
                       {"loss": sum(personal.values()) / max(len(personal), 1),
                        "replaced": float(sum(flags.values()))})

    def post_fl(self, client) -> None:
        """Stage 2: ``W`` fine-tuned for ``post_steps`` iterations, then ``X`` trained as long
        on its task loss plus each task's KD from ``W`` (Eq. 6)."""
        self._train(client, "local", self.post_steps)

        def kd(batch: Mapping[str, Any]) -> torch.Tensor:
            with torch.no_grad():
                teacher, _ = client.logits(batch, ["local"], trainable=[])
            student, labels = client.logits(batch, ["personal"], trainable=["personal"])
            total = torch.zeros(())
            for task, out in student.items():
                kind = self._kind(client, task)
                beta = self.text_cls_kd_weight if kind == "text_classification" \
                    else self.kd_weight
                total = total + beta * kd_term(kind, out, teacher[task], labels.get(task),
                                               self.temperature)
            return total

        self._train(client, "personal", self.post_steps, kd=kd)
