"""The tiny offline LLaVA families, built from configs.

Both families are LLaVA models: a CLIP vision tower (hidden 32, 2 layers, 48 x 48 images in
8 x 8 patches, so 36 patch features per image once the CLS feature is dropped), a two-layer GELU
projector, and a decoder-only language model:

============================  =======================  ========================
                              ``tiny-llava-llama``     ``tiny-llava-qwen``
============================  =======================  ========================
language model                Llama                    Qwen2 (q/k/v biases)
hidden size                   64                       96
decoder layers                2                        3
attention heads (key/value)   4 (2)                    6 (2)
MLP intermediate size         128                      192
============================  =======================  ========================

They differ in width *and* depth, so an adapter of one cannot be loaded into the other, which is
the model heterogeneity the FedMosaic paper studies with Llama-3.2-1B and -3B. Both share the
word-level tokenizer of :mod:`drake.models.tokenizer` (same vocabulary, same ids).

Why 48 x 48 and not 32 x 32: drake-synth draws shapes of a few pixels on 64 x 64 images; at
32 x 32 they shrink to 2-5 pixels and the tiny models never learned to read them (held-out public
accuracy stayed at chance after 3000 pretraining steps), while at 48 x 48 they learn colours and
counts within the pretraining budget. 8-pixel patches matter more than resolution: 64 x 64 in
16-pixel patches (16 tokens) failed as 32 x 32 did.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import torch
from transformers import (
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    Qwen2Config,
)

from drake.errors import UnknownNameError

__all__ = [
    "TINY_IMAGE_SIZE",
    "TINY_PATCH_SIZE",
    "TINY_IMAGE_SEQ_LENGTH",
    "TINY_TEXT",
    "tiny_config",
    "build_tiny_model",
    "synth_vocabulary",
]

TINY_IMAGE_SIZE = 48
TINY_PATCH_SIZE = 8
TINY_IMAGE_SEQ_LENGTH = (TINY_IMAGE_SIZE // TINY_PATCH_SIZE) ** 2
MAX_POSITIONS = 1024

#: Language-model shape of each tiny family.
TINY_TEXT: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "tiny-llava-llama": MappingProxyType({
        "kind": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128,
    }),
    "tiny-llava-qwen": MappingProxyType({
        "kind": "qwen2", "hidden_size": 96, "num_hidden_layers": 3, "num_attention_heads": 6,
        "num_key_value_heads": 2, "intermediate_size": 192,
    }),
})


def tiny_config(name: str, tokenizer: Any) -> LlavaConfig:
    """The :class:`~transformers.LlavaConfig` of tiny family ``name`` for ``tokenizer``'s vocabulary.

    The image token id, padding, start and end ids are taken from the tokenizer.
    """
    if name not in TINY_TEXT:
        raise UnknownNameError(f"{name!r} is not a tiny model; choose one of {sorted(TINY_TEXT)}")
    shape = dict(TINY_TEXT[name])
    kind = shape.pop("kind")
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    common = {
        "vocab_size": len(tokenizer),
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        **shape,
    }
    text = LlamaConfig(**common) if kind == "llama" else Qwen2Config(**common)
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=TINY_IMAGE_SIZE,
        patch_size=TINY_PATCH_SIZE,
        projection_dim=32,
    )
    return LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=image_token_id,
        image_seq_length=TINY_IMAGE_SEQ_LENGTH,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        tie_word_embeddings=True,
    )


def build_tiny_model(name: str, tokenizer: Any, seed: int = 0) -> LlavaForConditionalGeneration:
    """A randomly initialised tiny LLaVA, the same for the same ``seed``.

    The initialisation draws from a forked, seeded torch RNG, so the global RNG is untouched.
    """
    config = tiny_config(name, tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = LlavaForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def synth_vocabulary() -> list[str]:
    """drake-synth's vocabulary (every word its prompts and answers can contain)."""
    try:
        from drake.synth import vocabulary
    except ImportError as err:  # pragma: no cover - drake.synth ships with the suite
        raise RuntimeError(
            f"drake.synth is not importable ({err}); the tiny models' tokenizer needs its "
            "vocabulary. Reinstall the suite (`pip install -e .`)."
        ) from err
    return list(vocabulary())
