"""The DRAKE model zoo: named backbones, tiny offline LLaVA families, batching, scoring, LoRA.

``ZOO`` maps names to :class:`ModelInfo`; :func:`load_model` turns a name into a
:class:`ModelBundle` (one frozen base model with its tokenizer and image transform, shared by all
clients of that architecture); :func:`add_lora`, :func:`adapter_state` and
:func:`load_adapter_state` manage the per-client adapters; :func:`pretrain` gives the tiny
families their weights on drake-synth's public split (``drake models pretrain``).
"""

from drake.models.bundle import ChatFormat, ModelBundle
from drake.models.errors import ModelLoadError, ModelNotPretrained
from drake.models.images import clip_pixels, to_pil
from drake.models.loading import hub_cache_dir, load_model
from drake.models.lora import adapter_state, add_lora, load_adapter_state, lora_module_names
from drake.models.pretrain import pretrain, pretrain_many
from drake.models.tokenizer import build_tokenizer
from drake.models.zoo import LLM_LINEAR_REGEX, TINY_MODELS, ZOO, ModelInfo, cache_dir, get_info

__all__ = [
    "ZOO",
    "TINY_MODELS",
    "LLM_LINEAR_REGEX",
    "ModelInfo",
    "ModelBundle",
    "ChatFormat",
    "ModelNotPretrained",
    "ModelLoadError",
    "get_info",
    "cache_dir",
    "hub_cache_dir",
    "load_model",
    "pretrain",
    "pretrain_many",
    "build_tokenizer",
    "add_lora",
    "adapter_state",
    "load_adapter_state",
    "lora_module_names",
    "clip_pixels",
    "to_pil",
]
