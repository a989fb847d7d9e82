"""Per-FedAvg, first order (Fallah et al. 2020).

Each local step uses two batches D and D′: θ̃ = θ − α∇L(θ; D), then θ ← θ − β∇L(θ̃; D′), the
gradient at θ̃ applied at θ (first-order MAML; an SGD step with β the run's learning rate). The
server averages θ weighted by data size (within architecture groups). Before evaluation each client
personalises with one step θ_i = θ − α∇L_i(θ) on a batch of its own data (drawn from the
evaluation's own stream, not the round's first training batch again); the step is undone after
evaluation so training continues from θ. Two passes per step: half SFT's steps at equal
compute.
"""

from __future__ import annotations

import torch

from baselines.base import Method, Payload, register


def sgd_inplace(params, loss: torch.Tensor, alpha: float) -> None:
    """p ← p − α ∂loss/∂p, without touching any optimiser state."""
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    with torch.no_grad():
        for p, g in zip(params, grads):
            if g is not None:
                p.sub_(alpha * g)


@register
class PerFedAvg(Method):
    """Per-FedAvg (first order): a meta-learned start, personalised by one step before evaluation."""

    name = "per-fedavg"
    compute_ratio = 0.5
    #: the outer step θ ← θ − β∇L(θ̃; D′) is plain SGD with β the run's learning rate (the
    #: paper's update; an adaptive optimiser would rescale it)
    optimizer = ("sgd", {})

    def __init__(self, lr: float = 1e-3, alpha: float = 0.01, **hp) -> None:
        super().__init__(lr=lr, alpha=alpha, **hp)
        self.alpha = alpha

    def local_train(self, client) -> Payload:
        total = 0.0
        for _ in range(client.steps):
            theta = client.get("local")
            sgd_inplace(client.params("local"),
                        client.loss(client.next_batch(), ["local"]), self.alpha)
            loss = client.loss(client.next_batch(), ["local"])
            client.step("local", loss, reset_to=theta)
            total += float(loss.detach())
        return Payload({"local": client.get("local")},
                       {"loss": total / client.steps if client.steps else 0.0})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, "local")

    def before_eval(self, client) -> None:
        client.state.update({f"theta.{k}": v for k, v in client.get("local").items()})
        sgd_inplace(client.params("local"), client.loss(client.next_batch(), ["local"]),
                    self.alpha)

    def after_eval(self, client) -> None:
        keys = [k for k in client.state if k.startswith("theta.")]
        client.set("local", {k[len("theta."):]: client.state.pop(k) for k in keys})
