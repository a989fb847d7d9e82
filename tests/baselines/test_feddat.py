"""FedDAT (baselines.feddat) against hand-computed cases: the distillation loss, and one local
step of each adapter in the paper's order on a toy client whose logits are its adapters'
weighted sum."""

import math
from collections.abc import Sequence

import pytest
import torch

from baselines import ClientInfo, Payload, get_method
from baselines.feddat import kd_loss

LN3 = math.log(3)


def test_kd_loss_by_hand():
    student, teacher = torch.tensor([[0.0, 0.0]]), torch.tensor([[LN3, 0.0]])
    # T = 1: KL([3/4, 1/4] || [1/2, 1/2]) = 3/4 ln(3/2) + 1/4 ln(1/2)
    want = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert float(kd_loss(student, teacher, 1.0)) == pytest.approx(want, abs=1e-6)
    # T = 2: the teacher at T is [√3, 1] / (√3 + 1); times T² = 4
    p = math.sqrt(3) / (math.sqrt(3) + 1)
    want = 4 * (p * math.log(p / 0.5) + (1 - p) * math.log((1 - p) / 0.5))
    assert float(kd_loss(student, teacher, 2.0)) == pytest.approx(want, abs=1e-6)  # 0.145324
    # batchmean: two equal rows give the one row's value
    two = kd_loss(student.repeat(2, 1), teacher.repeat(2, 1), 2.0)
    assert float(two) == pytest.approx(want, abs=1e-6)


class LogitClient:
    """A client whose logits are the weighted sum of its adapters (2-vectors), label 0; SGD."""

    def __init__(self, adapters, lr=0.1, steps=1):
        self.id, self.arch, self.round, self.steps, self.num_samples = 0, "toy", 0, steps, 4
        self.p = {k: torch.nn.Parameter(torch.tensor(v, dtype=torch.float64))
                  for k, v in adapters.items()}
        self.opt = {k: torch.optim.SGD([p], lr=lr) for k, p in self.p.items()}
        self.calls = []

    def get(self, adapter):
        return {"w": self.p[adapter].detach().clone()}

    def set(self, adapter, state):
        with torch.no_grad():
            self.p[adapter].copy_(state["w"])

    def next_batch(self):
        return {}

    def logits(self, batch, adapters: Sequence[str], weights=None, trainable=None):
        weights = weights or [1.0] * len(adapters)
        trainable = adapters if trainable is None else trainable
        self.calls.append((list(adapters), list(weights), list(trainable)))
        z = sum(w * (self.p[a] if a in trainable else self.p[a].detach())
                for a, w in zip(adapters, weights))
        return z[None], torch.tensor([0])

    def step(self, adapter, loss, reset_to=None):
        for p in self.p.values():
            p.grad = None
        loss.backward()
        self.opt[adapter].step()


def test_one_step_of_each_adapter_in_the_papers_order_by_hand():
    """A₁ = [0, 0] (received), A₀ = [2 ln 3, 0], A₂ stale; T = 2, SGD lr 0.1, label 0.

    A₂ ← A₁, so z_DAT = ½A₀ + ½A₂ = [ln 3, 0] and z₁ = [0, 0].
    A₁'s gradient: ½(softmax(z₁) − e₀) + ½·T·(softmax(z₁/T) − softmax(z_DAT/T))
      = [−¼, ¼] + [½ − p, p − ½] with p = √3/(√3+1) = 0.633975: [−0.383975, 0.383975].
    A₀'s, through z_DAT (∂z_DAT/∂A₀ = ½), against z₁ before A₁'s step:
      ½·{½(softmax(z_DAT) − e₀) + ½·T·(softmax(z_DAT/T) − softmax(z₁/T))}
      = ½·([−⅛, ⅛] + [p − ½, ½ − p]) = [0.0044875, −0.0044875].
    """
    client = LogitClient({"shared": [0.0, 0.0], "local": [2 * LN3, 0.0],
                          "teacher": [5.0, -5.0]})
    method = get_method("feddat")(lr=0.1, temperature=2.0)
    upload = method.local_train(client)
    p = math.sqrt(3) / (math.sqrt(3) + 1)
    g1 = -0.25 + 0.5 - p
    torch.testing.assert_close(client.p["shared"].detach(),
                               torch.tensor([-0.1 * g1, 0.1 * g1], dtype=torch.float64))
    g0 = 0.5 * (-0.125 + p - 0.5)
    torch.testing.assert_close(client.p["local"].detach(), torch.tensor(
        [2 * LN3 - 0.1 * g0, 0.1 * g0], dtype=torch.float64))
    # A₂ is the received A₁, frozen: never trained
    torch.testing.assert_close(client.p["teacher"].detach(),
                               torch.zeros(2, dtype=torch.float64))
    # teacher (no gradient), A₁, then A₀ through the DAT
    assert client.calls == [(["local", "teacher"], [0.5, 0.5], []), (["shared"], [1.0], ["shared"]),
                            (["local", "teacher"], [0.5, 0.5], ["local"])]
    # the upload is A₁ after its step; the loss reported is A₀'s:
    # ½[CE([ln 3, 0], 0) + T²·KL(½,½ ‖ softmax([ln 3, 0]/T))]
    torch.testing.assert_close(upload.tensors["shared"]["w"], client.p["shared"].detach())
    want = 0.5 * (-math.log(0.75) + 4 * (0.5 * math.log(0.5 / p) + 0.5 * math.log(0.5 / (1 - p))))
    assert upload.meta["loss"] == pytest.approx(want, abs=1e-9)  # 0.218361


def test_only_the_shared_adapter_is_averaged_and_inference_is_the_dat():
    method = get_method("feddat")()
    ups = {c: Payload({"shared": {"a": torch.tensor([float(c)])}}) for c in range(2)}
    infos = {0: ClientInfo(0, "m", 1), 1: ClientInfo(1, "m", 3)}
    msgs = method.aggregate(ups, infos, 0)
    for c in infos:
        assert set(msgs[c].tensors) == {"shared"}
        torch.testing.assert_close(msgs[c].tensors["shared"]["a"], torch.tensor([0.75]))
    assert method.eval_adapters() == {"local": 0.5, "teacher": 0.5}
    assert set(method.adapters()) == {"shared", "local", "teacher"}
    with pytest.raises(ValueError, match="temperature must be > 0"):
        get_method("feddat")(temperature=0)
