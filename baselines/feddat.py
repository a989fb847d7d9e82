"""FedDAT (Chen et al., AAAI 2024): a Dual-Adapter Teacher and mutual knowledge distillation.

Each client holds three adapters (LoRA here, as every method of the suite; the paper's are
Pfeiffer adapters on ViLT/ALBEF):

* ``shared`` (A₁): trained locally, uploaded and averaged (within architecture groups, weighted by
  data size);
* ``local`` (A₀): the client's own, never sent;
* ``teacher`` (A₂): a frozen copy of the global A₁ the client received, copied again at the start
  of each of its turns.

The Dual-Adapter Teacher (DAT) is the mean of A₀ and A₂, ``½(A₀ + A₂)``. Per batch:

1. the DAT's logits ``z_DAT``, without gradients;
2. A₁ steps on ``½[CE(z₁) + KL_T(z₁ ‖ z_DAT)]``;
3. A₀ steps through the DAT forward on ``½[CE(z_DAT') + KL_T(z_DAT' ‖ z₁)]``, ``z₁`` the logits of
   step 2 (before its update), detached; A₂ stays frozen,

with ``KL_T(s ‖ t) = T² · KL(softmax(t/T) ‖ softmax(s/T))`` averaged over the batch's labelled
positions (:func:`baselines.distill.kd_loss`; the paper's T = 3, the FedMosaic port's 2).
Inference uses the DAT. The original's optimiser is AdamW with a warm-up and polynomial decay;
here it is the run's (constant) rate, as for every LLaVA method of the suite.

Compute: three forward passes (the teacher's without a backward) and two backward passes per
batch; FedMosaic's code gives FedDAT 43 of SFT's 100 iterations (``compute_ratio``).

The logits are LLaVA's next-token logits of the answer tokens, or a CLIP model's class logits
(:meth:`~baselines.base.ClientHandle.logits`): one implementation for both model kinds. On TAP's
model (``tap-feddat``, :class:`baselines.tap.TapFedDAT`) the same steps run on each task's outputs,
with that model's task losses and TAP's per-task distillation terms (:meth:`FedDAT.supervised`,
:meth:`FedDAT.distil`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from baselines.base import AdapterConfig, Method, Payload, register
from baselines.distill import kd_loss

__all__ = ["DAT", "FedDAT", "kd_loss"]

#: the Dual-Adapter Teacher: A₀ and A₂, averaged
DAT = {"local": 0.5, "teacher": 0.5}


@register
class FedDAT(Method):
    """FedDAT: shared adapter and Dual-Adapter Teacher distil into each other; infers with the
    DAT."""

    name = "feddat"
    compute_ratio = 0.43

    def __init__(self, lr: float = 1e-3, temperature: float = 3.0, **hp) -> None:
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        super().__init__(lr=lr, temperature=temperature, **hp)
        self.temperature = float(temperature)

    def adapters(self) -> dict[str, AdapterConfig]:
        return {"shared": AdapterConfig(), "local": AdapterConfig(), "teacher": AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return dict(DAT)

    def local_train(self, client) -> Payload:
        loss = self.dat_steps(client, client.steps)
        return Payload({"shared": client.get("shared")}, {"loss": loss})

    def dat_steps(self, client, steps: int) -> float:
        """``steps`` iterations of the two DAT steps above, the teacher A₂ first set to the
        received global A₁; returns A₀'s mean loss."""
        client.set("teacher", client.get("shared"))  # A₂: the received global A₁, frozen
        names, weights = list(DAT), list(DAT.values())
        total = 0.0
        for _ in range(steps):
            batch = client.next_batch()
            with torch.no_grad():
                z_dat, _ = client.logits(batch, names, weights, trainable=[])
            z1, labels = client.logits(batch, ["shared"])
            loss1 = 0.5 * (self.supervised(client, batch, z1, labels)
                           + self.distil(client, batch, z1, z_dat, labels))
            client.step("shared", loss1)
            z_dat, labels = client.logits(batch, names, weights, trainable=["local"])
            loss0 = 0.5 * (self.supervised(client, batch, z_dat, labels)
                           + self.distil(client, batch, z_dat, z1, labels))
            client.step("local", loss0)
            total += float(loss0.detach())
        return total / steps if steps else 0.0

    def supervised(self, client, batch, logits: torch.Tensor, labels: torch.Tensor
                   ) -> torch.Tensor:
        """The task loss of one forward's logits: cross-entropy to the labels."""
        return F.cross_entropy(logits, labels)

    def distil(self, client, batch, student: torch.Tensor, teacher: torch.Tensor,
               labels: torch.Tensor) -> torch.Tensor:
        """``KL_T(student || teacher)``, the teacher detached."""
        return kd_loss(student, teacher.detach(), self.temperature)

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, "shared")
