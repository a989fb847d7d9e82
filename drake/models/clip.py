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

The bundle talks to a :class:`ClipCore`: unit-norm image and text embeddings in one space, their
scaled cosine similarities, and the model's own way of tokenizing class prompts. Two cores exist:

* ``tiny-clip`` (offline) is :class:`TinyClip`: the Swin vision tower of the tiny LLaVA families
  (its pretrained weights are shipped with them) and a small CLIP text transformer, each followed
  by a linear projection into a shared 64-dimensional space. The text side pools the state of the
  end-of-sequence token, which :class:`TinyClip` finds itself: the drake tokenizer's ``</s>`` has
  id 2, which ``CLIPTextModel``'s own pooling takes for the legacy "highest id" rule. The
  tower's last stage and the text side are pretrained (:mod:`drake.models.clip_pretrain`,
  shipped).
* ``clip-vit-b16`` and ``clip-vit-b32`` are :class:`HubClip`: OpenAI's pretrained
  ``transformers.CLIPModel`` from the Hub, its prompts tokenized by its own CLIP tokenizer
  (start and end tokens, at most 77 positions).
"""

from __future__ import annotations

import abc
import math
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import CLIPModel, CLIPTextConfig, CLIPTextModel, SwinModel

from drake.errors import DrakeError, SchemaError
from drake.models.zoo import ModelInfo

__all__ = ["CLASS_TEMPLATE", "CLIP_TEXT", "ClipBundle", "ClipCore", "ClipHead", "HubClip",
           "ModelKindError", "TinyClip", "build_tiny_clip", "clip_core"]

#: CoOp's / pFedMMA's class prompt.
CLASS_TEMPLATE = "a photo of a {}."
#: Text-transformer shape of ``tiny-clip``.
CLIP_TEXT: Mapping[str, int] = MappingProxyType({
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 2, "max_position_embeddings": 32,
})
PROJECTION_DIM = 64
#: parameter names of an image tower or its projection (Swin's ``vision.``, a Hub CLIP's
#: ``vision_model.``)
_IMAGE_SIDE = re.compile(r"(^|\.)(vision|vision_model|visual_projection)\.")
#: a method's own adapter modules in the image tower (pFedMMA's image projections)
_IMAGE_ADAPTER = re.compile(r"(^|\.)mm_adapters\.image_")


class ModelKindError(DrakeError):
    """A model was asked for something its kind does not do (a CLIP model to write text)."""


class ClipCore(nn.Module, metaclass=abc.ABCMeta):
    """What :class:`ClipBundle` calls on a CLIP-kind model.

    A core maps images and tokenized prompts to unit-norm embeddings of one
    ``projection_dim``-dimensional space and scores them as ``logit_scale.exp()`` times their
    cosine similarity; :meth:`tokenize` turns class prompts into the ids its text tower expects.
    """

    #: the learned temperature ``t`` of ``exp(t) * cos``
    logit_scale: nn.Parameter
    #: positions :meth:`tokenize` puts before a prompt's first word (a start token)
    start_tokens: int = 0

    @property
    @abc.abstractmethod
    def projection_dim(self) -> int:
        """Width of the shared embedding space."""

    @abc.abstractmethod
    def image_embeds(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Unit-norm image embeddings ``[N, projection_dim]``."""

    @abc.abstractmethod
    def text_embeds(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Unit-norm text embeddings ``[N, projection_dim]``."""

    @abc.abstractmethod
    def tokenize(self, tokenizer: Any, prompts: Sequence[str]) -> dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` (CPU, padded to the longest prompt) of
        ``prompts``, as this model's text tower reads them."""

    @property
    @abc.abstractmethod
    def token_embedding(self) -> nn.Embedding:
        """The text tower's token embedding (prompt learners replace some of its outputs)."""

    @abc.abstractmethod
    def image_tokens(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Unit-norm patch-token embeddings ``[N, M, projection_dim]`` (the class token, where
        the tower has one, left out): FedOTP's local features."""

    def logits(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """Scaled cosine similarities of unit-norm embeddings ``[N, K]``."""
        return self.logit_scale.exp() * image @ text.T

    def forward(self, pixel_values: torch.Tensor, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        """Class logits ``[N images, K texts]``."""
        return self.logits(self.image_embeds(pixel_values),
                           self.text_embeds(input_ids, attention_mask))


class TinyClip(ClipCore):
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

    @property
    def projection_dim(self) -> int:
        return int(self.text_projection.out_features)

    def image_embeds(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Unit-norm image embeddings ``[N, projection_dim]``."""
        pooled = self.vision(pixel_values=pixel_values).pooler_output
        return F.normalize(self.visual_projection(pooled), dim=-1)

    @property
    def token_embedding(self) -> nn.Embedding:
        return self.text.embeddings.token_embedding

    def image_tokens(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """The Swin tower's last-stage tokens (after its final layer norm; their mean is what
        :meth:`image_embeds` pools), projected and unit-norm."""
        tokens = self.vision(pixel_values=pixel_values).last_hidden_state
        return F.normalize(self.visual_projection(tokens), dim=-1)

    def text_embeds(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Unit-norm text embeddings ``[N, projection_dim]``, pooled at each ``</s>``."""
        hidden = self.text(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        at = (input_ids == self.eos_token_id).int().argmax(dim=-1)
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), at]
        return F.normalize(self.text_projection(pooled), dim=-1)

    def tokenize(self, tokenizer: Any, prompts: Sequence[str]) -> dict[str, torch.Tensor]:
        """The drake tokenizer's ids without special tokens, cut to the text tower's positions
        and closed by ``</s>`` (the token :meth:`text_embeds` pools at)."""
        enc = tokenizer(list(prompts), add_special_tokens=False, padding=False)
        room = int(self.text.config.max_position_embeddings) - 1  # </s> takes the last place
        ids = [list(x)[:room] + [tokenizer.eos_token_id] for x in enc["input_ids"]]
        width = max(len(x) for x in ids)
        pad = tokenizer.pad_token_id
        return {"input_ids": torch.tensor([x + [pad] * (width - len(x)) for x in ids]),
                "attention_mask": torch.tensor([[1] * len(x) + [0] * (width - len(x))
                                                for x in ids])}


class HubClip(ClipCore):
    """A pretrained ``transformers.CLIPModel`` (OpenAI's CLIP from the Hub) as a :class:`ClipCore`.

    The model sits in ``self.clip``, so its modules keep their own names under that prefix
    (``clip.text_model.encoder.layers.0.self_attn.q_proj``, which the zoo's LoRA regexes target).
    Embeddings come out in float32 whatever the model's dtype, so that logits and losses of a
    bfloat16 model on a GPU are computed at full precision.

    Parameters
    ----------
    model : transformers.CLIPModel
        The dual encoder; its text tower pools at the end-of-text token its tokenizer appends.
    """

    start_tokens = 1  # <|startoftext|>

    def __init__(self, model: CLIPModel) -> None:
        super().__init__()
        self.clip = model

    @property
    def logit_scale(self) -> nn.Parameter:  # type: ignore[override]
        return self.clip.logit_scale

    @property
    def projection_dim(self) -> int:
        return int(self.clip.config.projection_dim)

    @property
    def max_text_length(self) -> int:
        """Positions of the text tower (77 for OpenAI's models)."""
        return int(self.clip.config.text_config.max_position_embeddings)

    def image_embeds(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Unit-norm image embeddings ``[N, projection_dim]`` of CLIP-normalised pixels."""
        dtype = self.clip.visual_projection.weight.dtype
        pooled = self.clip.vision_model(pixel_values=pixel_values.to(dtype)).pooler_output
        return F.normalize(self.clip.visual_projection(pooled).float(), dim=-1)

    @property
    def token_embedding(self) -> nn.Embedding:
        return self.clip.text_model.embeddings.token_embedding

    def image_tokens(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """The patch tokens of the last layer (class token dropped), through CLIP's
        ``post_layernorm`` and ``visual_projection`` as FedOTP applies them, unit-norm."""
        dtype = self.clip.visual_projection.weight.dtype
        hidden = self.clip.vision_model(pixel_values=pixel_values.to(dtype)).last_hidden_state
        tokens = self.clip.vision_model.post_layernorm(hidden[:, 1:])
        return F.normalize(self.clip.visual_projection(tokens).float(), dim=-1)

    def text_embeds(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Unit-norm text embeddings ``[N, projection_dim]``, pooled by CLIP's text tower at the
        end-of-text token."""
        pooled = self.clip.text_model(input_ids=input_ids,
                                      attention_mask=attention_mask).pooler_output
        return F.normalize(self.clip.text_projection(pooled).float(), dim=-1)

    def tokenize(self, tokenizer: Any, prompts: Sequence[str]) -> dict[str, torch.Tensor]:
        """The CLIP tokenizer's own encoding: start token, prompt, end token, cut to the text
        tower's positions, padded to the longest prompt."""
        enc = tokenizer(list(prompts), padding=True, truncation=True,
                        max_length=self.max_text_length, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


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


def clip_core(model: nn.Module) -> ClipCore:
    """The :class:`ClipCore` inside ``model``: the core itself, or one wrapped by peft
    (``get_base_model``) or by a method (``.model``)."""
    core = model
    while not isinstance(core, ClipCore):
        if hasattr(core, "get_base_model"):
            core = core.get_base_model()
        elif hasattr(core, "model"):
            core = core.model
        else:
            raise TypeError(f"{type(model).__name__} holds no CLIP core; the CLIP methods run "
                            f"on CLIP models (tiny-clip, clip-vit-b16)")
    return core


class ClipHead(nn.Module, metaclass=abc.ABCMeta):
    """A method's own way of scoring images against classes (FedOTP's transport, pFedMoAP's
    mixture of prompts, the prompt learners' context), installed as ``core.head``.

    While installed and :attr:`enabled`, every logit the bundle computes (training loss and
    scoring alike) comes from ``head(bundle, samples, classes) -> [N, K]``; the head reads the
    towers through the bundle (:meth:`ClipBundle.image_embeds`, :meth:`ClipBundle.image_tokens`,
    :meth:`ClipBundle.text_embeds`), so the frozen towers' caches still apply.
    """

    #: off: the bundle scores as plain CLIP (the runtime switches a head off while none of its
    #: adapters is active)
    enabled = True

    @abc.abstractmethod
    def forward(self, bundle: ClipBundle, samples: Sequence[Mapping[str, Any]],
                classes: Sequence[str]) -> torch.Tensor:
        """Logits ``[len(samples), len(classes)]``."""


class ClipBundle:
    """A CLIP-kind model with its tokenizer and image transform (see the module docstring).

    Parameters
    ----------
    name, info
        Zoo name and entry.
    model : torch.nn.Module
        A :class:`ClipCore` (:class:`TinyClip` or :class:`HubClip`), or a peft model wrapping
        one.
    tokenizer
        Tokenizes class prompts (through the core's :meth:`ClipCore.tokenize`); must have an
        end-of-sequence token.
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
        #: the task (dataset id) the classes belong to, where the runtime knows it (CoOp's
        #: per-dataset templates are chosen by it)
        self.task: str | None = None
        self._image_cache: dict[str, torch.Tensor] = {}
        self._token_cache: dict[str, torch.Tensor] = {}

    def __repr__(self) -> str:
        return f"ClipBundle({self.name!r}, classes={len(self.classes)})"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def hidden_size(self) -> int:
        """Width of the embeddings :meth:`last_hidden` returns."""
        return self._core().projection_dim

    def _core(self) -> ClipCore:
        return clip_core(self.model)

    # ------------------------------------------------------------------ encoding

    def _tower_adapted(self) -> bool:
        """Whether any adapter sits in the image tower or its projection (then images are
        encoded every time; else once per sample id, as the frozen tower always gives the
        same embedding)."""
        return any(("lora_" in n and _IMAGE_SIDE.search(n)) or _IMAGE_ADAPTER.search(n)
                   for n, _ in self.model.named_parameters())

    def image_embeds(self, samples: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """Unit-norm image embeddings of ``samples`` (cached by sample id while the image tower
        carries no adapter)."""
        return self._encoded(samples, self._core().image_embeds, self._image_cache)

    def _encoded(self, samples: Sequence[Mapping[str, Any]], encode, cache) -> torch.Tensor:
        """``encode(pixels)`` of ``samples``, through ``cache`` (by sample id) while the image
        tower carries no adapter and every sample has an id."""
        ids = [str(s.get("id") or "") for s in samples]
        if self._tower_adapted() or not all(ids):
            return encode(self._pixels(samples))
        todo = [i for i, sid in enumerate(ids) if sid not in cache]
        if todo:
            with torch.no_grad():
                fresh = encode(self._pixels([samples[i] for i in todo]))
            for i, row in zip(todo, fresh):
                cache[ids[i]] = row.detach()
        return torch.stack([cache[sid] for sid in ids])

    def _pixels(self, samples: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        images = []
        for s in samples:
            got = list(s.get("images") or [])
            if len(got) != 1:
                raise SchemaError(f"sample {s.get('id', '<no id>')!r}: a CLIP model classifies "
                                  f"one image per sample, got {len(got)}")
            images.append(got[0])
        return self._pixel_fn(images).to(self.device)

    def image_tokens(self, samples: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """Unit-norm patch-token embeddings ``[N, M, D]`` of ``samples`` (cached by sample id
        while the image tower carries no adapter, as :meth:`image_embeds`)."""
        return self._encoded(samples, self._core().image_tokens, self._token_cache)

    def text_inputs(self, classes: Sequence[str], template: str | None = None
                    ) -> dict[str, torch.Tensor]:
        """The prompts ``template.format(c)`` (default: the bundle's template) of ``classes``,
        tokenized as the core's text tower reads them."""
        prompts = [(template or self.template).format(c) for c in classes]
        enc = self._core().tokenize(self.tokenizer, prompts)
        return {k: v.to(self.device) for k, v in enc.items()}

    def text_embeds(self, classes: Sequence[str], template: str | None = None) -> torch.Tensor:
        """Unit-norm text embeddings ``[K, D]`` of the class prompts (see :meth:`text_inputs`)."""
        return self._core().text_embeds(**self.text_inputs(classes, template))

    def _texts(self, classes: Sequence[str]) -> dict[str, torch.Tensor]:
        return self.text_inputs(classes)

    def _logits(self, samples: Sequence[Mapping[str, Any]], classes: Sequence[str],
                text: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
        """Class logits ``[N, K]``: the method's head where one is installed and on (see
        :class:`ClipHead`), else CLIP's scaled cosine of image and class-prompt embeddings."""
        core = self._core()
        head = getattr(core, "head", None)
        if head is not None and head.enabled:
            return head(self, samples, classes)
        text = self._texts(classes) if text is None else text
        return core.logits(self.image_embeds(samples),
                           core.text_embeds(text["input_ids"], text["attention_mask"]))

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
        return {"samples": list(samples), "classes": list(classes), **self._texts(classes),
                "labels": torch.tensor(labels, device=self.device)}

    def label_logits(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The class logits ``[N, K]`` of a train batch and each image's class index ``[N]``:
        what :meth:`loss` scores."""
        return self._logits(batch["samples"], batch["classes"], batch), batch["labels"]

    def loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """Cross-entropy of the class logits."""
        logits = self._logits(batch["samples"], batch["classes"], batch)
        return F.cross_entropy(logits, batch["labels"])

    # ------------------------------------------------------------------ inference

    def class_logits(self, samples: Sequence[Mapping[str, Any]], classes: Sequence[str]
                     ) -> torch.Tensor:
        """Logits ``[len(samples), len(classes)]`` of each sample over ``classes``."""
        return self._logits(samples, classes)

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

