"""``load_model``: a zoo name (or Hugging Face id) in, a ready :class:`ModelBundle` out.

Tiny models are built locally: from their config and a seed, or from the weights that
``drake models pretrain`` wrote to the model cache. Real backbones go through ``transformers``
(``AutoProcessor`` and ``AutoModelForImageTextToText``; ``CLIPModel`` and its tokenizer for the
CLIP kind, as a :class:`~drake.models.clip.ClipBundle`) and the Hugging Face Hub cache. Without
network, a real model that is not in that cache fails at once with an error that names the
offline alternative; it never falls back to a tiny model silently.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import LlavaForConditionalGeneration, PreTrainedTokenizerFast

from drake.errors import NetworkUnavailable
from drake.models.bundle import ChatFormat, ModelBundle
from drake.models.errors import ModelLoadError, ModelNotPretrained
from drake.models.images import clip_pixels
from drake.models.shipped import shipped_folder, verify_shipped
from drake.models.tiny import (
    TINY_IMAGE_SEQ_LENGTH,
    TINY_IMAGE_SIZE,
    TINY_TEXT,
    build_tiny_model,
    synth_vocabulary,
)
from drake.models.tokenizer import build_tokenizer
from drake.models.zoo import CLIP_ZOO, TINY_MODELS, ModelInfo, cache_dir, get_info

__all__ = [
    "load_model", "hub_cache_dir", "hub_offline", "tiny_folder", "quiet_transformers",
    "pretrained_missing", "WEIGHTS_FILE",
]

log = logging.getLogger(__name__)

WEIGHTS_FILE = "model.safetensors"
_SENTINEL = "\u0000DRAKE-PROMPT\u0000"


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' per-file progress bars (loading and writing shards) for a block."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    if enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def tiny_folder(name: str, root: Path | None = None) -> Path:
    """Folder of tiny model ``name``'s pretrained files in the model cache ``root``."""
    return Path(root if root is not None else cache_dir()) / name


PRETRAINED_FILES = (WEIGHTS_FILE, "config.json", "tokenizer.json")


def pretrained_missing(name: str, root: Path | None = None) -> list[str]:
    """The files :func:`load_model` would miss to load ``name`` pretrained from the model cache
    ``root`` (default: the user's cache, then the shipped weights); ``[]`` when it can load it,
    and for real backbones (they come from the Hugging Face cache)."""
    info = get_info(name, any_hub_id=True)
    if not info.offline:
        return []
    if info.kind == "tap":  # the weights alone: its tokenizer and config are this code's
        folder = tiny_folder(info.name, root)
        if (folder / WEIGHTS_FILE).is_file() or (root is None and shipped_folder(info.name)):
            return []
        return [WEIGHTS_FILE]
    if info.kind == "clip":  # its image tower is the shipped tiny LLaVA tower, whatever root
        return [] if shipped_folder(TINY_MODELS[0]) is not None else [
            f"the shipped {TINY_MODELS[0]} weights"]
    folder = tiny_folder(info.name, root)
    absent = [f for f in PRETRAINED_FILES if not (folder / f).is_file()]
    if absent and root is None and shipped_folder(info.name) is not None:
        return []
    return absent


