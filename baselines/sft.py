"""SFT: every client trains its own adapter on its own stream; nothing is shared."""

from __future__ import annotations

from baselines.base import Method, Payload, register


@register
class SFT(Method):
    """Local fine-tuning only: the lower bound every federated method must beat on Others."""

    name = "sft"
    kinds = ("llava", "clip", "tap")  # TAP's "Local" baseline on its multi-task model

    def local_train(self, client) -> Payload:
        loss = self.train_adapter(client, "local", client.steps)
        return Payload(meta={"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return {}
