"""Pieces the CLIP methods share: CoOp's learnable prompt context, a named-parameter adapter set,
and the way to reach a bundle's :class:`~drake.models.clip.ClipCore`.

**Prompt context (CoOp).** PromptFL, FedPGP, FedOTP and pFedMoAP learn ``n_ctx`` context vectors
that take the place of the first words of every class prompt, ``"X X … X {class}."``: the text
tower reads ``[ctx_1 … ctx_n, word embeddings of "{class}."]`` and pools as usual.
:class:`PromptContext` does this with a forward hook on the text tower's token embedding that
overwrites the ``n_ctx`` positions after the tower's start token (none in ``tiny-clip``, one in
OpenAI's CLIP) with the context in use. Which context is in use is set per call
(:meth:`PromptContext.using`), so one model can read a class prompt under a global, a personal or
another client's context in turn; outside :meth:`using` the hook leaves the embeddings alone and
the tower reads the plain ``"X X … X"`` words.

Contexts start as CoOp's: ``N(0, 0.02²)`` for ``n_ctx`` random vectors (the papers' 16), or the
word embeddings of ``ctx_init`` (``"a photo of a"``: four vectors) when given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from drake.models.clip import ClipHead, clip_core

__all__ = ["CoOpHead", "ParamAdapters", "PromptContext", "clip_core", "context_init",
           "install_head", "prompt_head_parts"]


def install_head(model: nn.Module, head: nn.Module) -> None:
    """Make ``head`` score every image against the classes (:class:`~drake.models.clip.ClipHead`);
    it is registered on the core, so it moves with the model."""
    clip_core(model).head = head


def context_init(core, tokenizer: Any, *, n_ctx: int = 16, ctx_init: str | None = None,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, str]:
    """CoOp's initial context and the class template it replaces.

    Returns ``(ctx [n, D], template)``: with ``ctx_init``, the word embeddings of its tokens and
    ``f"{ctx_init} {{}}."``; otherwise ``n_ctx`` draws of ``N(0, 0.02²)`` and ``"X X … X {}."``.
    """
    emb = core.token_embedding
    if ctx_init:
        ids = tokenizer(ctx_init, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            ctx = emb.weight[torch.tensor(ids, device=emb.weight.device)].detach().clone().cpu()
        return ctx.float(), f"{ctx_init} {{}}."
    if n_ctx < 1:
        raise ValueError(f"n_ctx must be at least 1, got {n_ctx}")
    ctx = torch.randn(n_ctx, emb.embedding_dim, generator=generator) * 0.02
    return ctx, " ".join(["X"] * n_ctx) + " {}."


class PromptContext(nn.Module):
    """The context hook of one CLIP core (see the module docstring).

    Parameters
    ----------
    core : ClipCore
        The model whose text tower reads the context.
    tokenizer
        The bundle's tokenizer; the template's ``n`` leading words must be ``n`` tokens.
    n : int
        Number of context vectors.
    template : str
        The class template whose first ``n`` tokens the context replaces.
    """

    def __init__(self, core, tokenizer: Any, n: int, template: str) -> None:
        super().__init__()
        self.n = int(n)
        self.template = template
        self.offset = core.start_tokens
        probe = core.tokenize(tokenizer, [template.format("x")])["input_ids"][0]
        if len(probe) < self.offset + self.n + 1:
            raise ValueError(f"template {template!r} has fewer than {self.n} context tokens")
        self._active: list[torch.Tensor] = []  # a stack (not an attribute: no parameter)
        self._handle = core.token_embedding.register_forward_hook(self._replace)

    def _replace(self, module, args, out: torch.Tensor) -> torch.Tensor | None:
        if not self._active:
            return None
        ctx = self._active[-1].to(out.dtype)
        lo, hi = self.offset, self.offset + self.n
        if out.shape[1] < hi:
            raise ValueError(f"a prompt of {out.shape[1]} tokens cannot hold {self.n} context "
                             f"vectors after {self.offset} start token(s)")
        ctx = ctx.unsqueeze(0).expand(out.shape[0], -1, -1) if ctx.dim() == 2 else ctx
        return torch.cat([out[:, :lo], ctx, out[:, hi:]], dim=1)

    @contextlib.contextmanager
    def using(self, ctx: torch.Tensor) -> Iterator[None]:
        """Within the block, the text tower reads ``ctx`` (``[n, D]``, or ``[K, n, D]`` one per
        prompt) in place of the template's first ``n`` words."""
        if ctx.shape[-2] != self.n:
            raise ValueError(f"context of {ctx.shape[-2]} vectors, the template holds {self.n}")
        self._active.append(ctx)
        try:
            yield
        finally:
            self._active.pop()

    def text_embeds(self, bundle, classes: Sequence[str], ctx: torch.Tensor) -> torch.Tensor:
        """Unit-norm embeddings ``[K, D]`` of the class prompts read with ``ctx``."""
        with self.using(ctx):
            return bundle.text_embeds(classes, self.template)