def hub_cache_dir() -> Path:
    """The Hugging Face Hub cache, read from the environment at call time.

    ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
    ``~/.cache/huggingface/hub`` (huggingface_hub's own order).
    """
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value."""
    return any(
        os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def load_model(
    name: str,
    *,
    cache_dir: Path | None = None,
    pretrained: bool = True,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    vocab: Sequence[str] | None = None,
) -> ModelBundle:
    """Load a model of the zoo as a :class:`ModelBundle`.

    Parameters
    ----------
    name : str
        A zoo name (``drake models list``) or a Hugging Face id (a zoo backbone's, or any
        LLaVA-style checkpoint's). A CLIP-kind name (``tiny-clip``, ``clip-vit-b16``, ...) gives
        a :class:`~drake.models.clip.ClipBundle`.
    cache_dir : Path, optional
        Model cache of the tiny models (default :func:`drake.models.cache_dir`); the pretrained
        files of ``tiny-llava-llama`` are in ``<cache_dir>/tiny-llava-llama/``. Real backbones use
        the Hugging Face cache instead (``HF_HOME`` / ``HF_HUB_CACHE``).
    pretrained : bool
        Tiny models: load the weights ``drake models pretrain`` wrote (True) or build random
        weights from the config with ``seed`` (False). Real backbones are always pretrained.
    seed : int
        Initialisation seed of a tiny model built with ``pretrained=False``.
    device : str or torch.device
        Where the model goes.
    dtype : torch.dtype, optional
        Real backbones: parameter dtype (default bfloat16 on CUDA, float32 on CPU). Tiny models
        are float32.
    vocab : sequence of str, optional
        Tiny models with ``pretrained=False``: the tokenizer vocabulary (default drake-synth's).

    Returns
    -------
    ModelBundle
        The base model is frozen (``requires_grad`` off) and in eval mode; add adapters with
        :func:`drake.models.add_lora` or :meth:`ModelBundle.add_lora`.

    Raises
    ------
    UnknownNameError
        For a name outside the zoo.
    ModelNotPretrained
        For a tiny model whose pretrained files are not in the cache (run
        ``drake models pretrain``).
    NetworkUnavailable
        For a real backbone that is not in the Hugging Face cache while the Hub cannot be
        reached (or ``HF_HUB_OFFLINE=1``).
    """
    info = get_info(name, any_hub_id=True)
    if info.kind == "tap" and not info.offline:
        bundle = _load_hub_tap(info, device, dtype)
    elif info.kind == "tap":
        bundle = _load_tiny_tap(info, cache_dir, pretrained, seed, vocab)
    elif info.kind == "clip" and info.offline:
        bundle = _load_tiny_clip(info, cache_dir, pretrained, seed, vocab)
    elif info.kind == "clip":
        bundle = _load_hub_clip(info, device, dtype)
    elif info.offline:
        bundle = _load_tiny(info, cache_dir, pretrained, seed, vocab)
    else:
        bundle = _load_real(info, device, dtype)
    model = bundle.model.to(device)
    model.requires_grad_(False)
    model.eval()
    bundle.model = model
    return bundle


# --------------------------------------------------------------------------------- tiny


def _tiny_bundle(info: ModelInfo, model: torch.nn.Module, tokenizer: Any) -> ModelBundle:
    return ModelBundle(
        info.name,
        info,
        model,
        tokenizer,
        image_size=TINY_IMAGE_SIZE,
        image_seq_length=TINY_IMAGE_SEQ_LENGTH,
        image_token_id=model.config.image_token_id,
        pixel_fn=lambda images: clip_pixels(images, TINY_IMAGE_SIZE),
        chat=ChatFormat(instruction_first=True),
    )


def _load_tiny(info: ModelInfo, root: Path | None, pretrained: bool, seed: int,
               vocab: Sequence[str] | None) -> ModelBundle:
    if not pretrained:
        tokenizer = build_tokenizer(synth_vocabulary() if vocab is None else vocab)
        return _tiny_bundle(info, build_tiny_model(info.name, tokenizer, seed), tokenizer)
    if vocab is not None:
        raise ValueError("vocab applies to pretrained=False only; pretrained models keep theirs")
    folder = tiny_folder(info.name, root)
    absent = [f for f in PRETRAINED_FILES if not (folder / f).is_file()]
    shipped = shipped_folder(info.name) if root is None else None
    if absent and shipped is not None:
        verify_shipped(info.name, shipped)
        folder, absent = shipped, []
    if absent:
        fix = (f"load it with cache_dir=None for the weights shipped with drake, or run `drake "
               f"models pretrain --model {info.name} --cache-dir {Path(root)}`"
               if root is not None and shipped_folder(info.name) is not None else
               f"run `drake models pretrain --model {info.name}`"
               + (f" --cache-dir {Path(root)}" if root is not None else ""))
        raise ModelNotPretrained(
            f"{info.name} has no pretrained weights in {folder} (missing {', '.join(absent)}); "
            f"{fix}; or load it with pretrained=False for random weights"
        )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
    with quiet_transformers():
        model = LlavaForConditionalGeneration.from_pretrained(
            str(folder), dtype=torch.float32, local_files_only=True, use_safetensors=True
        )
    want = TINY_TEXT[info.name]
    text, vision = model.config.text_config, model.config.vision_config
    if (text.hidden_size, text.num_hidden_layers, vision.model_type) != (
            want["hidden_size"], want["num_hidden_layers"], "swin"):
        raise ModelLoadError(
            f"the cached {info.name} in {folder} has hidden size {text.hidden_size}, "
            f"{text.num_hidden_layers} layers and a {vision.model_type} vision tower, not this "
            f"version's {want['hidden_size']}, {want['num_hidden_layers']} and swin; re-run `drake models pretrain --model {info.name}`, "
            f"or delete {folder} to use the weights this version ships"
        )
    return _tiny_bundle(info, model, tokenizer)


def _load_tiny_clip(info: ModelInfo, root: Path | None, pretrained: bool, seed: int,
                    vocab: Sequence[str] | None, *, text: bool = True):
    """``tiny-clip``. With ``pretrained``: its image tower carries the shipped tiny LLaVA tower
    and its tokenizer is theirs; then what ``drake models pretrain --model tiny-clip`` wrote to
    the model cache ``root`` (else, with no ``root`` given, the shipped, sha256-pinned file)
    replaces the text side (text tower, projections, logit scale) and the tower's last stage.
    ``text=False`` keeps the text side at its seeded random initialisation and the tower the
    LLaVA one (what pretraining starts from)."""
    from safetensors.torch import load_file

    from drake.models.clip import ClipBundle, build_tiny_clip

    vision = None
    if pretrained:
        if vocab is not None:
            raise ValueError("vocab applies to pretrained=False only; pretrained models keep "
                             "theirs")
        folder = shipped_folder(TINY_MODELS[0])
        if folder is None:
            raise ModelNotPretrained(f"{info.name} takes its image tower from the shipped "
                                     f"{TINY_MODELS[0]} weights, which are missing; reinstall "
                                     f"the suite, or pass --untrained")
        verify_shipped(TINY_MODELS[0], folder)
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
        with quiet_transformers():  # through transformers: it renames the checkpoint's keys
            llava = LlavaForConditionalGeneration.from_pretrained(
                str(folder), dtype=torch.float32, local_files_only=True, use_safetensors=True)
        vision = llava.model.vision_tower.state_dict()
    else:
        tokenizer = build_tokenizer(synth_vocabulary() if vocab is None else vocab)
    model = build_tiny_clip(tokenizer, seed, vision_state=vision)
    if pretrained and text:
        path = tiny_folder(info.name, root) / WEIGHTS_FILE
        if not path.is_file() and root is None and shipped_folder(info.name) is not None:
            verify_shipped(info.name, shipped_folder(info.name))
            path = shipped_folder(info.name) / WEIGHTS_FILE
        if not path.is_file():
            raise ModelNotPretrained(
                f"{info.name} has no pretrained weights in {path.parent}; run `drake models "
                f"pretrain --model {info.name}`" + (f" --cache-dir {Path(root)}" if root else "")
                + (", or load it with cache_dir=None for the weights shipped with drake"
                   if root is not None else "") + ", or pass --untrained")
        state = load_file(str(path))
        missing, unexpected = model.load_state_dict(state, strict=False)
        stray = [k for k in missing if not k.startswith("vision.")]
        if stray or unexpected:
            raise ModelLoadError(f"{path} does not fit this version's {info.name} (missing "
                                 f"{stray[:3]}, unexpected {list(unexpected)[:3]}); re-run "
                                 f"`drake models pretrain --model {info.name}`")
    return ClipBundle(info.name, info, model, tokenizer,
                      pixel_fn=lambda images: clip_pixels(images, TINY_IMAGE_SIZE))


#: The tiny TAP model's encoder sizes: width 64, two layers per encoder (four multimodal, for
#: stacks up to two deep), 32-pixel encoder input in 8-pixel patches, prompts up to 192 tokens.
TINY_TAP = {"hidden": 64, "layers": 2, "image_side": 32, "patch": 8, "text_positions": 192}


def _load_tiny_tap(info: ModelInfo, root: Path | None, pretrained: bool, seed: int,
                   vocab: Sequence[str] | None):
    """``tiny-tap`` (a small FLAVA from a config) or ``tiny-tap-vilt`` (a small ViLT) with
    drake-synth's tokenizer, as a :class:`~drake.models.tap_bundle.TapBundle` (bound to its
    tasks by the runtime). Pretrained: the weights :mod:`drake.models.tap_pretrain` wrote to the
    model cache ``root``, else the shipped ones."""
    from safetensors.torch import load_file

    from drake.models.tap import VILT_RANKS, tiny_flava, tiny_vilt
    from drake.models.tap_bundle import TapBundle

    if pretrained and vocab is not None:
        raise ValueError("vocab applies to pretrained=False only; pretrained models keep theirs")
    tokenizer = build_tokenizer(synth_vocabulary() if vocab is None else vocab)
    sizes = {k: TINY_TAP[k] for k in ("hidden", "image_side", "patch", "text_positions")}
    vilt = info.family == "vilt"
    if vilt:  # TAP's ViLT: stacks of 2 (TAP's 4) from the first 4 layers
        base = tiny_vilt(len(tokenizer), layers=2 * TINY_TAP["layers"], seed=seed, **sizes)
    else:
        base = tiny_flava(len(tokenizer), layers=TINY_TAP["layers"], seed=seed, **sizes)
    if pretrained:
        folder = _tap_weights(info, root)
        state = load_file(str(folder / WEIGHTS_FILE))
        try:
            base.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ModelLoadError(
                f"{folder / WEIGHTS_FILE} does not fit this version's {info.name} ({err}); "
                f"re-run `drake models pretrain --model {info.name}`, or delete {folder} to use "
                f"the weights this version ships") from None
    if vilt:
        return TapBundle(info.name, info, base, tokenizer, stack_depth=TINY_TAP["layers"],
                         ranks=VILT_RANKS, max_text_tokens=TINY_TAP["text_positions"])
    return TapBundle(info.name, info, base, tokenizer,
                     max_text_tokens=TINY_TAP["text_positions"])


def _tap_weights(info: ModelInfo, root: Path | None) -> Path:
    """The folder of a tiny TAP backbone's pretrained weights: the model cache's, else the
    shipped (sha256-checked) ones."""
    folder = tiny_folder(info.name, root)
    if (folder / WEIGHTS_FILE).is_file():
        return folder
    shipped = shipped_folder(info.name) if root is None else None
    if shipped is not None:
        verify_shipped(info.name, shipped)
        return shipped
    raise ModelNotPretrained(
        f"{info.name} has no pretrained weights in {folder} (missing {WEIGHTS_FILE}); run "
        f"`drake models pretrain --model {info.name}`"
        + (f" --cache-dir {Path(root)}" if root is not None else "")
        + "; or load it with pretrained=False (`drake eval --untrained`) for random encoders")


# --------------------------------------------------------------------------------- real


def _offline_error(info: ModelInfo, hub: Path, why: str) -> NetworkUnavailable:
    if info.kind == "clip":
        tiny = ", ".join(n for n, i in CLIP_ZOO.items() if i.offline)
        alternative = f"{tiny} (its image tower ships with drake)"
    elif info.kind == "tap":
        alternative = "tiny-tap or tiny-tap-vilt (their weights ship with drake)"
    else:
        alternative = f"{', '.join(TINY_MODELS)} (`drake models pretrain`)"
    return NetworkUnavailable(
        f"{info.name} ({info.hf_id}) is not in the Hugging Face cache {hub} and {why}; "
        f"download it where the Hub is reachable (`hf download {info.hf_id}`, then point "
        f"HF_HOME at that cache), or run offline with a tiny model: {alternative}"
    )


def _is_network_error(err: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = type(current).__name__
        text = str(current).lower()
        if kind in {"LocalEntryNotFoundError", "ConnectError", "ConnectTimeout",
                    "ConnectionError", "OfflineModeIsEnabled", "NameResolutionError"}:
            return True
        if any(s in text for s in ("connection", "resolve host", "offline mode",
                                   "couldn't connect", "network")):
            return True
        current = current.__cause__ or current.__context__
    return False


def _chat_format(tokenizer: Any) -> ChatFormat:
    """The model's own chat template split around the user prompt, or LLaVA-1.5's format."""
    template = getattr(tokenizer, "chat_template", None)
    if template:
        try:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": _SENTINEL}],
                tokenize=False,
                add_generation_prompt=True,
            )
        except Exception as err:  # a template may insist on list content; use the fallback
            log.info("chat template of %s not usable with text content (%s)",
                     getattr(tokenizer, "name_or_path", "?"), err)
        else:
            if isinstance(text, str) and text.count(_SENTINEL) == 1:
                prefix, suffix = text.split(_SENTINEL)
                return ChatFormat(prefix=prefix, suffix=suffix, answer_prefix="", add_bos=False)
    return ChatFormat(prefix="USER: ", suffix=" ASSISTANT:", answer_prefix=" ", add_bos=True)


def _image_seq_length(config: Any) -> int:
    vision = config.vision_config
    side = int(vision.image_size) // int(vision.patch_size)
    tokens = side * side
    if str(getattr(vision, "model_type", "")).startswith("clip"):
        tokens += 1  # the CLS feature
    if getattr(config, "vision_feature_select_strategy", "default") == "default":
        tokens -= 1
    return tokens


def _cached_snapshot(hf_id: str, hub: Path) -> Path | None:
    """The local snapshot folder of ``hf_id`` in the Hub cache ``hub`` if it holds a config."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(hf_id, cache_dir=str(hub), local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        return None
    return folder if (folder / "config.json").is_file() else None


def _hub_reachable(timeout: float = 5.0) -> bool:
    """Whether a TCP connection to the Hub endpoint opens within ``timeout`` seconds.

    huggingface_hub retries unreachable hosts with back-off for minutes; this check lets an
    offline machine fail in milliseconds instead.
    """
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _hub_source(info: ModelInfo) -> tuple[str, dict[str, Any], bool]:
    """Where a real backbone loads from, the ``from_pretrained`` keyword arguments that go with
    it, and whether it is cached.

    A cached model loads from its snapshot folder with ``local_files_only``: no request leaves
    the machine. An uncached one loads by its Hub id into the Hub cache, but only while the Hub
    can be reached: offline it fails at once (:class:`NetworkUnavailable`).
    """
    assert info.hf_id is not None
    hub = hub_cache_dir()
    snapshot = _cached_snapshot(info.hf_id, hub)
    if snapshot is not None:
        return str(snapshot), {"local_files_only": True}, True
    if hub_offline():
        raise _offline_error(info, hub, "HF_HUB_OFFLINE is set")
    if not _hub_reachable():
        raise _offline_error(info, hub, "the Hub cannot be reached")
    return info.hf_id, {"cache_dir": str(hub)}, False


def _load_failed(info: ModelInfo, source: str, cached: bool, err: Exception) -> Exception:
    """The error to raise for a failed ``from_pretrained``: a lost connection while downloading
    is :class:`NetworkUnavailable`, anything else :class:`ModelLoadError`."""
    if not cached and _is_network_error(err):
        return _offline_error(info, hub_cache_dir(), "the Hub cannot be reached")
    return ModelLoadError(f"could not load {info.name} ({info.hf_id}) from {source}: {err}")


def _real_dtype(device: str | torch.device, dtype: torch.dtype | None) -> torch.dtype:
    """bfloat16 on CUDA, float32 elsewhere, unless the caller chose."""
    if dtype is not None:
        return dtype
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def _load_real(info: ModelInfo, device: str | torch.device, dtype: torch.dtype | None
               ) -> ModelBundle:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    source, kwargs, cached = _hub_source(info)
    try:
        processor = AutoProcessor.from_pretrained(source, **kwargs)
        with quiet_transformers() if cached else contextlib.nullcontext():
            model = AutoModelForImageTextToText.from_pretrained(
                source, dtype=_real_dtype(device, dtype), **kwargs)
    except Exception as err:
        raise _load_failed(info, source, cached, err) from err
    tokenizer = getattr(processor, "tokenizer", None)
    image_processor = getattr(processor, "image_processor", None)
    if tokenizer is None or image_processor is None:
        raise ModelLoadError(
            f"{info.hf_id}: its processor has no tokenizer or image processor; it is not a "
            "LLaVA-style checkpoint"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = model.config
    image_token = getattr(processor, "image_token", None) or "<image>"
    image_token_id = getattr(config, "image_token_id", None)
    if image_token_id is None:
        image_token_id = config.image_token_index

    def pixel_fn(images: Sequence[Any]) -> torch.Tensor:
        from drake.models.images import to_pil

        out = image_processor(images=[to_pil(im) for im in images], return_tensors="pt")
        return out["pixel_values"]

    return ModelBundle(
        info.name,
        info,
        model,
        tokenizer,
        image_size=int(config.vision_config.image_size),
        image_seq_length=_image_seq_length(config),
        image_token_id=int(image_token_id),
        pixel_fn=pixel_fn,
        chat=_chat_format(tokenizer),
        image_token=image_token,
    )


def _load_hub_clip(info: ModelInfo, device: str | torch.device, dtype: torch.dtype | None):
    """OpenAI's CLIP (``clip-vit-b16``, ``clip-vit-b32``): ``CLIPModel`` and its own tokenizer
    from the Hub cache, its images resized and centre-cropped to the vision config's size and
    normalised with CLIP's mean and standard deviation."""
    from transformers import AutoTokenizer, CLIPModel

    from drake.models.clip import ClipBundle, HubClip

    source, kwargs, cached = _hub_source(info)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        with quiet_transformers() if cached else contextlib.nullcontext():
            model = CLIPModel.from_pretrained(source, dtype=_real_dtype(device, dtype), **kwargs)
    except Exception as err:
        raise _load_failed(info, source, cached, err) from err
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ModelLoadError(f"{info.hf_id}: its tokenizer has no end-of-text or padding token; "
                             "it is not a CLIP checkpoint")
    size = int(model.config.vision_config.image_size)
    return ClipBundle(info.name, info, HubClip(model), tokenizer,
                      pixel_fn=lambda images: clip_pixels(images, size, center_crop=True))


#: TAP's stack depth L per backbone (TAP D.1: FLAVA L = 1, ViLT L = 4); its stacks take the
#: backbone's first 2L multimodal (FLAVA) or transformer (ViLT) layers, the rest is dropped
TAP_STACK_DEPTH = {"flava": 1, "vilt": 4}


def _load_hub_tap(info: ModelInfo, device: str | torch.device, dtype: torch.dtype | None):
    """TAP's real backbones from the Hub cache, truncated as TAP does: ``facebook/flava-full``
    (a ``FlavaModel``; its image and text encoders whole, its multimodal encoder cut to the
    first 2L = 2 layers) or ``dandelin/vilt-b32-mlm`` (a ``ViltModel`` cut to its first 2L = 8
    layers), with their own BERT tokenizers; prompts are cut to the text encoder's positions."""
    from transformers import AutoTokenizer, FlavaModel, ViltModel

    from drake.models.tap import FLAVA_RANKS, VILT_RANKS
    from drake.models.tap_bundle import TapBundle

    vilt = info.family == "vilt"
    source, kwargs, cached = _hub_source(info)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        with quiet_transformers() if cached else contextlib.nullcontext():
            base = (ViltModel if vilt else FlavaModel).from_pretrained(
                source, dtype=_real_dtype(device, dtype), **kwargs)
    except Exception as err:
        raise _load_failed(info, source, cached, err) from err
    depth = TAP_STACK_DEPTH[info.family]
    layers = base.encoder.layer if vilt else base.multimodal_model.encoder.layer
    if len(layers) < 2 * depth:
        raise ModelLoadError(f"{info.hf_id} has {len(layers)} layers where TAP's stacks need "
                             f"{2 * depth}; it is not TAP's {info.family} backbone")
    del layers[2 * depth:]
    positions = (base.config.max_position_embeddings if vilt
                 else base.config.text_config.max_position_embeddings)
    return TapBundle(info.name, info, base, tokenizer, stack_depth=depth,
                     ranks=VILT_RANKS if vilt else FLAVA_RANKS, max_text_tokens=positions)
