"""PerAda (Xie et al., CVPR 2024): personalised adapters and a server-side ensemble distillation.

Each client holds a personal adapter ``v`` and a copy ``w`` of the global adapter. Per batch:

1. ``v`` steps on ``CE(v) + λ‖v − w⁰‖²``, ``w⁰`` the global adapter received this round
   (λ = 1, and no ½, as the released PerAda code's CIFAR-10 script);
2. ``w`` steps on plain CE.

Only ``w`` is uploaded; inference uses ``v``. The released FedMosaic code also averages ``v``
(a bug that erases the personalisation; not reproduced).

The server averages the uploaded ``w`` within each architecture group (weighted by data size),
then improves the average by FedDF-style ensemble distillation on the benchmark's public
samples (:meth:`PerAda.distil`): the student starts at the average, the teacher is the mean of
the group's uploaded adapters' logits, and the loss is ``KL(softmax(z̄/T) ‖ softmax(z_s/T))``
without ``T²`` (FedDF's, T = 1; :func:`~baselines.distill.kd_loss`), with Adam at ``kd_lr``.
Every ``val_every`` steps the student is scored on held-out labelled public batches
(teacher-forced accuracy, :func:`~baselines.distill.validation_accuracy`; the released code
validates by accuracy on a labelled server split); distillation stops after ``patience`` checks
without improvement and the best-scoring student is kept, unless the average itself scores at
least as well, in which case the server keeps the average (the revert, counted as
``perada_kd_reverted`` in the results' diagnostics). Distillation runs in the first
``kd_rounds`` rounds only. Departures: the KD rate is constant (the code anneals it with a
cosine schedule), and the teacher and student live within each architecture group (PerAda's
federations are homogeneous; the FedMosaic port pools both families' logits).

Compute: two adapter passes per batch, so half SFT's steps at equal compute, as Ditto.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from baselines.base import Payload, State, proximal, register
from baselines.distill import (
    ensemble_logits,
    kd_loss,
    public_batches,
    split_validation,
    validation_accuracy,
)
from baselines.ditto import Ditto


@register
class PerAda(Ditto):
    """PerAda: a personal adapter pulled toward a global one that the server distils on public
    data; infers with the personal adapter (Ditto's adapters, in the other order)."""

    name = "perada"
    compute_ratio = 0.5

    def __init__(self, lr: float = 1e-3, lam: float = 1.0, temperature: float = 1.0,
                 kd_lr: float = 1e-3, kd_steps: int = 20, kd_samples: int = 80,
                 kd_rounds: int = 30, val_fraction: float = 0.25, val_every: int = 5,
                 patience: int = 2, **hp: Any) -> None:
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if val_every < 1 or patience < 1:
            raise ValueError(f"val_every and patience must be ≥ 1, got {val_every}, "
                             f"{patience}")
        super().__init__(lr=lr, lam=lam, temperature=temperature, kd_lr=kd_lr,
                         kd_steps=kd_steps, kd_samples=kd_samples, kd_rounds=kd_rounds,
                         val_fraction=val_fraction, val_every=val_every, patience=patience,
                         **hp)
        self.lam, self.temperature, self.kd_lr = float(lam), float(temperature), float(kd_lr)
        self.kd_steps, self.kd_samples, self.kd_rounds = int(kd_steps), int(kd_samples), \
            int(kd_rounds)
        self.val_fraction, self.val_every, self.patience = float(val_fraction), int(val_every), \
            int(patience)

    def local_train(self, client) -> Payload:
        anchor = [p.detach().clone() for p in client.params("global")]  # w⁰
        total = 0.0
        for _ in range(client.steps):
            batch = client.next_batch()
            loss_v = client.loss(batch, ["personal"]) + proximal(  # (2λ/2)‖v − w⁰‖²
                client.params("personal"), anchor, 2 * self.lam)
            client.step("personal", loss_v)
            client.step("global", client.loss(batch, ["global"]))
            total += float(loss_v.detach())
        return Payload({"global": client.get("global")},
                       {"loss": total / client.steps if client.steps else 0.0})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        messages = self.share_within_groups(uploads, clients, "global")
        if self.server is None or round >= self.kd_rounds or self.kd_steps <= 0:
            return messages
        by_arch: dict[str, list[State]] = {}
        for cid in sorted(uploads):
            by_arch.setdefault(clients[cid].arch, []).append(uploads[cid].tensors["global"])
        for arch, teachers in sorted(by_arch.items()):
            mean = self._group_means[("global", arch)]
            self._group_means[("global", arch)] = self.distil(arch, mean, teachers, round)
        return {cid: Payload({"global": self._group_means[("global", clients[cid].arch)]})
                for cid in messages}

    def distil(self, arch: str, mean: State, teachers: Sequence[State], round: int) -> State:
        """The server's KD step for one architecture group: the distilled average, or ``mean``
        itself when no validation check improved on it (the revert)."""
        handle = self.server.model(arch, {"global": mean}, round=round, lr=self.kd_lr,
                                   optimizer=("adamw", {"weight_decay": 0.0}))
        fit, held = split_validation(
            public_batches(handle.public, self.kd_samples, handle.batch_size,
                           method=self.name), self.val_fraction)
        fit = [handle.batch(b) for b in fit]
        held = [handle.batch(b) for b in held]
        targets = ensemble_logits(handle, "global", teachers, fit)
        return self.distil_on(handle, mean, fit, targets, held)

    def distil_on(self, handle: Any, mean: State, fit: Sequence[Mapping[str, Any]],
                  targets: Sequence[torch.Tensor], held: Sequence[Mapping[str, Any]]) -> State:
        """Distil ``handle``'s ``global`` adapter from ``mean`` towards ``targets`` (teacher
        logits per batch of ``fit``), with early stopping on ``held`` and the revert."""
        handle.set("global", mean)
        start = best_score = validation_accuracy(handle, "global", held) if held else None
        best, bad = mean, 0
        for step in range(self.kd_steps):
            i = step % len(fit)
            z, _ = handle.logits(fit[i], ["global"])
            handle.step("global", kd_loss(z, targets[i], self.temperature, t_squared=False))
            if held and (step + 1) % self.val_every == 0:
                score = validation_accuracy(handle, "global", held)
                if score > best_score:
                    best_score, best, bad = score, handle.get("global"), 0
                else:
                    bad += 1
                    if bad >= self.patience:
                        break
        self.count("perada_kd_rounds")
        if not held:
            return handle.get("global")
        if best_score > start:
            return best
        self.count("perada_kd_reverted")
        return mean
