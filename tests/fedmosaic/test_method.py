"""FedMosaic on the runtime: aggregation by hand, and end-to-end runs on tiny drake-synth."""

import json
import math

import pytest
import torch

from baselines.base import ClientInfo, Payload, get_method
from drake.errors import DrakeError
from drake.runtime import LocalRuntime, RunConfig


def _upload(pq, lora, ghat):
    return Payload({"local": {"pq.block0.q.P": torch.tensor([pq]),
                              "lora.layers.1.q.lora_A.weight": torch.tensor([lora])},
                    "sima": {"ghat": torch.tensor(ghat)}})


def test_pq_mixes_across_architectures_and_lora_within_one_by_sima_weights():
    method = get_method("fedmosaic")(tau=0.5)
    uploads = {0: _upload(1.0, 10.0, [1.0, 0.0]), 1: _upload(2.0, 20.0, [0.0, 1.0]),
               2: _upload(4.0, 40.0, [1.0, 0.0])}
    clients = {0: ClientInfo(0, "small", 5), 1: ClientInfo(1, "small", 5),
               2: ClientInfo(2, "large", 5)}
    msgs = method.aggregate(uploads, clients, 0)
    # client 0: cosines (1, 0, 1) -> softmax over all three of (2, 0, 2) for P/Q
    e2 = math.exp(2.0)
    w = [e2 / (2 * e2 + 1), 1 / (2 * e2 + 1), e2 / (2 * e2 + 1)]
    got = msgs[0].tensors["global"]
    assert got["pq.block0.q.P"].item() == pytest.approx(w[0] * 1 + w[1] * 2 + w[2] * 4)
    # conventional LoRA only inside "small": softmax of (2, 0) over clients 0 and 1
    v = [e2 / (e2 + 1), 1 / (e2 + 1)]
    assert got["lora.layers.1.q.lora_A.weight"].item() == pytest.approx(v[0] * 10 + v[1] * 20)
    # the lone "large" client keeps its own LoRA but receives everyone's P/Q
    assert msgs[2].tensors["global"]["lora.layers.1.q.lora_A.weight"].item() == pytest.approx(40)
    assert msgs[2].tensors["global"]["pq.block0.q.P"].item() != pytest.approx(4.0)


def test_ablations_use_equal_weights():
    uploads = {0: _upload(1.0, 10.0, [1.0, 0.0]), 1: _upload(3.0, 30.0, [0.0, 1.0])}
    clients = {0: ClientInfo(0, "small", 1), 1: ClientInfo(1, "large", 9)}
    pq_only = get_method("fedmosaic-pqlora")().aggregate(uploads, clients, 0)
    assert pq_only[0].tensors["global"]["pq.block0.q.P"].item() == pytest.approx(2.0)
    assert pq_only[0].tensors["global"]["lora.layers.1.q.lora_A.weight"].item() == 10.0


@pytest.fixture(scope="module")
def data(micro_synth):
    """drake-synth's clients 0-3 (tests/conftest.py): the hetero Llama/Qwen pair, and four
    clients instead of ten to train, align and score in every run."""
    return micro_synth


def config(data, out, method, **kw):
    base = dict(data=str(data), scenario="dynamic", method=method, out=str(out), seed=0,
                rounds=2, local_steps=3, batch_size=2, eval_per_task=1, pretrained=False,
                mc_scoring="loglik", model_cache=str(out.parent / "cache"),
                method_hparams={"every": 2, "align_samples": 16})
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture(scope="module")
def unbroken(data, tmp_path_factory):
    return LocalRuntime(config(data, tmp_path_factory.mktemp("r") / "run", "fedmosaic")).run()


def test_fedmosaic_runs_on_the_hetero_pair_and_records_its_costs(unbroken):
    assert set(unbroken["models_per_client"]) == {"tiny-llava-llama", "tiny-llava-qwen"}
    hp = unbroken["method"]["hyperparameters"]
    assert hp["num_blocks_used"] == 3  # the 3-layer tiny model caps N_B
    assert hp["b_features"] == "adapter"  # B aligned on B's outputs, as §4.2.2 and Alg. 4
    # seed-dependent results of the alignment are diagnostics, not hyper-parameters
    diag = unbroken["diagnostics"]
    assert diag["align.tiny-llava-qwen.mse_after"] < diag["align.tiny-llava-qwen.mse_before"]
    assert not any(k.startswith("align.") for k in hp)
    assert unbroken["cost"]["flops_extra_pct"] > 0
    up = unbroken["cost"]["comm_bytes_up_per_round"]
    assert all(b > 0 for b in up)


