"""pFedMMA (``shared/papers/pfedmma.txt`` §3): multi-modal adapters in both CLIP encoders, only
their shared projection aggregated.

In each of the top ``blocks`` transformer blocks of the image tower and of the text tower
(paired from the top: the i-th block from the top of one tower with the i-th of the other), an
adapter adds to the block's output

    y = s · up_m( σ( shared( σ( down_m( LN(x) ) ) ) ) ),     m ∈ {image, text},

where ``x`` is the block's input, ``LN`` the block's own first layer norm, ``down_m`` / ``up_m``
the modality's projections to and from a ``dim``-wide space, ``shared`` one projection used by
both modalities at that depth, ``σ`` ReLU and ``s`` the scale (0.001). As the public code does,
gradients are scaled on their way through the adapter: by ``1/s`` at its output and ``s`` at its
input, so the projections learn at the rate of an unscaled adapter while the frozen towers see
the ``s``-scaled branch (:class:`_GradScale`).

Clients train every projection (down, shared, up) with SGD (momentum 0.9, weight decay 5e-4, a
fresh optimiser at each turn, as the paper's local epochs); only ``shared`` is uploaded and
averaged, weighted by data size; down and up stay with the client. The paper's ViT-B/16 setting
puts adapters in blocks 5-12 (the top 8) with ``dim`` 32, and that is the default here
(``blocks=0``: the top 8, or every block of a tower that has fewer: ``tiny-clip``'s text tower
has 2, so there the top 2 of each tower). pFedMMA trains every client in round 0
(``--first-round-all``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from baselines.base import AdapterConfig, Method, Payload, register
from baselines.clip_common import ParamAdapters, clip_core

__all__ = ["MultiModalAdapters", "PFedMMA", "adapter_blocks"]

LOCAL, SHARED = "local", "shared"
#: adapters in blocks 5-12 of ViT-B/16's 12 (pFedMMA's config)
PAPER_BLOCKS = 8


class _GradScale(torch.autograd.Function):
    """Identity forward; the gradient is multiplied by ``factor`` on the way back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad * ctx.factor, None


def adapter_blocks(core: nn.Module) -> tuple[list[tuple[nn.Module, nn.Module]],
                                             list[tuple[nn.Module, nn.Module]]]:
    """The (block, first layer norm) pairs of a CLIP core's image and text towers, bottom to
    top: tiny-clip's Swin blocks and CLIP text layers, or a Hub CLIP's two CLIP encoders."""
    if hasattr(core, "clip"):  # HubClip: transformers.CLIPModel
        towers = (core.clip.vision_model.encoder.layers, core.clip.text_model.encoder.layers)
        return tuple([(b, b.layer_norm1) for b in t] for t in towers)  # type: ignore[return-value]
    image = [(b, b.layernorm_before) for stage in core.vision.encoder.layers
             for b in stage.blocks]
    text = [(b, b.layer_norm1) for b in core.text.encoder.layers]
    return image, text


