"""LoRA adapters: language-model linear layers only, named states that align, round trips."""

from __future__ import annotations

import pytest
import torch
from peft import PeftModel

from drake.models import adapter_state, add_lora, load_adapter_state, load_model, lora_module_names

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _logits(bundle, samples):
    batch = bundle.collate(samples, train=True)
    with torch.no_grad():
        return bundle.model(**batch, use_cache=False).logits


def test_adapters_sit_on_language_model_linear_layers_only(fresh_llama):
    model = fresh_llama.add_lora("client0")
    assert isinstance(model, PeftModel) and fresh_llama.model is model
    names = lora_module_names(model, "client0")
    assert len(names) == len(LINEAR) * fresh_llama.num_layers
    assert all(".language_model." in n and n.endswith(LINEAR) for n in names)
    for name, param in model.named_parameters():
        if "lora_" in name:
            assert "vision_tower" not in name and "multi_modal_projector" not in name
            assert "lm_head" not in name
        else:
            assert not param.requires_grad  # the base stays frozen
    config = model.peft_config["client0"]
    assert (config.r, config.lora_alpha, config.lora_dropout) == (8, 16, 0.0)


def test_vision_targets_are_refused(fresh_llama):
    with pytest.raises(ValueError, match="vision-tower/projector"):
        add_lora(fresh_llama.model, "bad", r=4, alpha=8, target_regex=r".*\.(q_proj|v_proj)")
    with pytest.raises(ValueError, match="matches no module"):
        add_lora(fresh_llama.model, "bad", r=4, alpha=8, target_regex=r".*\.nothing")


def test_new_adapter_leaves_outputs_unchanged(fresh_llama, samples):
    before = _logits(fresh_llama, samples)
    fresh_llama.add_lora("client0", seed=1)
    torch.testing.assert_close(_logits(fresh_llama, samples), before)


def test_second_adapter_joins_the_same_model(fresh_llama):
    first = fresh_llama.add_lora("glob")
    second = fresh_llama.add_lora("pers")
    assert first is second
    assert set(second.peft_config) == {"glob", "pers"}
    assert second.active_adapter == "glob"
    with pytest.raises(ValueError, match="already exists"):
        fresh_llama.add_lora("glob")


def test_states_align_across_clients_and_adapters(vocab):
    one = load_model("tiny-llava-llama", pretrained=False, seed=0, vocab=vocab)
    two = load_model("tiny-llava-llama", pretrained=False, seed=0, vocab=vocab)
    one.add_lora("alice", seed=1)
    one.add_lora("alice_personal", seed=2)
    two.add_lora("bob", seed=3)
    a = adapter_state(one.model, "alice")
    p = adapter_state(one.model, "alice_personal")
    b = adapter_state(two.model, "bob")
    assert list(a) == list(b) == list(p)
    assert all("alice" not in k and "bob" not in k and not k.startswith("base_model") for k in a)
    assert all(a[k].shape == b[k].shape and a[k].device.type == "cpu" for k in a)
    assert any(not torch.equal(a[k], b[k]) for k in a if "lora_A" in k)  # different seeds


def test_seeded_adapters_are_identical_and_leave_global_rng(vocab):
    torch.manual_seed(123)
    expected = torch.rand(3)
    states = []
    for _ in range(2):
        bundle = load_model("tiny-llava-llama", pretrained=False, seed=0, vocab=vocab)
        torch.manual_seed(123)
        bundle.add_lora("x", seed=7)
        assert torch.equal(torch.rand(3), expected)
        states.append(adapter_state(bundle.model, "x"))
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_round_trip_and_effect(fresh_llama, samples):
    model = fresh_llama.add_lora("client0", seed=0)
    state = adapter_state(model, "client0")
    generator = torch.Generator().manual_seed(0)
    changed = {k: torch.randn(v.shape, generator=generator) * 0.1 for k, v in state.items()}
    before = _logits(fresh_llama, samples)
    load_adapter_state(model, "client0", changed)
    back = adapter_state(model, "client0")
    assert all(torch.equal(back[k], changed[k]) for k in changed)
    assert not torch.allclose(_logits(fresh_llama, samples), before)
    # the returned state is a copy: editing it does not touch the model
    back[next(iter(back))].zero_()
    assert torch.equal(adapter_state(model, "client0")[next(iter(back))], changed[next(iter(back))])
    load_adapter_state(model, "client0", state)
    torch.testing.assert_close(_logits(fresh_llama, samples), before)


def test_only_the_named_adapter_is_loaded(fresh_llama):
    model = fresh_llama.add_lora("glob", seed=0)
    fresh_llama.add_lora("pers", seed=1)
    personal = adapter_state(model, "pers")
    zeros = {k: torch.zeros_like(v) for k, v in adapter_state(model, "glob").items()}
    load_adapter_state(model, "glob", zeros)
    after = adapter_state(model, "pers")
    assert all(torch.equal(personal[k], after[k]) for k in personal)


def test_states_do_not_cross_architectures(fresh_llama, vocab):
    qwen = load_model("tiny-llava-qwen", pretrained=False, seed=0, vocab=vocab)
    qwen.add_lora("qwen_client")
    fresh_llama.add_lora("llama_client")
    with pytest.raises((KeyError, ValueError)):
        load_adapter_state(fresh_llama.model, "llama_client",
                           adapter_state(qwen.model, "qwen_client"))
    state = adapter_state(fresh_llama.model, "llama_client")
    state.pop(next(iter(state)))
    with pytest.raises(KeyError, match="missing"):
        load_adapter_state(fresh_llama.model, "llama_client", state)
    with pytest.raises(KeyError, match="no LoRA adapter 'nope'"):
        adapter_state(fresh_llama.model, "nope")


def test_training_through_the_bundle_moves_only_the_active_adapter(fresh_llama, samples):
    model = fresh_llama.add_lora("mine", seed=0)
    fresh_llama.add_lora("other", seed=1)
    base = {k: v.clone() for k, v in model.state_dict().items() if "lora_" not in k}
    other = adapter_state(model, "other")
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(p.requires_grad for p in trainable)
    optimizer = torch.optim.SGD(trainable, lr=0.5)
    model.train()
    for _ in range(3):
        loss = fresh_llama.loss(fresh_llama.collate(samples, train=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    mine = adapter_state(model, "mine")
    assert any(v.abs().sum() > 0 for k, v in mine.items() if "lora_B" in k)
    assert all(torch.equal(other[k], v) for k, v in adapter_state(model, "other").items())
    assert all(torch.equal(base[k], v) for k, v in model.state_dict().items() if k in base)
    assert len(fresh_llama.generate(samples, max_new_tokens=2)) == 3
    assert fresh_llama.last_hidden(samples).shape == (3, 128)
