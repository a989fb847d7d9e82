"""Methods against hand-computed cases, on a toy client handle (a 2-parameter model)."""

from collections.abc import Mapping, Sequence

import pytest
import torch

from baselines import ClientInfo, Payload, get_method, method_names, weighted_average
from baselines.base import average_within_groups
from drake.errors import UnknownNameError


class ToyClient:
    """The ClientHandle protocol on y = w·x with adapters as plain parameter vectors."""

    def __init__(self, adapters: Mapping[str, list[float]], batches, lr=0.1, steps=1):
        self.id, self.arch, self.round, self.steps, self.num_samples = 0, "toy", 0, steps, 4
        self.p = {k: torch.nn.Parameter(torch.tensor(v, dtype=torch.float64))
                  for k, v in adapters.items()}
        self.opt = {k: torch.optim.SGD([p], lr=lr) for k, p in self.p.items()}
        self.batches = list(batches)

    def get(self, adapter):
        return {"w": self.p[adapter].detach().clone()}

    def set(self, adapter, state):
        with torch.no_grad():
            self.p[adapter].copy_(state["w"])

    def params(self, adapter):
        return [self.p[adapter]]

    def next_batch(self):
        return self.batches.pop(0)

    def loss(self, batch, adapters: Sequence[str], weights=None):
        weights = weights or [1.0] * len(adapters)
        w = sum(wt * self.p[a] for a, wt in zip(adapters, weights))
        x, y = batch
        return 0.5 * ((x @ w - y) ** 2).mean()

    def step(self, adapter, loss, reset_to=None):
        names = [adapter] if isinstance(adapter, str) else list(adapter)
        for p in self.p.values():
            p.grad = None
        loss.backward()
        if reset_to is not None:
            for n in names:
                self.set(n, reset_to)
        for n in names:
            self.opt[n].step()


def batch(x, y):
    return torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)


def test_registry_lists_core_methods():
    assert {"sft", "fedavg", "fedprox", "ditto", "fedsim", "feddpa", "per-fedavg"} <= set(
        method_names())
    with pytest.raises(UnknownNameError, match="drake methods"):
        get_method("fedavgg")


def test_fedavg_aggregation_is_the_data_weighted_mean():
    ups = {0: Payload({"local": {"a": torch.tensor([1.0, 2.0])}}),
           1: Payload({"local": {"a": torch.tensor([4.0, -1.0])}}),
           2: Payload({"local": {"a": torch.tensor([0.0, 0.0])}})}
    infos = {0: ClientInfo(0, "m", 10), 1: ClientInfo(1, "m", 30), 2: ClientInfo(2, "m", 60)}
    msgs = get_method("fedavg")().aggregate(ups, infos, 0)
    # (10*[1,2] + 30*[4,-1] + 60*[0,0]) / 100 = [1.3, -0.1]
    for c in infos:
        torch.testing.assert_close(msgs[c].tensors["local"]["a"], torch.tensor([1.3, -0.1]))


def test_same_architecture_grouping_in_a_2_plus_2_federation():
    ups = {c: Payload({"local": {"a": torch.tensor([float(c)])}}) for c in range(4)}
    infos = {0: ClientInfo(0, "small", 1), 1: ClientInfo(1, "large", 1),
             2: ClientInfo(2, "small", 3), 3: ClientInfo(3, "large", 1)}
    msgs = get_method("fedavg")().aggregate(ups, infos, 0)
    assert msgs[0].tensors["local"]["a"].item() == pytest.approx((0 * 1 + 2 * 3) / 4)
    assert msgs[2].tensors["local"]["a"].item() == pytest.approx(1.5)
    assert msgs[1].tensors["local"]["a"].item() == pytest.approx(2.0)
    assert msgs[3].tensors["local"]["a"].item() == pytest.approx(2.0)
    # different shapes can never be averaged together
    bad = {0: Payload({"local": {"a": torch.zeros(2)}}), 1: Payload({"local": {"a": torch.zeros(3)}})}
    with pytest.raises(ValueError, match="shape"):
        average_within_groups(bad, {0: ClientInfo(0, "m", 1), 1: ClientInfo(1, "m", 1)}, "local")


def test_weighted_average_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        weighted_average([], [])
    with pytest.raises(ValueError, match="positive"):
        weighted_average([{"a": torch.zeros(1)}], [0.0])
    with pytest.raises(ValueError, match="keys"):
        weighted_average([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}], [1, 1])


