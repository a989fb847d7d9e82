"""The model zoo table: every backbone the suite can run, by short name and by Hugging Face id.

Two kinds of entries live here:

* the **real backbones** of the papers (FedMosaic's LLaVA variants of Llama-3.x and Qwen-2.5, and
  LLaVA-1.5-7B), loaded from the Hugging Face Hub with ``transformers``;
* the **tiny offline families** ``tiny-llava-llama`` and ``tiny-llava-qwen``, built from configs and
  given weights by ``drake models pretrain``. They are the heterogeneous pair of the offline suite,
  the way the FedMosaic paper pairs Llama-3.2-1B with Llama-3.2-3B: different width *and* depth.

:data:`CLIP_ZOO` holds the CLIP kind of the classification protocols: ``tiny-clip`` (offline) and
OpenAI's CLIP ViT-B/16 and ViT-B/32 from the Hub, the backbones of pFedMMA and the CLIP
prompt-learning baselines.

``size_rank`` orders the models by parameter count (0 = smallest); methods that need "the
smallest model of the federation" (FedMosaic's proxy model) compare ranks, not names.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from drake.errors import UnknownNameError

__all__ = [
    "LLM_LINEAR_REGEX",
    "ModelInfo",
    "ZOO",
    "TINY_MODELS",
    "cache_dir",
    "get_info",
]

#: peft ``target_modules`` regex for every linear layer of the language model of a LLaVA-style
#: model, and nothing in the vision tower, the projector or the LM head.
LLM_LINEAR_REGEX = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


@dataclass(frozen=True)
class ModelInfo:
    """One entry of the zoo.

    Attributes
    ----------
    name : str
        Short name used on the command line and in configs.
    hf_id : str or None
        Hugging Face model id of a real backbone; ``None`` for a tiny offline model.
    family : str
        Language-model family, ``"llama"`` or ``"qwen"``.
    size_rank : int
        Rank by parameter count, 0 for the smallest model of the zoo.
    offline : bool
        True when the model is built locally and never needs the Hub.
    lora_defaults : mapping
        ``r``, ``alpha``, ``dropout`` and ``target_regex`` (a peft ``target_modules`` regex):
        the LoRA setting of the papers for this backbone.
    params : str
        Human-readable parameter count, for ``drake models list``.
    kind : str
        ``"llava"`` (a vision-language model that writes answers: :class:`ModelBundle`) or
        ``"clip"`` (a dual encoder that classifies: :class:`~drake.models.clip.ClipBundle`) or
        ``"tap"`` (TAP's multi-task, multi-modal model: :class:`~drake.models.tap_bundle.TapBundle`).
    """

    name: str
    hf_id: str | None
    family: str
    size_rank: int
    offline: bool
    lora_defaults: Mapping[str, Any] = field(compare=False)
    params: str = ""
    kind: str = "llava"


def _lora(r: int, alpha: int, dropout: float) -> Mapping[str, Any]:
    return MappingProxyType(
        {"r": r, "alpha": alpha, "dropout": dropout, "target_regex": LLM_LINEAR_REGEX}
    )


# FedMosaic's setting for the real backbones: r=128, alpha=256, dropout 0.05, on all linear
# layers of the language model (vision tower and projector excluded).
_REAL_LORA = _lora(128, 256, 0.05)
_TINY_LORA = _lora(8, 16, 0.0)

_ENTRIES = (
    ModelInfo("tiny-llava-llama", None, "llama", 0, True, _TINY_LORA, "2.4M"),
    ModelInfo("tiny-llava-qwen", None, "qwen", 1, True, _TINY_LORA, "2.5M"),
    ModelInfo("qwen2.5-0.5b-vl", "thkim0305/qwen2.5_0.5B_vl", "qwen", 2, False, _REAL_LORA, "0.5B"),
    ModelInfo("llama3.2-1b-vl", "thkim0305/llama3.2_1B_vl", "llama", 3, False, _REAL_LORA, "1B"),
    ModelInfo("qwen2.5-1.5b-vl", "thkim0305/qwen2.5_1.5B_vl", "qwen", 4, False, _REAL_LORA, "1.5B"),
    ModelInfo("qwen2.5-3b-vl", "thkim0305/qwen2.5_3B_vl", "qwen", 5, False, _REAL_LORA, "3B"),
    ModelInfo("llama3.2-3b-vl", "thkim0305/llama3.2_3B_vl", "llama", 6, False, _REAL_LORA, "3B"),
    ModelInfo("llava-1.5-7b", "llava-hf/llava-1.5-7b-hf", "llama", 7, False, _REAL_LORA, "7B"),
    ModelInfo("llama3.1-8b-vl", "thkim0305/llama3.1_8B_vl", "llama", 8, False, _REAL_LORA, "8B"),
)

#: name -> :class:`ModelInfo`, in size order.
ZOO: Mapping[str, ModelInfo] = MappingProxyType({e.name: e for e in _ENTRIES})

#: Names of the tiny offline families.
TINY_MODELS: tuple[str, ...] = tuple(e.name for e in _ENTRIES if e.offline)

#: peft regex of the CLIP kind's default LoRA targets: the query and value maps of the text
#: transformer's attention, in ``tiny-clip`` (``text.….self_attn.q_proj``) and in a Hub
#: ``CLIPModel`` (``text_model.encoder.layers.N.self_attn.q_proj``). The image tower stays frozen,
#: so each image is encoded once per run (on two CPU cores a Swin pass over a batch of 4 costs half
#: a second; a round of 20 clients would spend a minute in it). A method that adapts the image
#: tower too (pFedMMA, CLIP-LoRA on both encoders) targets :data:`CLIP_BOTH_LORA_REGEX`.
CLIP_LORA_REGEX = r"(.*\.)?(text|text_model)\..*\.(q_proj|v_proj)"
#: Both encoders: the image tower's query and value maps (Swin's ``query``/``value`` in
#: ``tiny-clip``, ``vision_model.….q_proj``/``v_proj`` in a Hub ``CLIPModel``) and the text
#: transformer's ``q_proj``/``v_proj``.
CLIP_BOTH_LORA_REGEX = (r"(.*\.)?(vision|vision_model|text|text_model)\."
                        r".*\.(query|value|q_proj|v_proj)")

# CLIP-LoRA's setting (Zanella & Ben Ayed, "Low-Rank Few-Shot Adaptation of Vision-Language
# Models", 2024; github MaxZanella/CLIP-LoRA): rank 2, alpha 1, dropout 0.25, the update scaled
# by alpha / sqrt(r). peft scales by alpha / r, so alpha = sqrt(2) gives the paper's scale
# 1 / sqrt(2) at r = 2. pFedMMA uses bottleneck adapters, not LoRA, and gives no LoRA numbers.
# CLIP-LoRA adapts q, k and v of both encoders; the default here is the text tower's q and v
# (:data:`CLIP_LORA_REGEX`, see above).
_CLIP_LORA = MappingProxyType({"r": 2, "alpha": math.sqrt(2), "dropout": 0.25,
                               "target_regex": CLIP_LORA_REGEX})

#: The CLIP-kind models (classification protocols); ranks order them among themselves by
#: parameter count (ViT-B/32's larger patch embedding outweighs ViT-B/16's longer position table).
CLIP_ZOO: Mapping[str, ModelInfo] = MappingProxyType({
    "tiny-clip": ModelInfo("tiny-clip", None, "clip", 0, True, MappingProxyType(
        {"r": 8, "alpha": 16, "dropout": 0.0, "target_regex": CLIP_LORA_REGEX}), "1.5M",
        kind="clip"),
    "clip-vit-b16": ModelInfo("clip-vit-b16", "openai/clip-vit-base-patch16", "clip", 1, False,
                              _CLIP_LORA, "150M", kind="clip"),
    "clip-vit-b32": ModelInfo("clip-vit-b32", "openai/clip-vit-base-patch32", "clip", 2, False,
                              _CLIP_LORA, "151M", kind="clip"),
})

#: The TAP-kind models (TAP's multi-task, multi-modal model, :mod:`drake.models.tap`): a tiny
#: FLAVA and a tiny ViLT built from configs, and TAP's two backbones from the Hub. Their LoRA settings are TAP's
#: own (:func:`drake.models.tap.add_tap_lora`).
TAP_ZOO: Mapping[str, ModelInfo] = MappingProxyType({
    "tiny-tap": ModelInfo("tiny-tap", None, "flava", 0, True, MappingProxyType(
        {"r": 4, "alpha": 8, "dropout": 0.0, "target_regex": None}), "1.6M", kind="tap"),
    "tiny-tap-vilt": ModelInfo("tiny-tap-vilt", None, "vilt", 1, True, MappingProxyType(
        {"r": 8, "alpha": 16, "dropout": 0.0, "target_regex": None}), "2.1M", kind="tap"),
    # the real backbones TAP truncates (its stacks from the first 2L multimodal / ViLT layers)
    "flava-full": ModelInfo("flava-full", "facebook/flava-full", "flava", 2, False,
                            MappingProxyType({"r": 4, "alpha": 8, "dropout": 0.0,
                                              "target_regex": None}), "350M", kind="tap"),
    "vilt-b32": ModelInfo("vilt-b32", "dandelin/vilt-b32-mlm", "vilt", 3, False,
                          MappingProxyType({"r": 8, "alpha": 16, "dropout": 0.0,
                                            "target_regex": None}), "87M", kind="tap"),
})

#: The default model of each protocol's benchmarks when a benchmark declares no model mix.
DEFAULT_MODEL = MappingProxyType({"classification": "tiny-clip", "base_novel": "tiny-clip",
                                  "generation": "tiny-llava-llama",
                                  "self_others": "tiny-llava-llama"})

_BY_HF_ID: Mapping[str, ModelInfo] = MappingProxyType(
    {e.hf_id.lower(): e for e in (*_ENTRIES, *CLIP_ZOO.values()) if e.hf_id is not None}
)


def get_info(name: str, *, any_hub_id: bool = False) -> ModelInfo:
    """Look a model up by short name or by Hugging Face id (case-insensitive for ids).

    With ``any_hub_id=True``, an ``owner/name`` id outside the zoo gets an ad-hoc entry, so that
    any LLaVA-style or CLIP checkpoint on the Hub can be loaded: an id containing ``clip`` is
    the CLIP kind (CLIP-LoRA's defaults, a rank above the CLIP zoo's); any other is a LLaVA
    model (family guessed from the id, the real backbones' LoRA defaults, a size rank above
    every zoo model).

    Raises
    ------
    UnknownNameError
        Naming the bad value and the known names (``drake models list``).
    """
    if name in ZOO:
        return ZOO[name]
    if name in CLIP_ZOO:
        return CLIP_ZOO[name]
    if name in TAP_ZOO:
        return TAP_ZOO[name]
    info = _BY_HF_ID.get(str(name).lower())
    if info is not None:
        return info
    if any_hub_id and _looks_like_hub_id(name):
        if "clip" in name.lower():  # a dual encoder (e.g. openai/clip-vit-large-patch14)
            return ModelInfo(name, name, "clip", len(CLIP_ZOO), False, _CLIP_LORA, "?",
                             kind="clip")
        family = "qwen" if "qwen" in name.lower() else "llama"
        return ModelInfo(name, name, family, len(_ENTRIES), False, _REAL_LORA, "?")
    raise UnknownNameError(
        f"unknown model {name!r}; `drake models list` shows the known ones: "
        f"{', '.join((*ZOO, *CLIP_ZOO, *TAP_ZOO))} (or their Hugging Face ids)"
    )


def _looks_like_hub_id(name: str) -> bool:
    parts = str(name).split("/")
    return len(parts) == 2 and all(parts) and not any(c.isspace() for c in name)


def cache_dir() -> Path:
    """The default model cache: ``$DRAKE_CACHE/models``, else ``$XDG_CACHE_HOME/drake/models``,
    else ``~/.cache/drake/models``. Read from the environment at every call."""
    root = os.environ.get("DRAKE_CACHE")
    if root:
        return Path(root).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "drake" / "models"
