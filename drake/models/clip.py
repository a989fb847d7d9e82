"""The CLIP model kind: a dual encoder that classifies by text-prompted class logits.

pFedMMA, the CLIP prompt-learning baselines and the classification benchmarks (CLIP base/novel,
CIFAR, DomainNet, Office-Caltech10, synth-cls) score an image against the text embedding of every
candidate class, ``"a photo of a {class}."``, as CLIP's zero-shot classifier does:

    logits[i, k] = exp(t) * <img(x_i) / |img(x_i)|, txt(c_k) / |txt(c_k)|>

with ``t`` the learned logit scale; training is cross-entropy over the candidate classes.

:class:`ClipBundle` is the kind's bundle: the same few calls the runtime makes on a LLaVA
:class:`~drake.models.bundle.ModelBundle` (``collate``, ``loss``, ``choice_logliks``,
``last_hidden``), answered with class logits, plus :meth:`ClipBundle.class_logits`. A CLIP model
does not write text: :meth:`ClipBundle.generate` refuses, naming the LLaVA models.

``tiny-clip`` (offline) is :class:`TinyClip`: the Swin vision tower of the tiny LLaVA families
(its pretrained weights are shipped with them) and a small CLIP text transformer, each followed
by a linear projection into a shared 64-dimensional space. The text side pools the state of the
end-of-sequence token, which :class:`TinyClip` finds itself: the drake tokenizer's ``</s>`` has
id 2, which ``CLIPTextModel``'s own pooling takes for the legacy "highest id" rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import CLIPTextConfig, CLIPTextModel, SwinModel

from drake.errors import DrakeError, SchemaError
from drake.models.zoo import ModelInfo

__all__ = ["CLASS_TEMPLATE", "CLIP_TEXT", "ClipBundle", "ModelKindError", "TinyClip",
           "build_tiny_clip"]

#: CoOp's / pFedMMA's class prompt.
CLASS_TEMPLATE = "a photo of a {}."
#: Text-transformer shape of ``tiny-clip``.
CLIP_TEXT: Mapping[str, int] = MappingProxyType({
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 2, "max_position_embeddings": 32,
})
PROJECTION_DIM = 64


class ModelKindError(DrakeError):
    """A model was asked for something its kind does not do (a CLIP model to write text)."""


class TinyClip(nn.Module):
    """A dual encoder: Swin image tower, CLIP text transformer, projections, logit scale."""

    def __init__(self, text_config: CLIPTextConfig, vision_config: Any,
                 projection_dim: int = PROJECTION_DIM) -> None:
        super().__init__()
        self.vision = SwinModel(vision_config, add_pooling_layer=True)
        self.text = CLIPTextModel(text_config)
        self.visual_projection = nn.Linear(self.vision.num_features, projection_dim, bias=False)
        self.text_projection = nn.Linear(text_config.hidden_size, projection_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        self.eos_token_id = int(text_config.eos_token_id)

    def image_embeds(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Unit-norm image embeddings ``[N, projection_dim]``."""
        pooled = self.vision(pixel_values=pixel_values).pooler_output
        return F.normalize(self.visual_projection(pooled), dim=-1)

    def logits(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """Scaled cosine similarities of unit-norm embeddings ``[N, K]``."""
        return self.logit_scale.exp() * image @ text.T

    def text_embeds(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Unit-norm text embeddings ``[N, projection_dim]``, pooled at each ``</s>``."""
        hidden = self.text(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        at = (input_ids == self.eos_token_id).int().argmax(dim=-1)
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), at]
        return F.normalize(self.text_projection(pooled), dim=-1)

    def forward(self, pixel_values: torch.Tensor, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        """Class logits ``[N images, K texts]``."""
        return self.logits(self.image_embeds(pixel_values),
                           self.text_embeds(input_ids, attention_mask))


def tiny_clip_text_config(tokenizer: Any) -> CLIPTextConfig:
    return CLIPTextConfig(vocab_size=len(tokenizer), projection_dim=PROJECTION_DIM,
                          pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                          eos_token_id=tokenizer.eos_token_id, **CLIP_TEXT)


def build_tiny_clip(tokenizer: Any, seed: int = 0,
                    vision_state: Mapping[str, torch.Tensor] | None = None) -> TinyClip:
    """A ``tiny-clip`` with seeded random weights; ``vision_state`` (a Swin state dict, e.g. the
    shipped tiny LLaVA tower's) replaces the image tower's. The global RNG is left untouched."""
    from drake.models.tiny import vision_config

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = TinyClip(tiny_clip_text_config(tokenizer), vision_config())
    if vision_state is not None:
        missing, unexpected = model.vision.load_state_dict(dict(vision_state), strict=False)
        stray = [k for k in missing if not k.startswith("pooler")]
        if stray or unexpected:
            raise DrakeError(f"the vision weights do not fit tiny-clip's tower (missing "
                             f"{stray[:3]}, unexpected {list(unexpected)[:3]})")
    return model


class ClipBundle:
    """A CLIP-kind model with its tokenizer and image transform (see the module docstring).

    Parameters
    ----------
    name, info
        Zoo name and entry.
    model : torch.nn.Module
        A :class:`TinyClip` (or a peft model wrapping one).
    tokenizer
        Tokenizes class prompts; must have an end-of-sequence token.
    pixel_fn : callable
        ``pixel_fn(images) -> Tensor[N, 3, S, S]``.
    template : str
        The class prompt, with ``{}`` for the class name.
    """

    kind = "clip"

    def __init__(self, name: str, info: ModelInfo, model: nn.Module, tokenizer: Any, *,
                 pixel_fn: Callable[[Sequence[Any]], torch.Tensor],
                 template: str = CLASS_TEMPLATE) -> None:
        self.name = name
        self.info = info
        self.model = model
        self.tokenizer = tokenizer
        self.template = template
        self._pixel_fn = pixel_fn
        #: the candidate classes of training batches (the runtime sets the task's class list)
        self.classes: list[str] = []
        self._image_cache: dict[str, torch.Tensor] = {}

    def __repr__(self) -> str:
        return f"ClipBundle({self.name!r}, classes={len(self.classes)})"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def hidden_size(self) -> int:
        return PROJECTION_DIM

    def _core(self) -> TinyClip:
        model = self.model
        while not isinstance(model, TinyClip):
            model = model.get_base_model() if hasattr(model, "get_base_model") else model.model
        return model

    # ------------------------------------------------------------------ encoding

    def _tower_adapted(self) -> bool:
        """Whether any adapter sits in the image tower or its projection (then images are
        encoded every time; else once per sample id, as the frozen tower always gives the
        same embedding)."""
        return any("lora_" in n and (".vision." in f".{n}" or "visual_projection" in n)
                   for n, _ in self.model.named_parameters())

    def image_embeds(self, samples: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """Unit-norm image embeddings of ``samples`` (cached by sample id while the image tower
        carries no adapter)."""
        core = self._core()
        ids = [str(s.get("id") or "") for s in samples]
        if self._tower_adapted() or not all(ids):
            return core.image_embeds(self._pixels(samples))
        todo = [i for i, sid in enumerate(ids) if sid not in self._image_cache]
        if todo:
            with torch.no_grad():
                fresh = core.image_embeds(self._pixels([samples[i] for i in todo]))
            for i, row in zip(todo, fresh):
                self._image_cache[ids[i]] = row.detach()
        return torch.stack([self._image_cache[sid] for sid in ids])

    def _pixels(self, samples: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        images = []
        for s in samples:
            got = list(s.get("images") or [])
            if len(got) != 1:
                raise SchemaError(f"sample {s.get('id', '<no id>')!r}: a CLIP model classifies "
                                  f"one image per sample, got {len(got)}")
            images.append(got[0])
        return self._pixel_fn(images).to(self.device)

    def _texts(self, classes: Sequence[str]) -> dict[str, torch.Tensor]:
        prompts = [self.template.format(c) for c in classes]
        enc = self.tokenizer(prompts, add_special_tokens=False, padding=False)
        room = int(CLIP_TEXT["max_position_embeddings"]) - 1  # the </s> takes the last place
        ids = [list(x)[:room] + [self.tokenizer.eos_token_id] for x in enc["input_ids"]]
        width = max(len(x) for x in ids)
        pad = self.tokenizer.pad_token_id
        return {"input_ids": torch.tensor([x + [pad] * (width - len(x)) for x in ids],
                                          device=self.device),
                "attention_mask": torch.tensor([[1] * len(x) + [0] * (width - len(x))
                                                for x in ids], device=self.device)}

    def collate(self, samples: Sequence[Mapping[str, Any]], *, train: bool = True
                ) -> dict[str, torch.Tensor]:
        """Images, the candidate classes' prompts and each sample's class index among them."""
        classes = self.classes
        if not classes:
            raise DrakeError(f"{self.name}: no candidate classes set (bundle.classes); the "
                             f"runtime sets them from the task's samples")
        index = {c: k for k, c in enumerate(classes)}
        labels = []
        for s in samples:
            if s.get("answer") not in index:
                raise SchemaError(f"sample {s.get('id', '<no id>')!r}: answer "
                                  f"{s.get('answer')!r} is not one of the {len(classes)} "
                                  f"candidate classes")
            labels.append(index[s["answer"]])
        return {"samples": list(samples), **self._texts(classes),
                "labels": torch.tensor(labels, device=self.device)}

    def loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """Cross-entropy of the class logits."""
        core = self._core()
        text = core.text_embeds(batch["input_ids"], batch["attention_mask"])
        return F.cross_entropy(core.logits(self.image_embeds(batch["samples"]), text),
                               batch["labels"])

    # ------------------------------------------------------------------ inference

    def class_logits(self, samples: Sequence[Mapping[str, Any]], classes: Sequence[str]
                     ) -> torch.Tensor:
        """Logits ``[len(samples), len(classes)]`` of each sample over ``classes``."""
        core = self._core()
        return core.logits(self.image_embeds(samples), core.text_embeds(**self._texts(classes)))

    def choice_logliks(self, samples: Sequence[Mapping[str, Any]], **_: Any
                       ) -> list[list[float]]:
        """Log-softmax of each sample's class logits over its own ``choices``."""
        out: list[list[float]] = [[] for _ in samples]
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, s in enumerate(samples):
            groups.setdefault(tuple(s.get("choices") or ()), []).append(i)
        for choices, idx in groups.items():
            if not choices:
                raise SchemaError(f"sample {samples[idx[0]].get('id')!r} offers no choices")
            logits = self.class_logits([samples[i] for i in idx], choices)
            for i, row in zip(idx, F.log_softmax(logits, dim=-1).tolist()):
                out[i] = row
        return out

    def last_hidden(self, samples: Sequence[Mapping[str, Any]], **_: Any) -> torch.Tensor:
        """The image embedding of each sample (FedDPA's instance feature); LoRA layers injected
        by peft live in the core model's own modules, so the active adapters apply."""
        return self.image_embeds(samples)

    def generate(self, samples: Sequence[Mapping[str, Any]], **_: Any) -> list[str]:
        raise ModelKindError(f"{self.name} is a CLIP model: it classifies and cannot write "
                             f"text; run open-ended or generation tasks with a LLaVA model "
                             f"(--model-mix, `drake models list`)")