class MultiModalAdapters(nn.Module):
    """The adapters of one CLIP core and the hooks that add them to its blocks."""

    def __init__(self, core: nn.Module, *, blocks: int | None = 2, dim: int = 32,
                 scale: float = 0.001) -> None:
        super().__init__()
        image, text = adapter_blocks(core)
        n = min(len(image), len(text)) if blocks is None else int(blocks)
        if not 1 <= n <= min(len(image), len(text)):
            raise ValueError(f"blocks={blocks}: the towers have {len(image)} image and "
                             f"{len(text)} text blocks; choose 1..{min(len(image), len(text))}")
        self.scale = float(scale)
        self.enabled = True
        self.pairs = list(zip(image[-n:], text[-n:]))
        width = lambda ln: int(ln.normalized_shape[0])  # noqa: E731
        self.image_down = nn.ModuleList(nn.Linear(width(ln), dim) for (_, ln), _ in self.pairs)
        self.image_up = nn.ModuleList(nn.Linear(dim, width(ln)) for (_, ln), _ in self.pairs)
        self.text_down = nn.ModuleList(nn.Linear(width(ln), dim) for _, (_, ln) in self.pairs)
        self.text_up = nn.ModuleList(nn.Linear(dim, width(ln)) for _, (_, ln) in self.pairs)
        self.shared = nn.ModuleList(nn.Linear(dim, dim) for _ in self.pairs)
        self._handles = []
        for i, ((iblock, iln), (tblock, tln)) in enumerate(self.pairs):
            self._hook(iblock, iln, "image", i)
            self._hook(tblock, tln, "text", i)

    def branch(self, x: torch.Tensor, norm: nn.Module, modality: str, i: int) -> torch.Tensor:
        """``y = s · up(σ(shared(σ(down(LN(x))))))`` with the public code's gradient scaling."""
        down = (self.image_down if modality == "image" else self.text_down)[i]
        up = (self.image_up if modality == "image" else self.text_up)[i]
        h = _GradScale.apply(norm(x), self.scale)
        h = up(torch.relu(self.shared[i](torch.relu(down(h)))))
        return self.scale * _GradScale.apply(h, 1.0 / self.scale)

    def _hook(self, block: nn.Module, norm: nn.Module, modality: str, i: int) -> None:
        seen: dict[str, torch.Tensor] = {}

        def before(module, args, kwargs):
            seen["x"] = args[0] if args else kwargs["hidden_states"]

        def after(module, args, kwargs, out):
            if not self.enabled:
                return None
            y = self.branch(seen.pop("x"), norm, modality, i)
            return (out[0] + y, *out[1:]) if isinstance(out, tuple) else out + y

        self._handles.append(block.register_forward_pre_hook(before, with_kwargs=True))
        self._handles.append(block.register_forward_hook(after, with_kwargs=True))


@register
class PFedMMA(Method):
    """pFedMMA: multi-modal adapters (down, shared, up) in the top blocks of both CLIP towers;
    clients train all of them, the server averages only the shared projections."""

    name = "pfedmma"
    kinds = ("clip",)
    optimizer = ("sgd", {"momentum": 0.9, "weight_decay": 5e-4})
    fresh_optimizer = True
    eval_after_aggregation = True  # scored with the new global part, as the repositories test

    def __init__(self, lr: float = 1e-3, blocks: int = 0, dim: int = 32, scale: float = 0.001,
                 **hp: Any) -> None:
        super().__init__(lr=lr, blocks=blocks, dim=dim, scale=scale, **hp)
        self.blocks, self.dim, self.scale = int(blocks), int(dim), float(scale)

    def adapters(self) -> dict[str, AdapterConfig]:
        return {LOCAL: AdapterConfig(), SHARED: AdapterConfig()}

    def eval_adapters(self) -> dict[str, float]:
        return {LOCAL: 1.0, SHARED: 1.0}

    def install(self, model, *, arch, lora, seed, peers=None):
        core = clip_core(model)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            image, text = adapter_blocks(core)
            # the paper's blocks 5-12 of a 12-block tower, capped at the shallower tower
            blocks = self.blocks or min(PAPER_BLOCKS, len(image), len(text))
            adapters = MultiModalAdapters(core, blocks=blocks, dim=self.dim,
                                          scale=self.scale)
        core.mm_adapters = adapters  # registered, so it moves with the model
        # the down and up projections stay local, the shared ones travel; both always act
        # together (``adapters.enabled`` off while none is active)
        return ParamAdapters(model, adapters, {
            LOCAL: ["image_down", "image_up", "text_down", "text_up"], SHARED: ["shared"]})

    def local_train(self, client) -> Payload:
        loss = self.train_adapter(client, [LOCAL, SHARED], client.steps)
        return Payload({SHARED: client.get(SHARED)}, {"loss": loss})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return self.share_within_groups(uploads, clients, SHARED)

    def global_model(self, arch: str):
        """No global model: the shared projections alone are not a classifier."""
        return None
