"""LoRA adapters on the language model, and their weights as plain named tensors.

Every client of an architecture shares one frozen base model; what a client owns is a set of
named adapters inside it (one for FedAvg, two for Ditto or FedDPA). :func:`add_lora` injects an
adapter with peft into the language model's linear layers only (the vision tower and the
projector stay frozen and adapter-free, as in FedMosaic's setup). :func:`adapter_state` and
:func:`load_adapter_state` move one adapter's weights in and out as a dict of tensors whose keys
do not contain the adapter's name, so that the states of two clients (or of a client's global
and personal adapters) line up key by key for aggregation.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.tuners_utils import BaseTunerLayer

from drake.models.zoo import LLM_LINEAR_REGEX

__all__ = ["add_lora", "adapter_state", "load_adapter_state", "lora_module_names",
           "restrict_targets"]

_PEFT_PREFIX = "base_model.model."
_FORBIDDEN = ("vision_tower", "multi_modal_projector")


def restrict_targets(target_regex: str | None, modules: Sequence[str] | None) -> str | None:
    """A peft ``target_modules`` regex for the modules ``target_regex`` matches (default
    :data:`~drake.models.zoo.LLM_LINEAR_REGEX`) whose last name is one of ``modules``, e.g.
    ``("q_proj", "v_proj")``: FediLoRA's query and value maps inside whatever part of the model
    the zoo adapts (the language model of a LLaVA, the text tower of a CLIP). ``modules=None``
    restricts nothing: ``target_regex`` comes back as it is."""
    if modules is None:
        return target_regex
    names = [str(m) for m in modules]
    if not names or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", m) for m in names):
        raise ValueError(f"modules must be module names such as q_proj, got {modules!r}")
    leaf = "|".join(sorted(set(names)))
    return rf"(?=.*\.(?:{leaf})$)(?:{target_regex or LLM_LINEAR_REGEX})"


def add_lora(
    model: torch.nn.Module,
    adapter_name: str,
    *,
    r: int,
    alpha: float,
    dropout: float = 0.0,
    target_regex: str | None = None,
    seed: int | None = None,
) -> PeftModel:
    """Add a LoRA adapter named ``adapter_name`` to the language model's linear layers.

    Each targeted linear map ``W`` becomes ``W x + (alpha / r) * B A x`` with ``A`` (r x in)
    drawn Kaiming-uniform and ``B`` (out x r) zero, so a new adapter leaves the model's output
    unchanged. The base weights are frozen.

    Parameters
    ----------
    model : torch.nn.Module
        A LLaVA-style model, or a :class:`peft.PeftModel` returned by an earlier call.
    adapter_name : str
        New adapter's name; must not exist yet.
    r, alpha, dropout
        LoRA rank, scaling numerator and dropout on the adapter input.
    target_regex : str, optional
        peft ``target_modules`` regex, matched against full module names. Default: every
        linear layer of the language model's decoder (:data:`~drake.models.zoo.LLM_LINEAR_REGEX`).
    seed : int, optional
        Seed for the ``A`` initialisation; the global torch RNG is left untouched. Without it the
        global RNG is used (and advanced).

    Returns
    -------
    peft.PeftModel
        The first call wraps ``model``; later calls add the adapter to the same PeftModel. As in
        peft, adding an adapter does not change which adapter is active (``set_adapter``).

    Raises
    ------
    ValueError
        When the adapter exists, the regex matches nothing, or it matches a module of the vision
        tower or the projector.
    """
    if not adapter_name or "." in adapter_name:
        raise ValueError(f"adapter_name must be a non-empty name without dots, got {adapter_name!r}")
    if r < 1:
        raise ValueError(f"LoRA rank r must be >= 1, got {r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"LoRA dropout must be in [0, 1), got {dropout}")
    regex = target_regex or LLM_LINEAR_REGEX
    re.compile(regex)
    config = LoraConfig(
        r=int(r),
        lora_alpha=alpha,
        lora_dropout=float(dropout),
        target_modules=regex,
        bias="none",
    )
    is_peft = isinstance(model, PeftModel)
    if is_peft and adapter_name in model.peft_config:
        raise ValueError(f"adapter {adapter_name!r} already exists; pick another name")
    names = _matching(model, regex)
    if not names:
        raise ValueError(f"target_regex {regex!r} matches no module; check the module names")
    bad = [n for n in names if any(part in n for part in _FORBIDDEN)]
    if bad:
        raise ValueError(
            f"target_regex {regex!r} matches vision-tower/projector modules (e.g. {bad[0]}); "
            "restrict it to the language model, e.g. the default LLM_LINEAR_REGEX"
        )
    with _seeded(seed), warnings.catch_warnings():
        # peft reads a transformers attribute that v5 deprecates; nothing for users to act on
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                category=FutureWarning)
        if is_peft:
            model.add_adapter(adapter_name, config)
            return model
        return get_peft_model(model, config, adapter_name=adapter_name)


def _matching(model: torch.nn.Module, regex: str) -> list[str]:
    pattern = re.compile(regex)
    return [
        name for name, module in model.named_modules()
        if isinstance(module, (torch.nn.Linear, BaseTunerLayer)) and pattern.fullmatch(name)
    ]


class _seeded:
    """Context manager: fork the torch RNGs and seed them, or do nothing for ``seed=None``."""

    def __init__(self, seed: int | None) -> None:
        self.seed = seed
        self._fork = None

    def __enter__(self) -> None:
        if self.seed is None:
            return
        devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        self._fork = torch.random.fork_rng(devices=devices)
        self._fork.__enter__()
        torch.manual_seed(int(self.seed))

    def __exit__(self, *exc: object) -> None:
        if self._fork is not None:
            self._fork.__exit__(*exc)
            self._fork = None


def _split_key(name: str, adapter_name: str) -> str | None:
    """The adapter-free key of parameter ``name`` if it belongs to ``adapter_name`` (a LoRA
    matrix, or the adapter's own copy of a fully trained module, peft's ``modules_to_save``),
    else None."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        if parts[i] == adapter_name and (parts[i - 1].startswith("lora_")
                                         or parts[i - 1] == "modules_to_save"):
            key = ".".join(parts[:i] + parts[i + 1:])
            return key[len(_PEFT_PREFIX):] if key.startswith(_PEFT_PREFIX) else key
    return None


