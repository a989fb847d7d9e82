"""TAP's multi-task, multi-modal model: modality encoders, a backbone of modality-task expert
stacks, and task decoders (TAP §3.1, A.2, D.1; the architecture of DisentAFL, Chen & Zhang 2024).

One model holds every modality and task of a federation; a client uses the part its modalities
and tasks reach. For a sample of task ``o`` (kind ``k``) with input modalities ``M_o``:

1. **Encoders.** Each modality ``m`` in ``M_o`` is encoded by a pretrained, frozen encoder (LoRA
   on its attention's query and value maps) into a token sequence, followed by a trained
   ``neck`` (linear map and layer norm). Images first pass a trained ``adaptor`` that brings
   TAP's 64x64 inputs to the encoder's resolution (bilinear upsampling and convolutions).
2. **Backbone.** Two sets of stacks of ``L`` pre-LN transformer layers, copied from a pretrained
   multimodal encoder (layer ``i`` for the first set, ``L + i`` for the second), frozen, with
   LoRA on query and value. In each layer the feed-forward network is a set of experts (copies of
   the pretrained FFN, LoRA on both maps), and the caller's path picks one: there is no learned
   router.

   * the **MoTE** stacks, one per modality and a ``shared`` one, hold one expert per task kind
     and a ``shared`` expert;
   * the **MoME** stacks, one per task kind and a ``shared`` one, hold one expert per modality
     and a ``shared`` expert.

   Each modality's tokens take four paths, ``(MoTE stack, its expert) -> (MoME stack, its
   expert)``:

   ============  ==========================  ============================
   path          MoTE                        MoME
   ============  ==========================  ============================
   private       stack ``m``, expert ``k``   stack ``k``, expert ``m``
   modality      stack ``m``, expert shared  stack shared, expert ``m``
   task          stack shared, expert ``k``  stack ``k``, expert shared
   shared        stack shared, expert shared stack shared, expert shared
   ============  ==========================  ============================

   The two paths through the shared MoTE stack start from ``shared_proj(x)`` (a trained linear
   map). Each path's output is mean-pooled over the non-padding tokens; the pooled vectors of
   all paths and modalities are averaged into the task's feature.
3. **Decoders** (fully trained), TAP's Tabs. 18-20: a classification head per classification
   task; one image-generation head (transposed convolutions to 3x64x64) for every
   reconstruction task; one text-generation head for every text-generation task, a one-layer
   GPT-2 that conditions on the paths' pooled vectors by multi-head attention and is scored by
   argmax under teacher forcing.

Task kinds collapse as in TAP: every image-classification task shares the ``image_classification``
MoME stack and experts (its head is its own), and likewise for the other kinds.

Departures from the released code (``lee3296/TAP``), all where it departs from the paper: the
text head conditions on the backbone (the released head never receives its input, so text tasks
train nothing but the head); query and value get an ordinary LoRA (the release projects them
twice and trains the base copies); the shared-shared path runs (dead code in the release); mean
pooling skips padding. The release's per-domain FFN residuals (MoDE) are not in the paper and
are left out.

The same code builds the real models from ``facebook/flava-full`` (:meth:`TapModel.from_flava`)
or ``dandelin/vilt-b32-mlm`` (:meth:`TapModel.from_vilt`: TAP keeps ViLT's patch projection and
text embeddings as encoders, its first eight layers as the stacks), and the tiny offline ones
from small configs (:func:`tiny_flava`, :func:`tiny_vilt`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import FlavaConfig, FlavaModel, GPT2Config, GPT2Model, ViltConfig, ViltModel

__all__ = [
    "KINDS",
    "MODALITIES",
    "PATHS",
    "SHARED",
    "TapLayout",
    "TapModel",
    "TapTask",
    "add_tap_lora",
    "tiny_flava",
    "tiny_vilt",
]

MODALITIES = ("image", "text")
KINDS = ("image_classification", "text_classification", "image_generation", "text_generation")
SHARED = "shared"

#: The four paths of a modality ``m`` for a task of kind ``k``: (MoTE stack, MoTE expert, MoME
#: stack, MoME expert), with ``"m"`` and ``"k"`` standing for the modality and the kind.
PATHS: Mapping[str, tuple[str, str, str, str]] = {
    "private": ("m", "k", "k", "m"),
    "modality": ("m", SHARED, SHARED, "m"),
    "task": (SHARED, "k", "k", SHARED),
    "shared": (SHARED, SHARED, SHARED, SHARED),
}

#: TAP's image normalisation (its preprocessing uses CIFAR-100's channel statistics); the
#: image-generation target is the stored target image, normalised alike.
IMAGE_MEAN = (0.5071, 0.4865, 0.4409)
IMAGE_STD = (0.2673, 0.2564, 0.2762)
#: Side of TAP's input images and of the reconstruction head's output.
IMAGE_SIDE = 64


def route(path: str, modality: str, kind: str) -> tuple[str, str, str, str]:
    """:data:`PATHS` entry ``path`` for a modality and a task kind: (MoTE stack, its expert,
    MoME stack, its expert)."""
    keys = {"m": modality, "k": kind}
    return tuple(keys.get(p, p) for p in PATHS[path])  # type: ignore[return-value]


@dataclass(frozen=True)
class TapTask:
    """One task of the federation, as the model sees it.

    Attributes
    ----------
    name : str
        Task id (a classification head is named after it).
    kind : str
        One of :data:`KINDS`.
    modalities : tuple of str
        The encoders that feed it (``("image", "text")`` for VQA: TAP averages the two
        modalities' pooled vectors, no cross-modal attention).
    classes : int
        Number of classes of a classification task, else 0.
    """

    name: str
    kind: str
    modalities: tuple[str, ...]
    classes: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"task {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        bad = [m for m in self.modalities if m not in MODALITIES]
        if not self.modalities or bad:
            raise ValueError(f"task {self.name!r}: modalities must be a non-empty subset of "
                             f"{MODALITIES}, got {self.modalities!r}")
        if self.kind.endswith("classification") and self.classes < 2:
            raise ValueError(f"task {self.name!r}: a classification task needs classes >= 2, "
                             f"got {self.classes}")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", self.name):
            raise ValueError(f"task name {self.name!r}: use letters, digits, '-' and '_' only")


@dataclass(frozen=True)
class TapLayout:
    """What the model must hold: the tasks, and the sizes that are not the encoders'.

    ``stack_depth`` is ``L`` (TAP: 1 for FLAVA, 4 for ViLT); ``max_answer_tokens`` bounds the
    text head's positions; ``cls_dropout`` is the classification heads' dropout (Tab. 18).
    """

    tasks: tuple[TapTask, ...]
    stack_depth: int = 1
    max_answer_tokens: int = 32
    cls_dropout: float = 0.3

    def __post_init__(self) -> None:
        names = [t.name for t in self.tasks]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"tasks must be non-empty with distinct names, got {names}")
        if self.stack_depth < 1:
            raise ValueError(f"stack_depth must be >= 1, got {self.stack_depth}")

    @property
    def modalities(self) -> tuple[str, ...]:
        used = {m for t in self.tasks for m in t.modalities}
        return tuple(m for m in MODALITIES if m in used)

    @property
    def kinds(self) -> tuple[str, ...]:
        used = {t.kind for t in self.tasks}
        return tuple(k for k in KINDS if k in used)

    def task(self, name: str) -> TapTask:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(f"no task {name!r} in this model; its tasks: {[t.name for t in self.tasks]}")


class _Expert(nn.Module):
    """A copy of a pretrained feed-forward network: ``down(gelu(up(x)))``."""

    def __init__(self, up: nn.Linear, down: nn.Linear) -> None:
        super().__init__()
        self.up, self.down = copy.deepcopy(up), copy.deepcopy(down)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class MoeLayer(nn.Module):
    """A pre-LN transformer layer whose feed-forward network is one of several experts.

    Built from a pretrained ViT-style layer (FLAVA's or ViLT's: ``attention``,
    ``layernorm_before``, ``layernorm_after``, ``intermediate.dense``, ``output.dense``); every
    expert starts as a copy of its FFN.
    """

    def __init__(self, layer: nn.Module, experts: Iterable[str]) -> None:
        super().__init__()
        self.attention = copy.deepcopy(layer.attention)
        self.ln_before = copy.deepcopy(layer.layernorm_before)
        self.ln_after = copy.deepcopy(layer.layernorm_after)
        self.experts = nn.ModuleDict({
            e: _Expert(layer.intermediate.dense, layer.output.dense) for e in experts})

    def forward(self, x: torch.Tensor, mask: torch.Tensor, expert: str) -> torch.Tensor:
        x = x + self.attention(self.ln_before(x), attention_mask=mask)[0]
        return x + self.experts[expert](self.ln_after(x))


class Stack(nn.Module):
    """``L`` :class:`MoeLayer` s."""

    def __init__(self, layers: Sequence[nn.Module], experts: Sequence[str]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MoeLayer(layer, experts) for layer in layers)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, expert: str) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, expert)
        return x


class ImageAdaptor(nn.Module):
    """TAP's input adaptor: 64x64 images to the encoder's resolution (bilinear x2, 3x3 conv,
    GELU, bilinear to the encoder's side, 1x1 conv)."""

    def __init__(self, side: int) -> None:
        super().__init__()
        self.side = side
        self.conv = nn.Conv2d(3, 3, 3, padding=1, bias=False)
        self.mix = nn.Conv2d(3, 3, 1)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(pixels, scale_factor=2, mode="bilinear", align_corners=False)
        x = F.gelu(self.conv(x))
        x = F.interpolate(x, size=(self.side, self.side), mode="bilinear", align_corners=False)
        return self.mix(x)


class ClassificationHead(nn.Module):
    """Tab. 18 (FLAVA): linear to half the width, ReLU, dropout, linear to the classes (Xavier
    weights, zero bias)."""

    def __init__(self, hidden: int, classes: int, dropout: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden, hidden // 2), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(hidden // 2, classes))
        nn.init.xavier_uniform_(self.net[3].weight)
        nn.init.zeros_(self.net[3].bias)

    def forward(self, feature: torch.Tensor) -> torch.Tensor:
        return self.net(feature)


class ImageHead(nn.Module):
    """Tab. 19: linear to 64x8x8, then three stride-2 transposed convolutions (64->32->16->3,
    kernel 4, padding 1, ReLU between) to 3x64x64, no output activation."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.project = nn.Linear(hidden, 64 * 8 * 8)
        self.deconv = nn.Sequential(
            nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(16, 3, 4, 2, 1))

    def forward(self, feature: torch.Tensor) -> torch.Tensor:
        return self.deconv(self.project(feature).view(-1, 64, 8, 8))


class TextHead(nn.Module):
    """Tab. 20: a one-layer GPT-2 (4 heads, inner width twice the hidden size) whose token
    embeddings attend (8-head attention) to the backbone's pooled path vectors, and a bias-free
    linear map to the vocabulary. Teacher-forced: position ``t`` sees the answer's tokens before
    ``t`` and predicts token ``t``."""

    def __init__(self, hidden: int, vocab_size: int, positions: int) -> None:
        super().__init__()
        config = GPT2Config(vocab_size=vocab_size, n_positions=positions, n_embd=hidden,
                            n_layer=1, n_head=4, n_inner=2 * hidden, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
                            eos_token_id=None)
        self.gpt = GPT2Model(config)
        self.condition = nn.MultiheadAttention(hidden, 8, batch_first=True)
        self.lm_head = nn.Linear(hidden, vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        tokens = self.gpt.wte(input_ids)
        tokens = tokens + self.condition(tokens, memory, memory, need_weights=False)[0]
        out = self.gpt(inputs_embeds=tokens).last_hidden_state
        return self.lm_head(out)


class Encoder(nn.Module):
    """A pretrained modality encoder (frozen; LoRA goes on its query and value maps) with TAP's
    trained ``neck`` (linear map and layer norm) and, for images, the input ``adaptor``."""

    def __init__(self, modality: str, backbone: nn.Module, hidden: int, side: int = 0) -> None:
        super().__init__()
        self.modality = modality
        self.backbone = backbone
        self.adaptor = ImageAdaptor(side) if modality == "image" else None
        self.neck = nn.Sequential(nn.Linear(backbone.config.hidden_size, hidden),
                                  nn.LayerNorm(hidden))

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token sequence ``[B, S, H]`` and its mask ``[B, S]`` (1 = a real token)."""
        if self.modality == "image":
            pixels = self.adaptor(batch["pixel_values"])
            out = self.backbone(pixel_values=pixels).last_hidden_state
            mask = torch.ones(out.shape[:2], dtype=torch.long, device=out.device)
        else:
            mask = batch["attention_mask"]
            out = self.backbone(input_ids=batch["input_ids"], attention_mask=mask
                                ).last_hidden_state
        return self.neck(out), mask


class PatchTokens(nn.Module):
    """ViLT's image tokens after its patch projection: the class token in front, position
    embeddings added (both trained, as TAP's release trains them)."""

    def __init__(self, cls_token: torch.Tensor, positions: torch.Tensor) -> None:
        super().__init__()
        self.cls_token = nn.Parameter(cls_token.detach().clone())
        self.positions = nn.Parameter(positions.detach().clone())

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        cls = self.cls_token.expand(patches.shape[0], -1, -1)
        x = torch.cat([cls, patches], dim=1)
        return x + self.positions[:, :x.shape[1]]


class ViltImage(nn.Module):
    """TAP's ViLT image encoder: only ViLT's patch projection (frozen; LoRA on it) and its
    tokens; no transformer layer (the layers go to the stacks)."""

    def __init__(self, vilt: ViltModel) -> None:
        super().__init__()
        self.config = vilt.config
        emb = vilt.embeddings
        self.projection = copy.deepcopy(emb.patch_embeddings.projection)
        self.tokens = PatchTokens(emb.cls_token, emb.position_embeddings)

    def forward(self, pixel_values: torch.Tensor) -> Any:
        patches = self.projection(pixel_values).flatten(2).transpose(1, 2)
        return _Hidden(self.tokens(patches))


class ViltText(nn.Module):
    """TAP's ViLT text encoder: ViLT's text embeddings only (word, position and token type,
    layer norm; frozen)."""

    def __init__(self, vilt: ViltModel) -> None:
        super().__init__()
        self.config = vilt.config
        self.embeddings = copy.deepcopy(vilt.embeddings.text_embeddings)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        return _Hidden(self.embeddings(input_ids=input_ids))


@dataclass
class _Hidden:
    last_hidden_state: torch.Tensor


class TapModel(nn.Module):
    """The model of the module docstring. Build it with :meth:`from_flava`.

    ``forward(task, batch)`` returns the task's output: class logits ``[B, C]``, an image
    ``[B, 3, 64, 64]``, or token logits ``[B, T, V]`` (text generation; ``batch`` then holds the
    teacher-forcing ``decoder_input_ids``). :meth:`loss` scores it against the batch's target.
    """

    def __init__(self, layout: TapLayout, encoders: Mapping[str, Encoder],
                 mote_layers: Sequence[nn.Module], mome_layers: Sequence[nn.Module],
                 hidden: int, vocab_size: int) -> None:
        super().__init__()
        missing = [m for m in layout.modalities if m not in encoders]
        if missing:
            raise ValueError(f"the layout's tasks need encoders for {missing}")
        self.layout = layout
        self.hidden = hidden
        self.encoders = nn.ModuleDict({m: encoders[m] for m in layout.modalities})
        self.shared_proj = nn.Linear(hidden, hidden)
        modality_keys = (*layout.modalities, SHARED)
        kind_keys = (*layout.kinds, SHARED)
        self.mote = nn.ModuleDict({s: Stack(mote_layers, kind_keys) for s in modality_keys})
        self.mome = nn.ModuleDict({s: Stack(mome_layers, modality_keys) for s in kind_keys})
        heads: dict[str, nn.Module] = {}
        for t in layout.tasks:
            if t.kind.endswith("classification"):
                heads[t.name] = ClassificationHead(hidden, t.classes, layout.cls_dropout)
        if "image_generation" in layout.kinds:
            heads["image_generation"] = ImageHead(hidden)
        if "text_generation" in layout.kinds:
            heads["text_generation"] = TextHead(hidden, vocab_size, layout.max_answer_tokens)
        self.heads = nn.ModuleDict(heads)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_flava(cls, flava: FlavaModel, layout: TapLayout) -> TapModel:
        """TAP's FLAVA model: FLAVA's image and text encoders, and its multimodal encoder's
        first ``2L`` layers as the stacks' layers (TAP keeps 2 layers with L = 1)."""
        layers = flava.multimodal_model.encoder.layer
        depth = layout.stack_depth
        if len(layers) < 2 * depth:
            raise ValueError(f"stack_depth {depth} needs {2 * depth} multimodal layers, the "
                             f"FLAVA model has {len(layers)}")
        hidden = flava.config.multimodal_config.hidden_size
        image_side = flava.config.image_config.image_size
        encoders = {"image": Encoder("image", flava.image_model, hidden, image_side),
                    "text": Encoder("text", flava.text_model, hidden)}
        model = cls(layout, encoders, list(layers[:depth]), list(layers[depth:2 * depth]),
                    hidden, flava.config.text_config.vocab_size)
        return model._freeze_base()

    @classmethod
    def from_vilt(cls, vilt: ViltModel, layout: TapLayout) -> TapModel:
        """TAP's ViLT model: ViLT's patch projection and text embeddings as the encoders, and
        its first ``2L`` transformer layers as the stacks' layers (TAP: L = 4)."""
        layers = vilt.encoder.layer
        depth = layout.stack_depth
        if len(layers) < 2 * depth:
            raise ValueError(f"stack_depth {depth} needs {2 * depth} ViLT layers, the model "
                             f"has {len(layers)}")
        hidden = vilt.config.hidden_size
        encoders = {"image": Encoder("image", ViltImage(vilt), hidden, vilt.config.image_size),
                    "text": Encoder("text", ViltText(vilt), hidden)}
        model = cls(layout, encoders, list(layers[:depth]), list(layers[depth:2 * depth]),
                    hidden, vilt.config.vocab_size)
        return model._freeze_base()

    def _freeze_base(self) -> TapModel:
        """Freeze everything but the fully trained modules (:data:`TRAINED_MODULES`)."""
        self.requires_grad_(False)
        for name, module in self.named_modules():
            if name.rsplit(".", 1)[-1] in TRAINED_MODULES:
                module.requires_grad_(True)
        return self

    # ------------------------------------------------------------------ forward

    def _path(self, x: torch.Tensor, mask: torch.Tensor, modality: str, kind: str,
              path: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The path's pooled output, and its pooled MoTE output (DisentAFL's latent)."""
        mote, mote_expert, mome, mome_expert = route(path, modality, kind)
        additive = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        weights = mask.to(x.dtype).unsqueeze(-1)

        def pool(h: torch.Tensor) -> torch.Tensor:
            return (h * weights).sum(1) / weights.sum(1).clamp_min(1.0)

        middle = self.mote[mote](x, additive, mote_expert)
        return pool(self.mome[mome](middle, additive, mome_expert)), pool(middle)

    def features(self, task: str, batch: Mapping[str, torch.Tensor],
                 latents: dict[tuple[str, str], torch.Tensor] | None = None) -> torch.Tensor:
        """The pooled vector of every path and modality, ``[B, P, H]`` (P = 4 per modality).
        ``latents``, if given, receives each modality's private MoTE output, mean-pooled, under
        ``(modality, kind)``: the representations DisentAFL makes orthogonal."""
        spec = self.layout.task(task)
        pooled = []
        for modality in spec.modalities:
            x, mask = self.encoders[modality](batch)
            shared_x = self.shared_proj(x)
            for path, route in PATHS.items():
                start = shared_x if route[0] == SHARED else x
                out, middle = self._path(start, mask, modality, spec.kind, path)
                pooled.append(out)
                if latents is not None and path == "private":
                    key = (modality, spec.kind)
                    latents[key] = torch.cat([latents[key], middle]) if key in latents \
                        else middle
        return torch.stack(pooled, dim=1)

    def forward(self, task: str, batch: Mapping[str, torch.Tensor],
                latents: dict[tuple[str, str], torch.Tensor] | None = None) -> torch.Tensor:
        spec = self.layout.task(task)
        paths = self.features(task, batch, latents)
        if spec.kind == "text_generation":
            return self.heads["text_generation"](batch["decoder_input_ids"], paths)
        feature = paths.mean(dim=1)
        if spec.kind == "image_generation":
            return self.heads["image_generation"](feature)
        return self.heads[task](feature)

    def loss(self, task: str, batch: Mapping[str, torch.Tensor],
             latents: dict[tuple[str, str], torch.Tensor] | None = None) -> torch.Tensor:
        """The task's loss on its sub-batch (:meth:`output_loss`); ``latents`` as
        :meth:`features`."""
        return self.output_loss(task, self(task, batch, latents), batch)

    def output_loss(self, task: str, out: torch.Tensor, batch: Mapping[str, torch.Tensor]
                    ) -> torch.Tensor:
        """The loss of task ``task``'s output ``out`` on its sub-batch: cross-entropy
        (classification; text generation over the answer's tokens, ``labels`` -100 elsewhere)
        or the MSE to the stored target image (``target_values``; the normalised input image
        where the batch has none)."""
        kind = self.layout.task(task).kind
        if kind == "image_generation":
            return F.mse_loss(out, batch.get("target_values", batch["pixel_values"]))
        if kind == "text_generation":
            return F.cross_entropy(out.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
        return F.cross_entropy(out, batch["labels"])

    # ------------------------------------------------------------------ parts

    def task_modules(self, task: str) -> list[str]:
        """Names of the modules that task ``task`` runs through: ``X_[i,o]`` of TAP's Eq. 4,
        the part of the model that its replacement copies. Its modalities' encoders,
        ``shared_proj``, the attention of every stack its paths pass and the experts they pick,
        and its head."""
        spec = self.layout.task(task)
        names = [f"encoders.{m}" for m in spec.modalities] + ["shared_proj"]
        stacks: dict[str, set[str]] = {}
        for modality in spec.modalities:
            for path in PATHS:
                mote, mote_expert, mome, mome_expert = route(path, modality, spec.kind)
                stacks.setdefault(f"mote.{mote}", set()).add(mote_expert)
                stacks.setdefault(f"mome.{mome}", set()).add(mome_expert)
        for stack in sorted(stacks):
            for i in range(self.layout.stack_depth):
                layer = f"{stack}.layers.{i}"
                names += [f"{layer}.attention", f"{layer}.ln_before", f"{layer}.ln_after"]
                names += [f"{layer}.experts.{e}" for e in sorted(stacks[stack])]
        names.append(f"heads.{task if spec.kind.endswith('classification') else spec.kind}")
        return names

    def modules_of(self, tasks: Sequence[str]) -> list[str]:
        """The modules any of ``tasks`` runs through (a client's part of the model)."""
        return sorted({m for t in tasks for m in self.task_modules(t)})


#: Modules trained in full (TAP §3.1: "only the decoder is fully trained", and the release's
#: adaptor, necks and shared projection): the last part of their names.
TRAINED_MODULES = ("adaptor", "neck", "shared_proj", "heads", "tokens")

#: peft regexes of TAP's LoRA targets, and the ranks of the release (FLAVA: encoders r 8,
#: backbone attention r 16, experts r 4; alpha twice the rank).
ENCODER_LORA = (r"encoders\.\w+\.backbone\.(.*attention\.attention\.(query|value)"
                r"|projection)")
ATTENTION_LORA = r"(mote|mome)\.\w+\.layers\.\d+\.attention\.attention\.(query|value)"
EXPERT_LORA = r"(mote|mome)\.\w+\.layers\.\d+\.experts\.\w+\.(up|down)"
FLAVA_RANKS = {"encoder": 8, "attention": 16, "expert": 4}
#: ViLT's (the patch projection r 4, backbone attention r 8, experts r 8)
VILT_RANKS = {"encoder": 4, "attention": 8, "expert": 8}


def trained_modules(model: nn.Module) -> list[str]:
    """Full names of the fully trained modules of a :class:`TapModel` (or a peft model of one),
    each head on its own."""
    names = []
    for name, _ in model.named_modules():
        parts = name.split(".")
        if "modules_to_save" in parts or "original_module" in parts:
            continue
        if parts[-1] in ("adaptor", "neck", "shared_proj", "tokens") or (
                len(parts) > 1 and parts[-2] == "heads"):
            names.append(name.removeprefix("base_model.model."))
    return names


def add_tap_lora(model: nn.Module, adapter_name: str, *,
                 ranks: Mapping[str, int] = FLAVA_RANKS, dropout: float = 0.0,
                 seed: int | None = None) -> Any:
    """Add one adapter to a :class:`TapModel` (or a peft model of one): LoRA on the encoders'
    and the stacks' query and value maps and on every expert's two maps (alpha twice the rank),
    and its own copy of the fully trained modules (:data:`TRAINED_MODULES`), so that a client's
    adapter is the whole of its trainable model."""
    from peft import LoraConfig, PeftModel, get_peft_model

    from drake.models.lora import _seeded

    patterns = {"encoder": ENCODER_LORA, "attention": ATTENTION_LORA, "expert": EXPERT_LORA}
    config = LoraConfig(
        r=ranks["expert"], lora_alpha=2 * ranks["expert"], lora_dropout=float(dropout),
        target_modules=f"({ENCODER_LORA}|{ATTENTION_LORA}|{EXPERT_LORA})",
        rank_pattern={patterns[k]: r for k, r in ranks.items() if k != "expert"},
        alpha_pattern={patterns[k]: 2 * r for k, r in ranks.items() if k != "expert"},
        modules_to_save=trained_modules(model), bias="none")
    with _seeded(seed):
        if isinstance(model, PeftModel):
            model.add_adapter(adapter_name, config)
            return model
        return get_peft_model(model, config, adapter_name=adapter_name)


def tiny_flava(vocab_size: int, *, hidden: int = 64, image_side: int = 32, patch: int = 8,
               text_positions: int = 64, layers: int = 2, seed: int = 0) -> FlavaModel:
    """A small FLAVA built from a config (random weights; pretraining gives them meaning): the
    offline stand-in for ``facebook/flava-full`` with the same module names. ``layers`` is the
    depth of each encoder; the multimodal encoder gets ``2 * layers`` (enough for stacks up to
    that depth)."""
    heads = max(1, hidden // 16)
    common = {"hidden_size": hidden, "num_attention_heads": heads,
              "intermediate_size": 2 * hidden, "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0}
    config = FlavaConfig(
        image_config={**common, "num_hidden_layers": layers, "image_size": image_side,
                      "patch_size": patch},
        text_config={**common, "num_hidden_layers": layers, "vocab_size": vocab_size,
                     "max_position_embeddings": text_positions},
        multimodal_config={**common, "num_hidden_layers": 2 * layers},
        hidden_size=hidden, projection_dim=hidden)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return FlavaModel(config)



def tiny_vilt(vocab_size: int, *, hidden: int = 64, image_side: int = 32, patch: int = 8,
              text_positions: int = 64, layers: int = 4, seed: int = 0) -> ViltModel:
    """A small ViLT built from a config: the offline stand-in for ``dandelin/vilt-b32-mlm``
    with the same module names; ``layers`` transformer layers (stacks up to half as deep)."""
    config = ViltConfig(hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=max(1, hidden // 16), intermediate_size=2 * hidden,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        image_size=image_side, patch_size=patch, vocab_size=vocab_size,
                        max_position_embeddings=text_positions)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return ViltModel(config)
