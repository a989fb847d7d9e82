"""The tiny offline LLaVA families, built from configs.

Both families are LLaVA models: a Swin vision tower (:data:`VISION_CONFIG`: 48 x 48 pictures in
2 x 2 patches, four stages, the last one a 3 x 3 grid of features, one per cell of drake-synth's
scene grid, so a picture costs 9 image tokens), a two-layer GELU projector, and a decoder-only
language model:

============================  =======================  ========================
                              ``tiny-llava-llama``     ``tiny-llava-qwen``
============================  =======================  ========================
language model                Llama                    Qwen2 (q/k/v biases)
hidden size                   128                      160
decoder layers                4                        3
attention heads (key/value)   4 (2)                    5 (1)
MLP intermediate size         384                      448
============================  =======================  ========================

They differ in width *and* depth, so an adapter of one cannot be loaded into the other, which is
the model heterogeneity the FedMosaic paper studies with Llama-3.2-1B and -3B. Both share the
word-level tokenizer of :mod:`drake.models.tokenizer` (same vocabulary, same ids) and the vision
tower's pretrained weights (stage 1 of :mod:`drake.models.pretrain`).

Why Swin and not CLIP's ViT (the first zoo, issue #13): drake-synth's shapes are a few pixels
wide, and a ViT of 8-pixel patches read an object's shape at 0.38 even when trained on shape
labels; Swin's 2-pixel patches and local windows see strokes and corners first, and its last
stage lines up with the grid the scenes are drawn on (so "the object at the top left" is one
image token). ``vision_feature_select_strategy="full"`` keeps all nine features (Swin has no
CLS feature to drop).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import torch
from transformers import (
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    Qwen2Config,
    SwinConfig,
)

from drake.errors import UnknownNameError

__all__ = [
    "TINY_IMAGE_SIZE",
    "TINY_IMAGE_SEQ_LENGTH",
    "VISION_CONFIG",
    "vision_config",
    "TINY_TEXT",
    "tiny_config",
    "build_tiny_model",
    "synth_vocabulary",
]

TINY_IMAGE_SIZE = 48
TINY_IMAGE_SEQ_LENGTH = 9
MAX_POSITIONS = 1024

#: The shared Swin vision tower: 48 px in 2 px patches (24 x 24), window 3, patch merging down
#: to 3 x 3 x 192 after four stages.
VISION_CONFIG: Mapping[str, Any] = MappingProxyType({
    "image_size": TINY_IMAGE_SIZE, "patch_size": 2, "embed_dim": 24, "depths": (2, 2, 2, 2),
    "num_heads": (2, 4, 8, 16), "window_size": 3, "drop_path_rate": 0.0,
})

#: Language-model shape of each tiny family.
TINY_TEXT: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "tiny-llava-llama": MappingProxyType({
        "kind": "llama", "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 384,
    }),
    "tiny-llava-qwen": MappingProxyType({
        "kind": "qwen2", "hidden_size": 160, "num_hidden_layers": 3, "num_attention_heads": 5,
        "num_key_value_heads": 1, "intermediate_size": 448,
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
    return LlavaConfig(
        vision_config=vision_config(),
        text_config=text,
        image_token_index=image_token_id,
        image_seq_length=TINY_IMAGE_SEQ_LENGTH,
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        tie_word_embeddings=True,
    )


def vision_config() -> SwinConfig:
    """The :class:`~transformers.SwinConfig` of the shared tiny vision tower."""
    shape = dict(VISION_CONFIG)
    return SwinConfig(**{**shape, "depths": list(shape["depths"]),
                         "num_heads": list(shape["num_heads"])})


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