def _adapter_params(model: torch.nn.Module, adapter_name: str) -> dict[str, torch.nn.Parameter]:
    params: dict[str, torch.nn.Parameter] = {}
    for name, param in model.named_parameters():
        key = _split_key(name, adapter_name)
        if key is not None:
            params[key] = param
    if not params:
        known = sorted(getattr(model, "peft_config", {}) or {})
        raise KeyError(
            f"the model has no LoRA adapter {adapter_name!r}; known adapters: {known or 'none'} "
            "(add one with add_lora)"
        )
    return params


def lora_module_names(model: torch.nn.Module, adapter_name: str) -> list[str]:
    """Names of the modules that carry adapter ``adapter_name`` (without peft's prefix)."""
    keys = _adapter_params(model, adapter_name)
    mods = {k.rsplit(".", 2)[0] for k in keys}
    return sorted(mods)


def adapter_state(model: torch.nn.Module, adapter_name: str) -> dict[str, torch.Tensor]:
    """A detached CPU copy of one adapter's weights.

    Keys are the parameter paths with the adapter name (and peft's ``base_model.model.`` prefix)
    removed, e.g. ``model.language_model.layers.0.self_attn.q_proj.lora_A.weight``; the same
    key in two clients' states (or in two adapters of one client) names the same matrix.
    """
    return {
        key: param.detach().to("cpu", copy=True).clone()
        for key, param in sorted(_adapter_params(model, adapter_name).items())
    }


def load_adapter_state(
    model: torch.nn.Module, adapter_name: str, state: Mapping[str, torch.Tensor]
) -> None:
    """Copy ``state`` (as :func:`adapter_state` returns it) into adapter ``adapter_name``.

    The keys must match exactly and the shapes too; values are cast to the parameters' dtype and
    device. Gradients and ``requires_grad`` flags are not touched.

    Raises
    ------
    KeyError
        When a key is missing or unexpected (the first few are named).
    ValueError
        When a shape differs (e.g. a state from another architecture or rank).
    """
    params = _adapter_params(model, adapter_name)
    missing = sorted(set(params) - set(state))
    extra = sorted(set(state) - set(params))
    if missing or extra:
        raise KeyError(
            f"adapter state does not fit adapter {adapter_name!r}: missing {missing[:3]}"
            f"{'...' if len(missing) > 3 else ''}, unexpected {extra[:3]}"
            f"{'...' if len(extra) > 3 else ''}; was it saved from the same architecture?"
        )
    with torch.no_grad():
        for key, param in params.items():
            value = state[key]
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError(
                    f"adapter state {key!r} has shape {tuple(value.shape)}, the model expects "
                    f"{tuple(param.shape)}; states only move between equal architectures and ranks"
                )
            param.copy_(value.to(device=param.device, dtype=param.dtype))
