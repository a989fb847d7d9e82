"""PQ-LoRA inside tiny Llama/Qwen LLaVAs: peft composition, gates, and P/Q shared across widths."""

from __future__ import annotations

import pytest
import torch
from peft.tuners.lora import LoraLayer

from baselines.base import weighted_average
from baselines.fedmosaic import (
    PQLoRALinear,
    activate,
    adapters_off,
    block_map,
    gate_lora_layers,
    gate_parameters,
    gate_state,
    inject_pqlora,
    load_gate_state,
    load_pq_state,
    lora_target_regex,
    pq_modules,
    pq_state,
)
from drake.models import add_lora

R = 4


def logits(bundle, samples):
    batch = bundle.collate(samples, train=True)
    with torch.no_grad():
        return bundle.model(**{k: v for k, v in batch.items() if k != "labels"},
                            use_cache=False).logits


def prepare(bundle, num_blocks: int, *, pq_first: bool = False):
    """Conventional LoRA (peft, local + global) on non-block-end layers, PQ-LoRA on block ends."""
    bmap = block_map(bundle.num_layers, num_blocks)
    regex = lora_target_regex(bmap)
    if pq_first:
        inject_pqlora(bundle.model, bmap, r=R, adapters=("local", "global"), seed=0)
    if regex is not None:
        for i, name in enumerate(("local", "global")):
            bundle.model = add_lora(bundle.model, name, r=R, alpha=2 * R, target_regex=regex,
                                    seed=i)
        gate_lora_layers(bundle.model, "local", "global")
    if not pq_first:
        inject_pqlora(bundle.model, bmap, r=R, adapters=("local", "global"), seed=0)
    return bmap