class ParamAdapters:
    """A :class:`~baselines.base.AdapterSet` over named groups of one module's parameters.

    ``groups`` maps an adapter name to the parameter-name prefixes (within ``module``) it owns;
    states are keyed by parameter name. :attr:`active` holds the names the runtime last
    activated, for heads that score differently by adapter (a global model vs. a personal one);
    ``lr_scale`` trains a group at a multiple of the run's learning rate. A ``module`` with an
    ``enabled`` flag (a :class:`~drake.models.clip.ClipHead`) is switched off while no adapter is
    active, so the bare model answers (zero-shot CLIP).
    """

    def __init__(self, model: nn.Module, module: nn.Module, groups: Mapping[str, Sequence[str]],
                 *, lr_scale: Mapping[str, float] | None = None) -> None:
        self.model = model
        self.module = module
        self.names = list(groups)
        self._groups = {name: {k: p for k, p in module.named_parameters()
                               if any(k == pre or k.startswith(pre + ".") for pre in prefixes)}
                        for name, prefixes in groups.items()}
        for name, params in self._groups.items():
            if not params:
                raise ValueError(f"adapter {name!r} owns no parameter of "
                                 f"{type(module).__name__} (prefixes {list(groups[name])})")
        self._lr_scale = dict(lr_scale or {})
        self.active: list[str] = list(self.names)

    def state(self, name: str) -> dict[str, torch.Tensor]:
        return {k: p.detach().clone() for k, p in self._groups[name].items()}

    def load(self, name: str, state: Mapping[str, torch.Tensor]) -> None:
        params = self._groups[name]
        if set(params) != set(state):
            raise KeyError(f"adapter {name!r} state does not fit: missing "
                           f"{sorted(set(params) - set(state))[:3]}, unexpected "
                           f"{sorted(set(state) - set(params))[:3]}")
        with torch.no_grad():
            for k, p in params.items():
                if p.shape != state[k].shape:
                    raise ValueError(f"adapter {name!r}: {k} has shape {tuple(p.shape)}, the "
                                     f"state {tuple(state[k].shape)}")
                p.copy_(state[k])

    def params(self, name: str) -> list[nn.Parameter]:
        return list(self._groups[name].values())

    def param_groups(self, name: str) -> list[tuple[float, list[nn.Parameter]]]:
        return [(self._lr_scale.get(name, 1.0), self.params(name))]

    def activate(self, names: Sequence[str], weights: Sequence[float] | None = None,
                 trainable: Sequence[str] | None = None) -> None:
        self.active = list(names)
        if hasattr(self.module, "enabled"):  # a head with nothing active leaves plain CLIP
            self.module.enabled = bool(self.active)
        if hasattr(self.module, "active"):  # a head that scores by what is active
            self.module.active = list(self.active)
        train = set(names if trainable is None else trainable)
        for name, params in self._groups.items():
            for p in params.values():
                p.requires_grad_(name in train)


def prompt_head_parts(model: nn.Module, peers: Mapping[str, Any] | None, arch: str, *,
                      n_ctx: int, ctx_init: str | None, seed: int):
    """``(core, tokenizer, ctx, template)`` for a prompt learner installed on ``model``: the
    core, its bundle's tokenizer (from the runtime's ``peers``) and CoOp's initial context drawn
    with ``seed``."""
    core = clip_core(model)
    if not peers or arch not in peers:
        raise ValueError(f"a prompt learner needs the bundle of {arch} (its tokenizer) in peers")
    tokenizer = peers[arch].tokenizer
    gen = torch.Generator().manual_seed(int(seed))
    ctx, template = context_init(core, tokenizer, n_ctx=n_ctx, ctx_init=ctx_init, generator=gen)
    return core, tokenizer, ctx, template


class CoOpHead(ClipHead):
    """CLIP's classifier with learned contexts: ``exp(t) · cos(img(x), txt([ctx, class]))``.

    ``contexts`` names the context parameters (``{name: ctx}``); :meth:`context` says which one
    (or which combination) a call reads, by default the first. Subclasses change the scoring
    (FedOTP, pFedMoAP) or the context (FedPGP's ``σ + U V``).
    """

    def __init__(self, core, tokenizer: Any, template: str,
                 contexts: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        first = next(iter(contexts.values()))
        self.prompt = PromptContext(core, tokenizer, first.shape[-2], template)
        self.ctx = nn.ParameterDict({k: nn.Parameter(v.detach().clone())
                                     for k, v in contexts.items()})
        self._core = [core]  # not a submodule: the head lives inside the core

    @property
    def core(self):
        return self._core[0]

    def context(self) -> torch.Tensor:
        return self.ctx[next(iter(self.ctx))]

    def text_embeds(self, bundle, classes: Sequence[str], ctx: torch.Tensor | None = None
                    ) -> torch.Tensor:
        return self.prompt.text_embeds(bundle, classes, self.context() if ctx is None else ctx)

    def forward(self, bundle, samples: Sequence[Mapping[str, Any]], classes: Sequence[str]
                ) -> torch.Tensor:
        return self.core.logits(bundle.image_embeds(samples), self.text_embeds(bundle, classes))
