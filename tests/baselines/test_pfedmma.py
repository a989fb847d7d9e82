"""pFedMMA (baselines.pfedmma): the adapter branch and its gradient scaling by hand, only the
shared projections aggregated, and runs on synth-cls under base/novel."""

from __future__ import annotations

import json

import pytest
import torch

from baselines.pfedmma import MultiModalAdapters, PFedMMA
from drake.models import load_model


def test_branch_is_the_scaled_adapter_and_its_gradients_are_unscaled():
    """y = s · up(relu(shared(relu(down(LN x))))); the projections get the gradients of the
    unscaled adapter (s = 1), and x gets the plain gradient of the s-scaled branch."""
    core = load_model("tiny-clip", pretrained=False, seed=0)._core()
    torch.manual_seed(0)
    mm = MultiModalAdapters(core, blocks=2, dim=4, scale=0.001)
    (block, norm), _ = mm.pairs[0]
    x = torch.randn(2, 3, norm.normalized_shape[0], requires_grad=True)
    w = torch.randn(2, 3, norm.normalized_shape[0])
    y = mm.branch(x, norm, "image", 0)
    down, up, shared = mm.image_down[0], mm.image_up[0], mm.shared[0]
    f = up(torch.relu(shared(torch.relu(down(norm(x))))))
    assert torch.allclose(y, 0.001 * f, atol=1e-9)
    (w * y).sum().backward()
    got_up, got_x = up.weight.grad.clone(), x.grad.clone()
    up.weight.grad = None
    x.grad = None
    x2 = x.detach().clone().requires_grad_(True)
    (w * up(torch.relu(shared(torch.relu(down(norm(x2))))))).sum().backward()
    assert torch.allclose(got_up, up.weight.grad, atol=1e-6)  # as if s were 1
    assert torch.allclose(got_x, 0.001 * x2.grad, atol=1e-8)  # plain s-scaled branch


def test_adapters_sit_in_the_top_blocks_of_both_towers_and_can_be_switched_off():
    bundle = load_model("tiny-clip", pretrained=False, seed=0)
    core = bundle._core()
    from PIL import Image

    samples = [{"id": "a", "images": [Image.new("RGB", (48, 48), (200, 0, 0))]}]
    with torch.no_grad():
        before = bundle.class_logits(samples, ["red circle", "blue square"])
    mm = MultiModalAdapters(core, blocks=2, dim=4, scale=1.0)
    swin = [b for stage in core.vision.encoder.layers for b in stage.blocks]
    assert [p[0][0] for p in mm.pairs] == swin[-2:]
    assert [p[1][0] for p in mm.pairs] == list(core.text.encoder.layers)[-2:]
    bundle._image_cache.clear()
    core.mm_adapters = mm
    assert bundle._tower_adapted()  # images are encoded afresh, never from the cache
    with torch.no_grad():
        on = bundle.class_logits(samples, ["red circle", "blue square"])
        mm.enabled = False
        off = bundle.class_logits(samples, ["red circle", "blue square"])
    assert not torch.allclose(on, before) and torch.allclose(off, before)
    with pytest.raises(ValueError, match="choose 1..2"):
        MultiModalAdapters(core, blocks=3)


@pytest.fixture(scope="module")
def cls_build(tmp_path_factory):
    from drake.build import build
    from drake.registry import get_benchmark

    out = tmp_path_factory.mktemp("cls")
    build(get_benchmark("synth-cls", size="tiny"), out, seed=0)
    return out


def test_only_shared_projections_travel_and_every_client_gets_their_mean(cls_build, tmp_path):
    """One round: each client's message is the data-size-weighted mean of the uploaded shared
    projections (what the clients hold after training), down and up projections stay
    different, uploads carry the shared weights only, and no optimiser state is kept."""
    from safetensors.torch import load_file

    from drake.runtime.local import LocalRuntime, RunConfig

    cfg = RunConfig(data=str(cls_build / "synth-cls"), scenario="base2novel", method="pfedmma",
                    out=str(tmp_path / "r"), rounds=1, local_steps=2, eval_per_task=2,
                    first_round_all=True)
    runtime = LocalRuntime(cfg)
    results = runtime.run()
    assert results["protocol"] == "base_novel" and set(results["metrics"]) == {
        "local", "base", "novel", "hm"}
    flat = load_file(str(next((tmp_path / "r" / "checkpoint").rglob("*.safetensors"))))
    key = "shared.0.weight"
    sizes = torch.tensor([float(len(runtime.data.streams[c].seen(0))) for c in range(10)])
    uploaded = torch.stack([flat[f"client/{c}/adapter/shared/{key}"] for c in range(10)])
    mean = (sizes[:, None, None] * uploaded).sum(0) / sizes.sum()
    for c in range(10):
        assert torch.allclose(flat[f"pending/{c}/shared/{key}"], mean, atol=1e-6)
    local = [flat[f"client/{c}/adapter/local/image_down.0.weight"] for c in range(10)]
    assert len({tuple(t.flatten().tolist()) for t in local}) == 10
    assert not any("/optim/" in k for k in flat)
    dim = runtime.method.dim
    assert results["cost"]["comm_bytes_up_per_round"] == [10 * 2 * (dim * dim + dim) * 4]


def test_pfedmma_refuses_a_llava_model():
    assert PFedMMA.kinds == ("clip",)
    assert PFedMMA.optimizer[0] == "sgd" and PFedMMA.fresh_optimizer


def test_partial_participation_and_a_skipped_client(cls_build, tmp_path, monkeypatch):
    """--frac 0.3 with every client in round 0 (pFedMMA's sampling) and one failing client:
    the run finishes and reports it."""
    from drake.runtime.local import LocalRuntime, RunConfig

    cfg = RunConfig(data=str(cls_build / "synth-cls"), scenario="iid", method="pfedmma",
                    out=str(tmp_path / "r"), rounds=2, local_steps=1, eval_per_task=2,
                    frac=0.3, first_round_all=True, on_client_error="skip")
    runtime = LocalRuntime(cfg)
    original = PFedMMA.local_train

    def flaky(self, client):
        if client.id == 3 and client.round == 0:
            raise RuntimeError("boom")
        return original(self, client)

    monkeypatch.setattr(PFedMMA, "local_train", flaky)
    results = runtime.run()
    errors = json.loads((tmp_path / "r" / "errors.json").read_text())["client_errors"]
    assert [(e["client"], e["round"]) for e in errors] == [(3, 0)]
    assert results["method"]["hyperparameters"]["first_round_all"] is True
