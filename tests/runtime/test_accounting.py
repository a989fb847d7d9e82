"""The runtime's bookkeeping checked against numbers worked out by hand: when it evaluates, what
it records as sent and received, and what it holds per client (one frozen base per
architecture, only adapters per client)."""

import json

import pytest

from baselines.base import Method, Payload, register
from drake.build import build
from drake.registry import get_benchmark
from drake.runtime import LocalRuntime, RunConfig

# LoRA r = 8 on q, k, v, o, gate, up and down of every decoder layer: r * (in + out) each.
# tiny-llava-llama: hidden 128, 4 heads of 32, 2 key/value heads (64), MLP 384, 4 layers
#   q 128+128, k 128+64, v 128+64, o 128+128, gate 128+384, up 128+384, down 384+128 = 2432
LLAMA_LORA = 8 * 2432 * 4  # 77,824 parameters
# tiny-llava-qwen: hidden 160, 5 heads of 32, 1 key/value head (32), MLP 448, 3 layers
#   q 160+160, k 160+32, v 160+32, o 160+160, gate 160+448, up 160+448, down 448+160 = 2848
QWEN_LORA = 8 * 2848 * 3  # 68,352 parameters
# the hetero mix: clients 0, 1, 8, 9 on llama, the other six on qwen; float32 on the wire
ROUND_BYTES = 4 * (4 * LLAMA_LORA + 6 * QWEN_LORA)  # 2,885,632


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("d"), seed=1)


def config(data, out, **kw):
    base = dict(data=str(data), scenario="static", method="fedavg", out=str(out), seed=0,
                rounds=2, local_steps=1, batch_size=2, eval_per_task=1, pretrained=False,
                mc_scoring="loglik")
    return RunConfig(**{**base, **kw})


def test_fedavg_sends_and_receives_every_clients_lora_each_round(data, tmp_path):
    rt = LocalRuntime(config(data, tmp_path / "run", eval_every=2))  # one evaluation
    assert rt.models.count("tiny-llava-llama") == 4 and rt.models.count("tiny-llava-qwen") == 6
    res = rt.run()
    # static stream: every client trains and uploads its LoRA; each gets its family's average
    assert res["cost"]["comm_bytes_up_per_round"] == [ROUND_BYTES, ROUND_BYTES]
    assert res["cost"]["comm_bytes_down_per_round"] == [ROUND_BYTES, ROUND_BYTES]


def test_one_frozen_base_per_architecture_and_only_adapters_per_client(data, tmp_path):
    rt = LocalRuntime(config(data, tmp_path / "run"))
    assert sorted(rt.bundles) == ["tiny-llava-llama", "tiny-llava-qwen"]
    records = rt._fresh_records()
    for c, record in records.items():
        held = sum(t.numel() for state in record.adapters.values() for t in state.values())
        assert held == (LLAMA_LORA if rt.models[c] == "tiny-llava-llama" else QWEN_LORA), c
        assert not record.state and not record.optim
    for bundle in rt.bundles.values():  # the bases are frozen; only LoRA trains
        trainable = {n for n, p in bundle.model.named_parameters() if p.requires_grad}
        assert trainable and all("lora_" in n for n in trainable)
    base = sum(p.numel() for n, p in rt.bundles["tiny-llava-qwen"].model.named_parameters()
               if "lora_" not in n)
    assert base > 20 * QWEN_LORA  # ten clients cost ten adapters, far less than ten bases


@register
class StepCounter(Method):
    """No model: records how many local steps each client was given, answers every sample
    right (so that evaluation costs nothing)."""

    name = "test-step-counter"
    given: dict[tuple[int, int], tuple[int, int]] = {}

    def local_train(self, client):
        StepCounter.given[(client.id, client.round)] = (client.steps, client.num_samples)
        return Payload()

    def aggregate(self, uploads, clients, round):
        return {}

    def predict(self, client, samples, answer):
        return [s["choices"].index(s["answer"]) if s["choices"] else s["answer"]
                for s in samples]


@pytest.mark.parametrize("rounds,every,points", [(5, 2, [2, 4, 5]), (3, 5, [3])])
def test_evaluation_points_by_hand(data, tmp_path, rounds, every, points):
    """Scored after every ``every``-th round (1-based) and always after the last."""
    cfg = config(data, tmp_path / "run", method="test-step-counter", rounds=rounds,
                 eval_every=every)
    res = LocalRuntime(cfg).run()
    assert res["curves"]["rounds"] == points
    logged = [json.loads(x)["round"] for x in (tmp_path / "run" / "metrics.jsonl")
              .read_text().splitlines()]
    assert logged == points


def test_local_epochs_give_each_client_its_own_steps(data, tmp_path):
    """One epoch of batch 4 over a client's arrived rows: ceil(rows / 4) steps (pFedMMA)."""
    StepCounter.given = {}
    res = LocalRuntime(config(data, tmp_path / "run", method="test-step-counter",
                              local_steps=None, local_epochs=1.0, batch_size=4)).run()
    assert len(StepCounter.given) == 20  # 10 clients x 2 rounds
    for (c, r), (steps, rows) in StepCounter.given.items():
        assert rows > 0 and steps == -(-rows // 4), (c, r, steps, rows)
    assert len({s for s, _ in StepCounter.given.values()}) > 1  # clients differ
    hp = res["method"]["hyperparameters"]
    assert hp["local_epochs"] == 1.0 and "local_steps" not in hp and "compute_budget" not in hp
    with pytest.raises(ValueError, match="not both"):
        config(data, tmp_path / "x", local_steps=2, local_epochs=1.0).validate()
