"""Ditto (Li et al. 2021): a global adapter w and a personal adapter v per client.

Per batch: (a) w trains alone with CE; (b) v trains alone with CE + (λ/2)‖v − w⁰‖², where w⁰ is
the global adapter received this round. Only w is uploaded and averaged (within architecture
groups). Inference uses v. The released FedMosaic code also averages v: that is a bug (it
erases the personalisation) and is not reproduced here.
Ditto makes two adapter passes per batch, so at equal compute it runs half SFT's steps
(FedMosaic's NUM_ITER 50 vs 100).
"""

from __future__ import annotations

from baselines.base import AdapterConfig, Method, Payload, proximal, register


@register
class Ditto(Method):
    """Ditto: a global adapter (shared) and a personal one pulled toward it; infers with the personal one."""

    name = "ditto"
    compute_ratio = 0.5

    def __init__(self, lr: float = 1e-3, lam: float = 0.002, **hp) -> None:
        super().__init__(lr=lr, lam=lam, **hp)
        self.lam = lam

    def adapters(self) -> dict[str, AdapterConfig]:
        return {"global": AdapterConfig(), "personal": AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {"personal": 1.0}

    def local_train(self, client) -> Payload:
        anchor = [p.detach().clone() for p in client.params("global")]  # w⁰
        total = 0.0
        for _ in range(client.steps):
            batch = client.next_batch()
            loss_w = client.loss(batch, ["global"])
            client.step("global", loss_w)
            loss_v = client.loss(batch, ["personal"]) + proximal(
                client.params("personal"), anchor, self.lam)
            client.step("personal", loss_v)
            total += float(loss_v.detach())
        return Payload({"global": client.get("global")},
                       {"loss": total / client.steps if client.steps else 0.0})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, "global")
