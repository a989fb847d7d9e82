"""FedAvg of LoRA adapters (FedIT), and FedProx on the same upload.

Server: θ_g = Σ_k n_k θ_k / Σ_k n_k over the clients of one architecture (data-size weights, as
FedIT; the FedMosaic code weights uniformly, which is the same when sample counts are equal).
Inside a heterogeneous federation, averaging happens only within architecture groups, as the
FedMosaic paper does with Fed-ET.
"""

from __future__ import annotations

from baselines.base import Method, Payload, proximal, register


@register
class FedAvg(Method):
    """LoRA FedAvg (FedIT): train the adapter, upload it, receive the group average."""

    name = "fedavg"

    def local_train(self, client) -> Payload:
        loss = self.train_adapter(client, "local", client.steps)
        return Payload({"local": client.get("local")}, {"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, "local")


@register
class FedProx(FedAvg):
    """FedProx (Li et al. 2020): local CE + (μ/2)‖w − w_g‖², w_g the adapter received this round."""

    name = "fedprox"

    def __init__(self, lr: float = 1e-3, mu: float = 0.01, **hp) -> None:
        super().__init__(lr=lr, mu=mu, **hp)
        self.mu = mu

    def local_train(self, client) -> Payload:
        anchor = [p.detach().clone() for p in client.params("local")]
        loss = self.train_adapter(
            client, "local", client.steps,
            extra=lambda c: proximal(c.params("local"), anchor, self.mu))
        return Payload({"local": client.get("local")}, {"loss": loss})