def test_fedmosaic_resumes_to_the_same_numbers(data, tmp_path, unbroken):
    out = tmp_path / "run"
    with pytest.raises(DrakeError, match="stopped after round 0"):
        LocalRuntime(config(data, out, "fedmosaic")).run(_stop_after=0)
    runtime = LocalRuntime(config(data, out, "fedmosaic"))
    resumed = runtime.run()
    assert resumed["metrics"] == unbroken["metrics"]
    assert resumed["curves"] == unbroken["curves"]
    # each client's SIMA average ĝ is checkpointed with the client, not held by the method
    from safetensors.torch import load_file

    keys = set(load_file(str(out / "checkpoint" / "state.safetensors")))
    clients = range(len(unbroken["models_per_client"]))
    assert len(clients) == 4
    assert {f"client/{c}/state/sima.ghat" for c in clients} <= keys
    assert not any(k.startswith("server/tracker") for k in keys)
    tracker = runtime.method.tracker
    assert not (tracker._decayed or tracker._sum or tracker._count)


def test_ablations_run_and_homo_refuses_two_architectures(data, tmp_path):
    for name in ("fedmosaic-pqlora", "fedmosaic-vanilla"):
        res = LocalRuntime(config(data, tmp_path / name, name)).run()
        assert len(res["curves"]["self"]) == 2
        json.dumps(res)
    with pytest.raises(ValueError, match="one architecture"):
        LocalRuntime(config(data, tmp_path / "homo", "fedmosaic-homo"))


@pytest.mark.parametrize("similarity", ["columnwise", "flat"])
def test_both_sima_similarities_run_two_rounds(data, tmp_path, similarity):
    """`--hp similarity=columnwise` once crashed (the sanitiser flattened the gradient the
    columnwise cosine needs 2-D); both run, and the results say how ĝ was subsampled."""
    res = LocalRuntime(config(data, tmp_path / similarity, "fedmosaic",
                              method_hparams={"every": 2, "align": False,
                                              "similarity": similarity})).run()
    assert len(res["curves"]["self"]) == 2
    hp = res["method"]["hyperparameters"]
    assert hp["similarity"] == similarity
    assert hp["subsample"] == ("prefix_rows" if similarity == "columnwise" else "random")


def test_b_alignment_on_the_base_layer_is_a_recorded_option(data, tmp_path):
    res = LocalRuntime(config(data, tmp_path / "layer", "fedmosaic", rounds=1,
                              method_hparams={"every": 2, "align_samples": 16,
                                              "b_features": "layer"})).run()
    hp = res["method"]["hyperparameters"]
    assert hp["b_features"] == "layer" and res["diagnostics"]["align.tiny-llava-qwen.mse_after"] >= 0
    with pytest.raises(ValueError, match="b_features"):
        get_method("fedmosaic")(b_features="outputs")


def test_pq_trains_at_its_own_rate_in_a_group_of_its_own():
    """One optimiser, two groups: LoRA and gates at the run's lr, P/Q at 2.5 times it (the
    paper's 5e-5 beside 2e-5); an SGD step moves P/Q 2.5 times as far on the same gradient."""
    from drake.runtime.client import ClientRecord, RuntimeClient

    lora, pq = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))

    class Control:
        @staticmethod
        def params(name):
            return [lora, pq]

        @staticmethod
        def param_groups(name):
            return [(1.0, [lora]), (2.5, [pq])]

    client = RuntimeClient(0, "m", None, Control(), ClientRecord(), [], None, round_=0,
                           steps=1, batch_size=1, lr=0.01, seed=0, optimizer=("sgd", {}))
    opt = client._optimizer("local")
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.025]
    loss = (lora * torch.tensor([1.0, 2.0])).sum() + (pq * torch.tensor([1.0, 2.0])).sum()
    loss.backward()
    opt.step()
    torch.testing.assert_close(lora.detach(), torch.tensor([-0.01, -0.02]))
    torch.testing.assert_close(pq.detach(), torch.tensor([-0.025, -0.05]))
    assert get_method("fedmosaic")().pq_lr_scale == 2.5
    with pytest.raises(ValueError, match="pq_lr_scale"):
        get_method("fedmosaic")(pq_lr_scale=0)


def test_fedmosaic_gets_094_of_sfts_steps_and_its_adapters_split_pq_out(data, tmp_path):
    budget = dict(local_steps=None, compute_budget=100)
    sft = LocalRuntime(config(data, tmp_path / "sft", "sft", method_hparams={}, **budget))
    mosaic = LocalRuntime(config(data, tmp_path / "mosaic", "fedmosaic",
                                 method_hparams={"align": False}, **budget))
    assert (sft.steps, mosaic.steps) == (100, 94)
    control = next(iter(mosaic.controls.values()))
    groups = control.param_groups("local")
    assert [scale for scale, _ in groups] == [1.0, 2.5]
    pq_ids = {id(p) for p in groups[1][1]}
    assert pq_ids and len(pq_ids) == len(groups[1][1])
    assert not pq_ids & {id(p) for p in groups[0][1]}
    assert {id(p) for p in control.params("local")} == pq_ids | {id(p) for p in groups[0][1]}
