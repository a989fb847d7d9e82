"""load_model: tiny models from config or cache, real backbones through a Hub cache, fast
offline failure."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
)

from drake.errors import NetworkUnavailable, UnknownNameError
from drake.models import ModelNotPretrained, build_tokenizer, load_model
from drake.models.loading import _chat_format
from drake.models.tiny import tiny_config


def _clip_llava(family: str, tokenizer, seed: int) -> LlavaForConditionalGeneration:
    """A tiny LLaVA shaped like the real checkpoints: a CLIP ViT tower (48 px, 8 px patches,
    CLS feature dropped: 36 image tokens) in front of a tiny family's language model."""
    config = tiny_config(family, tokenizer)
    config.vision_config = CLIPVisionConfig(hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=2, num_attention_heads=2,
                                            image_size=48, patch_size=8, projection_dim=32)
    config.vision_feature_select_strategy = "default"
    config.image_seq_length = 36
    torch.manual_seed(seed)
    return LlavaForConditionalGeneration(config)


def _hub_snapshot(snapshot: Path, vocab: list[str], family: str) -> Path:
    """Write a tiny LLaVA checkpoint into a Hub cache's snapshot folder."""
    tokenizer = build_tokenizer(vocab)
    model = _clip_llava(family, tokenizer, seed=3)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 48},
                                           crop_size={"height": 48, "width": 48}),
        tokenizer=tokenizer, patch_size=8, vision_feature_select_strategy="default",
        image_token="<image>", num_additional_image_tokens=1,
    )
    model.save_pretrained(snapshot)
    processor.save_pretrained(snapshot)
    return snapshot


def test_real_backbone_loads_by_repo_id_from_the_hub_cache(offline_hub, hub_snapshot, vocab,
                                                           samples):
    snapshot = _hub_snapshot(hub_snapshot(offline_hub, "thkim0305/qwen2.5_0.5B_vl"), vocab,
                             "tiny-llava-qwen")
    for name in ("thkim0305/qwen2.5_0.5B_vl", "qwen2.5-0.5b-vl"):
        bundle = load_model(name)
        assert bundle.name == "qwen2.5-0.5b-vl" and bundle.info.hf_id == "thkim0305/qwen2.5_0.5B_vl"
        assert (bundle.hidden_size, bundle.num_layers, bundle.image_size) == (160, 3, 48)
        assert bundle.image_seq_length == 36
        assert not any(p.requires_grad for p in bundle.model.parameters())
    reference = _clip_llava("tiny-llava-qwen", build_tokenizer(vocab), seed=3)
    loaded = dict(bundle.model.named_parameters())
    for name, param in reference.named_parameters():
        assert torch.equal(loaded[name], param), name
    batch = bundle.collate(samples, train=True)
    counts = (batch["input_ids"] == bundle.image_token_id).sum(dim=1).tolist()
    assert counts == [36, 72, 0]
    assert batch["pixel_values"].shape == (3, 3, 48, 48)
    assert len(bundle.generate(samples, max_new_tokens=2)) == 3
    assert snapshot.is_dir()


def test_uncached_real_backbone_fails_fast_offline(offline_hub):
    start = time.perf_counter()
    with pytest.raises(NetworkUnavailable) as info:
        load_model("llama3.2-1b-vl")
    elapsed = time.perf_counter() - start
    message = str(info.value)
    assert "thkim0305/llama3.2_1B_vl" in message and "HF_HUB_OFFLINE" in message
    assert "tiny-llava-llama" in message and "drake models pretrain" in message
    assert elapsed < 30  # generous: it makes no request at all


def test_missing_pretrained_tiny_model_names_the_command(tmp_path):
    with pytest.raises(ModelNotPretrained, match="drake models pretrain --model tiny-llava-qwen"):
        load_model("tiny-llava-qwen", cache_dir=tmp_path)


def test_unknown_name():
    with pytest.raises(UnknownNameError, match="drake models list"):
        load_model("no-such-model")


def test_tiny_models_from_config_are_seeded(vocab):
    a = load_model("tiny-llava-llama", pretrained=False, seed=5, vocab=vocab)
    b = load_model("tiny-llava-llama", pretrained=False, seed=5, vocab=vocab)
    c = load_model("tiny-llava-llama", pretrained=False, seed=6, vocab=vocab)
    pa, pb, pc = (dict(x.model.named_parameters()) for x in (a, b, c))
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert any(not torch.equal(pa[k], pc[k]) for k in pa)
    with pytest.raises(ValueError, match="pretrained=False"):
        load_model("tiny-llava-llama", vocab=vocab)


def test_chat_template_is_split_around_the_prompt(vocab):
    tokenizer = build_tokenizer(vocab + ["system", "user", "assistant"])
    tokenizer.chat_template = (
        "{% for m in messages %}<s>{{ m['role'] }}:{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<s>assistant:{% endif %}"
    )
    chat = _chat_format(tokenizer)
    assert (chat.prefix, chat.suffix) == ("<s>user:", "\n<s>assistant:")
    assert chat.answer_prefix == "" and not chat.add_bos
    plain = _chat_format(build_tokenizer(vocab))
    assert (plain.prefix, plain.suffix, plain.answer_prefix) == ("USER: ", " ASSISTANT:", " ")
