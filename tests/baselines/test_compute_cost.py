"""FedMosaic's Tab. 10 compute, measured (baselines.costs.measure_compute): Ditto's two passes
per batch cost exactly twice SFT's FLOPs per iteration, FedAvg's server step costs none, and
PerAda's server distillation is counted on the server's side."""

import pytest

from baselines.costs import measure_compute
from drake.build import build
from drake.registry import get_benchmark
from drake.runtime import RunConfig


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("d"), seed=4)


def cost(data, tmp_path, method, **hp):
    return measure_compute(RunConfig(
        data=str(data), scenario="dynamic", method=method, out=str(tmp_path / method), rounds=2,
        local_steps=2, batch_size=2, eval_per_task=1, pretrained=False, mc_scoring="loglik",
        frac=0.3, method_hparams=hp))


def test_relative_compute_per_iteration(data, tmp_path):
    sft = cost(data, tmp_path, "sft")
    assert sft.client_flops > 0 and sft.server_flops == 0
    ditto = cost(data, tmp_path, "ditto")
    assert ditto.client_flops / sft.client_flops == pytest.approx(2.0, rel=1e-12)
    assert ditto.server_flops == 0
    assert ditto.params > sft.params  # a second adapter per model
    perada = cost(data, tmp_path, "perada", kd_steps=2, kd_samples=8)
    assert perada.client_flops / sft.client_flops == pytest.approx(2.0, rel=1e-12)
    assert perada.server_flops > 0  # the ensemble and the distillation steps
