"""A method for the Flower runtime's tests, importable in every client process (Ray actors,
SuperNodes) through DRAKE_METHOD_MODULES: it raises on client 3."""

from baselines.base import Method, Payload, register


@register
class BrokenClient(Method):
    name = "test-broken-client"

    def local_train(self, client):
        if client.id == 3:
            raise RuntimeError("client 3 has a broken adapter")
        return Payload(meta={"loss": self.train_adapter(client, "local", client.steps)})

    def aggregate(self, uploads, clients, round):
        return {}
