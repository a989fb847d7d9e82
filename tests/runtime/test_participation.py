"""Partial participation and skipped clients: every registered method finishes, and groups
without an upload keep their last message."""

import json

import pytest
import torch

from baselines.base import ClientInfo, Payload, get_method, method_names
from drake.runtime import LocalRuntime, RunConfig
from drake.runtime.local import sample_clients

LLAMA, QWEN = "tiny-llava-llama", "tiny-llava-qwen"


@pytest.fixture(scope="module")
def data(micro_synth):
    """drake-synth's clients 0-3 (tests/conftest.py): Llama clients 0-1, Qwen clients 2-3."""
    return micro_synth


def test_sampling_is_seeded_and_first_round_all_takes_everyone():
    assert sample_clients(10, 0.3, 0, 4) == sample_clients(10, 0.3, 0, 4)
    assert len(sample_clients(10, 0.3, 0, 4)) == 3
    assert sample_clients(10, 0.3, 0, 0, first_round_all=True) == list(range(10))
    assert len(sample_clients(10, 0.3, 0, 1, first_round_all=True)) == 3
    assert sample_clients(10, 0.01, 0, 2) != []  # at least one client
    assert sample_clients(4, 1.0, 0, 3) == [0, 1, 2, 3]


def _state(v):
    return {"w": torch.full((2,), float(v))}


def test_a_group_without_uploads_gets_its_last_mean_again():
    fedavg = get_method("fedavg")()
    infos = {0: ClientInfo(0, LLAMA, 10), 1: ClientInfo(1, LLAMA, 30), 2: ClientInfo(2, QWEN, 5)}
    # round 0: only the llama clients upload; qwen never uploaded, so client 2 gets nothing
    msgs = fedavg.aggregate({0: Payload({"local": _state(1)}), 1: Payload({"local": _state(5)})},
                            infos, 0)
    assert sorted(msgs) == [0, 1]
    assert msgs[0].tensors["local"]["w"].tolist() == [4.0, 4.0]  # (10*1 + 30*5) / 40
    # round 1: only qwen uploads; the llama group keeps its round-0 mean
    msgs = fedavg.aggregate({2: Payload({"local": _state(7)})}, infos, 1)
    assert sorted(msgs) == [0, 1, 2]
    assert msgs[1].tensors["local"]["w"].tolist() == [4.0, 4.0]
    assert msgs[2].tensors["local"]["w"].tolist() == [7.0, 7.0]
    # the last means are server state: a resumed server sends the same
    again = get_method("fedavg")()
    again.load_server_state(fedavg.server_state())
    msgs = again.aggregate({}, infos, 2)
    assert msgs[0].tensors["local"]["w"].tolist() == [4.0, 4.0]
    assert msgs[2].tensors["local"]["w"].tolist() == [7.0, 7.0]


#: the server-distillation methods on a few public samples (what the test checks is
#: participation, not distillation)
KD_HPARAMS = {"perada": {"kd_samples": 8, "kd_steps": 2},
              "takfl": {"kd_samples": 8, "kd_steps": 2},
              "fedmkt": {"kd_samples": 8}}

# the LLaVA-capable methods; CLIP-only ones (pFedMMA) have their own test on synth-cls
METHODS = [m for m in method_names()
           if not m.startswith("test-") and "llava" in get_method(m).kinds]


@pytest.mark.parametrize("method", METHODS)
def test_every_method_finishes_with_frac_and_a_skipped_client(data, tmp_path, method,
                                                               monkeypatch):
    """``--frac 0.75`` on the hetero scenario (3 of the 4 clients a round; client 0 is never
    drawn, so it is scored on what it was sent alone), and in round 0 the one sampled client
    of its architecture fails and is skipped, so that group has no upload that round
    (``fedmosaic-homo`` is single-architecture: its first sampled client fails)."""
    homo = method == "fedmosaic-homo"
    cfg = RunConfig(data=str(data), scenario="dynamic", method=method, out=str(tmp_path / "r"),
                    seed=0, rounds=2, local_steps=1, batch_size=2, eval_per_task=1,
                    eval_every=2, pretrained=False, mc_scoring="loglik", frac=0.75,
                    on_client_error="skip", model_mix="homo-small" if homo else None,
                    method_hparams={"align_samples": 8} if method.startswith("fedmosaic")
                    else KD_HPARAMS.get(method, {}))
    runtime = LocalRuntime(cfg)
    n = runtime.data.num_clients
    first = sample_clients(n, cfg.frac, cfg.seed, 0)
    assert len(first) < n and set(first) | set(sample_clients(n, cfg.frac, cfg.seed, 1)) != \
        set(range(n))  # partial participation, and a client that never trains
    archs = [runtime.models[c] for c in first]
    lonely = first[0] if homo else next(c for c, a in zip(first, archs) if archs.count(a) == 1)
    cls = type(runtime.method)
    original = cls.local_train

    def flaky(self, client):
        if client.id == lonely and client.round == 0:
            raise RuntimeError("boom")
        return original(self, client)

    monkeypatch.setattr(cls, "local_train", flaky)
    res = runtime.run()
    errors = json.loads((tmp_path / "r" / "errors.json").read_text())["client_errors"]
    assert [(e["client"], e["round"]) for e in errors] == [(lonely, 0)]
    assert res["method"]["hyperparameters"]["frac"] == 0.75
    assert res["curves"]["rounds"] == [2]
    from leaderboard.run_result import RunResult

    RunResult.model_validate(res)