def test_ditto_personal_update_matches_the_formula():
    # 2 parameters; x = [1, 2], y = 3; w = [0.5, 0], v = [0, 1]; lam = 0.5; SGD lr 0.1.
    x, y = [[1.0, 2.0]], [3.0]
    client = ToyClient({"global": [0.5, 0.0], "personal": [0.0, 1.0]}, [batch(x, y)],
                       lr=0.1, steps=1)
    method = get_method("ditto")(lam=0.5)
    up = method.local_train(client)
    xv, w0, v0 = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.0]), torch.tensor([0.0, 1.0])
    # global: w1 = w0 - lr * (x·w0 - y) x = [0.5,0] - 0.1*(0.5-3)*[1,2] = [0.75, 0.5]
    torch.testing.assert_close(up.tensors["global"]["w"], torch.tensor([0.75, 0.5],
                               dtype=torch.float64))
    # personal: v1 = v0 - lr * ((x·v0 - y) x + lam (v0 - w0)); the anchor is the received w0
    grad = (xv @ v0 - 3.0) * xv + 0.5 * (v0 - w0)
    torch.testing.assert_close(client.get("personal")["w"], (v0 - 0.1 * grad).double())
    assert set(up.tensors) == {"global"}, "only the global adapter is uploaded"


def test_fedprox_adds_the_proximal_gradient():
    x, y = [[1.0, 0.0]], [1.0]
    client = ToyClient({"local": [0.0, 2.0]}, [batch(x, y), batch(x, y)], lr=0.1, steps=2)
    get_method("fedprox")(mu=1.0).local_train(client)
    # step 1: grad = (0-1)*[1,0] + 0 = [-1,0] -> w = [0.1, 2]
    # step 2: grad = (0.1-1)*[1,0] + 1*([0.1,2]-[0,2]) = [-0.8, 0] -> w = [0.18, 2]
    torch.testing.assert_close(client.get("local")["w"], torch.tensor([0.18, 2.0],
                               dtype=torch.float64))


def test_per_fedavg_first_order_step():
    # theta = [1, 1]; D: x=[1,0], y=0; D': x=[0,1], y=0; alpha = 0.5, beta (SGD lr) = 0.1
    client = ToyClient({"local": [1.0, 1.0]},
                       [batch([[1.0, 0.0]], [0.0]), batch([[0.0, 1.0]], [0.0])], lr=0.1, steps=1)
    get_method("per-fedavg")(alpha=0.5).local_train(client)
    # theta~ = theta - 0.5*[1,0] = [0.5, 1]; grad at theta~ on D' = [0, 1]
    # theta <- theta - 0.1*[0,1] = [1, 0.9]
    torch.testing.assert_close(client.get("local")["w"], torch.tensor([1.0, 0.9],
                               dtype=torch.float64))


def test_fedsim_trains_both_adapters_with_one_loss_and_uploads_shared():
    client = ToyClient({"shared": [0.0, 0.0], "personal": [1.0, 0.0]},
                       [batch([[1.0, 1.0]], [3.0])], lr=0.1, steps=1)
    up = get_method("fedsim")().local_train(client)
    # w = s + p = [1, 0]; residual 1 - 3 = -2; grad wrt both = -2*[1,1]
    torch.testing.assert_close(up.tensors["shared"]["w"], torch.tensor([0.2, 0.2],
                               dtype=torch.float64))
    torch.testing.assert_close(client.get("personal")["w"], torch.tensor([1.2, 0.2],
                               dtype=torch.float64))
    assert set(up.tensors) == {"shared"}


def test_feddpa_instance_weights():
    from baselines.feddpa import instance_weights

    h_test = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    h_train = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    torch.testing.assert_close(instance_weights(h_test, h_train), torch.tensor([0.5, 0.0]))


def test_sft_shares_nothing():
    client = ToyClient({"local": [0.0]}, [batch([[1.0]], [1.0])], steps=1)
    method = get_method("sft")()
    up = method.local_train(client)
    assert up.tensors == {} and method.aggregate({0: up}, {0: ClientInfo(0, "t", 1)}, 0) == {}