def randomise(model, adapter: str, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in pq_modules(model).values():
            m.P[adapter].copy_(0.1 * torch.randn(m.P[adapter].shape, generator=gen))
            m.Q[adapter].copy_(0.1 * torch.randn(m.Q[adapter].shape, generator=gen))


def test_pq_states_of_llama_and_qwen_align_average_and_load_back(make_bundle, public_samples):
    llama, qwen = make_bundle("tiny-llava-llama"), make_bundle("tiny-llava-qwen")
    assert (llama.hidden_size, llama.num_layers) == (128, 4)
    assert (qwen.hidden_size, qwen.num_layers) == (160, 3)
    base_llama, base_qwen = logits(llama, public_samples[:2]), logits(qwen, public_samples[:2])
    prepare(llama, 2)  # blocks end at layers (1, 3); layers 0 and 2 keep peft LoRA
    prepare(qwen, 2)   # blocks end at layers (0, 2); layer 1 keeps peft LoRA
    assert isinstance(qwen.model.base_model.model.model.language_model.layers[1].self_attn.q_proj,
                      LoraLayer)
    assert isinstance(qwen.model.base_model.model.model.language_model.layers[2].self_attn.q_proj,
                      PQLoRALinear)
    assert isinstance(llama.model.base_model.model.model.language_model.layers[2].self_attn.q_proj,
                      LoraLayer)
    assert isinstance(llama.model.base_model.model.model.language_model.layers[3].self_attn.q_proj,
                      PQLoRALinear)
    activate(llama.model, ["local", "global"], trainable=["local"])
    activate(qwen.model, ["local", "global"], trainable=["local"])
    # fresh adapters (P = Q = 0, peft B = 0) leave both models' outputs unchanged
    torch.testing.assert_close(logits(llama, public_samples[:2]), base_llama)
    torch.testing.assert_close(logits(qwen, public_samples[:2]), base_qwen)

    randomise(llama.model, "local", 1)
    randomise(qwen.model, "local", 2)
    s_llama, s_qwen = pq_state(llama.model, "local"), pq_state(qwen.model, "local")
    assert list(s_llama) == list(s_qwen)  # block-keyed, width-free
    assert len(s_llama) == 2 * 7 * 2  # blocks x linear modules x {P, Q}
    assert s_llama["block1.mlp.down_proj.P"].shape == (R, R)
    assert s_qwen["block1.self_attn.k_proj.Q"].shape == (R,)

    avg = weighted_average([s_llama, s_qwen], [1.0, 1.0])
    key = "block1.self_attn.q_proj.P"
    torch.testing.assert_close(avg[key], (s_llama[key] + s_qwen[key]) / 2)
    load_pq_state(llama.model, "global", avg)
    load_pq_state(qwen.model, "global", avg)
    for model in (llama.model, qwen.model):
        got = pq_state(model, "global")
        assert all(torch.equal(got[k], avg[k]) for k in avg)
    # the local adapters are untouched
    assert torch.equal(pq_state(llama.model, "local")[key], s_llama[key])

    # both models still run, and the shared modules now change their outputs
    out_llama, out_qwen = logits(llama, public_samples[:2]), logits(qwen, public_samples[:2])
    assert torch.isfinite(out_llama).all() and torch.isfinite(out_qwen).all()
    assert not torch.allclose(out_llama, base_llama)
    assert not torch.allclose(out_qwen, base_qwen)
    with adapters_off(qwen.model):
        torch.testing.assert_close(logits(qwen, public_samples[:2]), base_qwen)
    assert not torch.allclose(logits(qwen, public_samples[:2]), base_qwen)  # back on


def test_only_local_modules_and_gates_train(make_bundle, public_samples):
    qwen = make_bundle("tiny-llava-qwen")
    prepare(qwen, 2, pq_first=True)  # the other order of composition with peft
    activate(qwen.model, ["local", "global"], trainable=["local"])
    trainable = {n for n, p in qwen.model.named_parameters() if p.requires_grad}
    assert trainable and all(".local." in n and "lora_" in n for n in trainable)
    assert any("lora_PQ.local.P" in n for n in trainable)
    assert any("lora_A.local" in n for n in trainable)
    assert len(gate_parameters(qwen.model)) == 7 * 3  # 14 PQ-LoRA + 7 peft layers, one β each
    randomise(qwen.model, "global", 3)
    loss = qwen.loss(qwen.collate(public_samples[:2], train=True))
    loss.backward()
    for n, p in qwen.model.named_parameters():
        if p.grad is not None:
            assert n in trainable, n
    assert all(p.grad is not None for n, p in qwen.model.named_parameters()
               if "lora_PQ.local" in n or "lora_gate" in n)
    # gates and the global adapter are frozen when only the local adapter is active
    activate(qwen.model, ["local"], trainable=["local"])
    assert not any(p.requires_grad for p in gate_parameters(qwen.model))


def test_peft_gate_matches_eq9(make_bundle):
    qwen = make_bundle("tiny-llava-qwen")
    prepare(qwen, 2)
    layer = qwen.model.base_model.model.model.language_model.layers[1].mlp.up_proj
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name in ("local", "global"):
            layer.lora_B[name].weight.copy_(torch.randn(layer.lora_B[name].weight.shape,
                                                        generator=gen))
        layer.lora_gate["local"].beta.fill_(0.7)
    x = torch.randn(2, 3, 160, generator=gen)
    s = layer.scaling["local"]
    sig = torch.sigmoid(torch.tensor(0.7))

    def delta(name):  # B A x from the raw weights, bypassing the hooked modules
        return x @ layer.lora_A[name].weight.T @ layer.lora_B[name].weight.T

    activate(qwen.model, ["local", "global"], trainable=["local"])
    with torch.no_grad():
        expected = layer.base_layer(x) + s * ((1 - sig) * delta("local") + sig * delta("global"))
        torch.testing.assert_close(layer(x), expected)
        activate(qwen.model, ["local"], trainable=["local"])  # one adapter: plain LoRA, no gate
        torch.testing.assert_close(layer(x), layer.base_layer(x) + s * delta("local"))


def test_gate_state_round_trip_and_injection_errors(make_bundle):
    qwen = make_bundle("tiny-llava-qwen")
    bmap = prepare(qwen, 2)
    state = gate_state(qwen.model)
    assert len(state) == 21 and all(v.shape == () for v in state.values())
    assert "model.language_model.layers.2.self_attn.q_proj" in state
    load_gate_state(qwen.model, {k: torch.tensor(float(i)) for i, k in enumerate(state)})
    assert [float(v) for v in gate_state(qwen.model).values()] == [float(i) for i in range(21)]
    with pytest.raises(ValueError, match="not a plain nn.Linear"):
        inject_pqlora(qwen.model, bmap, r=R)  # already injected
    with pytest.raises(ValueError, match="block map is for 2 layers"):
        inject_pqlora(make_bundle("tiny-llava-qwen").model, block_map(2, 2), r=R)
    with pytest.raises(KeyError, match="missing"):
        load_pq_state(qwen.model, "local", {"block0.self_attn.q_proj.P": torch.zeros(R, R)})


def test_drake_adapter_state_carries_pq_and_gates(make_bundle):
    """The runtime swaps clients with drake's adapter_state: P, Q and β must ride along."""
    from drake.models import adapter_state, load_adapter_state

    qwen = make_bundle("tiny-llava-qwen")
    prepare(qwen, 2)
    local, glob = adapter_state(qwen.model, "local"), adapter_state(qwen.model, "global")
    pq_keys = [k for k in local if ".lora_PQ." in k]
    gate_keys = [k for k in local if ".lora_gate." in k]
    assert len(pq_keys) == 2 * 7 * 2 and len(gate_keys) == 21
    assert "model.language_model.layers.2.self_attn.q_proj.lora_PQ.P" in local
    assert not any(".lora_gate." in k for k in glob) and len(glob) == len(local) - 21
    randomise(qwen.model, "local", 5)
    moved = adapter_state(qwen.model, "local")
    load_adapter_state(qwen.model, "local", local)  # back to zeros
    assert not pq_state(qwen.model, "local")["block1.mlp.up_proj.P"].any()
    load_adapter_state(qwen.model, "local", moved)
    torch.testing.assert_close(pq_state(qwen.model, "local")["block1.mlp.up_proj.P"],
                               moved["model.language_model.layers.2.mlp.up_proj.lora_PQ.P"])
