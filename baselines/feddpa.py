"""FedDPA (Yang et al., NeurIPS 2024): a global adapter G and a local adapter L.

Local training, in the paper's order: first L trains with the combination ½G + ½L and G frozen,
then G trains alone with CE (half the step budget each). Only G is uploaded and averaged
(within architecture groups, weighted by data size).

Inference uses instance-wise dynamic weighting: for a test input x,
α(x) = ½ · mean_j cos(h(x), h(x_j)) over ``k`` (=5) random local training inputs x_j, where h is
the last-layer hidden state of the last prompt token under G; then L gets weight α and G gets
1 − α. The FedMosaic port reverses the training order and uses a fixed ½/½ at inference; that
variant is available as ``dynamic=False`` (fixed ½/½), but the order follows the paper.
"""

from __future__ import annotations

import torch

from baselines.base import AdapterConfig, Method, Payload, register


def instance_weights(h_test: torch.Tensor, h_train: torch.Tensor) -> torch.Tensor:
    """α per test row: ½ · mean cosine similarity to the training rows (FedDPA's rule)."""
    a = torch.nn.functional.normalize(h_test.float(), dim=-1)
    b = torch.nn.functional.normalize(h_train.float(), dim=-1)
    return 0.5 * (a @ b.T).mean(dim=1)


@register
class FedDPA(Method):
    """FedDPA: global + local adapters, instance-wise weighted at inference."""

    name = "feddpa"

    def __init__(self, lr: float = 1e-3, k: int = 5, dynamic: bool = True, **hp) -> None:
        super().__init__(lr=lr, k=k, dynamic=dynamic, **hp)
        self.k = k
        self.dynamic = dynamic

    def adapters(self) -> dict[str, AdapterConfig]:
        return {"global": AdapterConfig(), "local": AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {"global": 0.5, "local": 0.5}

    def local_train(self, client) -> Payload:
        first = client.steps // 2
        total = 0.0
        for _ in range(first):
            loss = client.loss(client.next_batch(), ["global", "local"], [0.5, 0.5])
            client.step("local", loss)
            total += float(loss.detach())
        total += self.train_adapter(client, "global", client.steps - first) * (
            client.steps - first)
        return Payload({"global": client.get("global")},
                       {"loss": total / client.steps if client.steps else 0.0})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, "global")

    def predict(self, client, samples, answer):
        if not self.dynamic:
            return answer(samples, self.eval_adapters())
        refs = client.train_samples(self.k)
        if not refs:
            return answer(samples, self.eval_adapters())
        with torch.no_grad():
            alpha = instance_weights(client.hidden(samples, ["global"]),
                                     client.hidden(refs, ["global"]))
        out = []
        for sample, a in zip(samples, alpha.tolist()):
            out.extend(answer([sample], {"global": 1.0 - a, "local": a}))
        return out