def test_per_fedavg_outer_step_is_sgd_and_its_personalisation_batch_is_not_the_first_one():
    """The outer step is SGD with β the run's lr (as the hand-computed step above); the batch a
    client personalises on before evaluation comes from the evaluation's own stream, not the
    round's first training batch again (both handles of a round used one seed)."""
    from drake.runtime.client import EVAL_STREAM, ClientRecord, RuntimeClient

    assert get_method("per-fedavg").optimizer == ("sgd", {})

    class Data:
        @staticmethod
        def training_samples(ids):
            return list(ids)

    def handle(stream=None):
        kw = {} if stream is None else {"stream": stream}
        return RuntimeClient(0, "m", None, None, ClientRecord(), [f"s{i}" for i in range(40)],
                             Data(), round_=3, steps=1, batch_size=4, lr=0.1, seed=0, **kw)

    first = handle().train_samples(4)
    assert handle().train_samples(4) == first  # a training turn is reproducible
    assert handle(EVAL_STREAM).train_samples(4) != first


def test_feddpa_trains_local_on_the_half_mix_first_then_global_alone():
    # G = [1, 0], L = [0, 1]; SGD lr 0.1; two steps: one per phase
    client = ToyClient({"global": [1.0, 0.0], "local": [0.0, 1.0]},
                       [batch([[1.0, 1.0]], [2.0]), batch([[1.0, 0.0]], [0.0])], steps=2)
    up = get_method("feddpa")().local_train(client)
    # phase 1, L on ½G + ½L = [0.5, 0.5]: residual 1 - 2 = -1, dL = ½ · (-1) · [1, 1]
    #   L = [0, 1] - 0.1 · [-0.5, -0.5] = [0.05, 1.05]; G untouched
    torch.testing.assert_close(client.get("local")["w"],
                               torch.tensor([0.05, 1.05], dtype=torch.float64))
    # phase 2, G alone: residual 1 - 0 = 1, dG = [1, 0]; G = [0.9, 0]; only G is uploaded
    torch.testing.assert_close(up.tensors["global"]["w"],
                               torch.tensor([0.9, 0.0], dtype=torch.float64))
    assert set(up.tensors) == {"global"}


def test_feddpa_predict_weights_each_instance_by_its_similarity_to_local_data():
    """α(x) = ½ · mean_j cos(h(x), h(x_j)); L gets α, G gets 1 − α, one instance at a time."""
    hidden = {"t1": [1.0, 0.0], "t2": [1.0, 1.0], "r1": [1.0, 0.0], "r2": [0.0, 1.0]}

    class Client:
        @staticmethod
        def train_samples(k):
            return ["r1", "r2"]

        @staticmethod
        def hidden(samples, adapters):
            assert adapters == ["global"]  # h is read under G
            return torch.tensor([hidden[s] for s in samples])

    seen = []

    def answer(samples, weights):
        seen.append((list(samples), dict(weights)))
        return ["x"] * len(samples)

    assert get_method("feddpa")(k=2).predict(Client(), ["t1", "t2"], answer) == ["x", "x"]
    # t1: cos = [1, 0] -> α = 0.25; t2: cos = [√½, √½] -> α = √½ / 2
    (s1, w1), (s2, w2) = seen
    assert s1 == ["t1"] and w1["local"] == pytest.approx(0.25) and w1["global"] == pytest.approx(0.75)
    assert s2 == ["t2"] and w2["local"] == pytest.approx(0.5 ** 0.5 / 2)
    assert w2["global"] == pytest.approx(1 - 0.5 ** 0.5 / 2)
    # dynamic=False: the FedMosaic port's fixed ½/½ in one call
    seen.clear()
    get_method("feddpa")(dynamic=False).predict(Client(), ["t1", "t2"], answer)
    assert seen == [(["t1", "t2"], {"global": 0.5, "local": 0.5})]


def test_diagnostics_count_sum_min_and_max_and_survive_a_resume():
    method = get_method("fedavg")()
    for value in (3, 1, 2):
        method.count("edits")
        method.count("similarity_min", value / 10, "min")
        method.count("rank_max", value, "max")
    assert method.diagnostics == {"edits": 3.0, "similarity_min": 0.1, "rank_max": 3.0}
    again = get_method("fedavg")()
    again.load_server_state(method.server_state())
    assert again.diagnostics == method.diagnostics
    with pytest.raises(ValueError, match="sum, min or max"):
        method.count("edits", 1, "mean")
