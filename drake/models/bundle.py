"""One frozen base model with its tokenizer, chat format and image transform.

A :class:`ModelBundle` is what the federated runtime holds once per architecture and shares
between all clients of that architecture: clients differ only in the adapters swapped into the
bundle's model. The bundle turns schema samples into tensors and back:

* :meth:`ModelBundle.collate` builds a batch. The prompt is wrapped in the model's chat format,
  every ``<image>`` placeholder becomes ``image_seq_length`` image tokens (the slots LLaVA fills
  with projected patch features), and with ``train=True`` the answer and end-of-sequence token
  follow, with the loss restricted to them;
* :meth:`ModelBundle.loss` is the mean token cross-entropy over the answer tokens;
* :meth:`ModelBundle.generate` decodes greedily and returns the answer text;
* :meth:`ModelBundle.choice_logliks` scores each offered option by the summed log-probability of
  its tokens as the answer, as lm-evaluation-harness does for multiple choice;
* :meth:`ModelBundle.last_hidden` returns the last-layer state of the last prompt token, the
  instance feature FedDPA's dynamic weighting uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from packaging.version import Version
from transformers import GenerationConfig
from transformers.modeling_outputs import BaseModelOutputWithPooling

from drake.errors import SchemaError
from drake.models.zoo import ModelInfo

__all__ = ["ChatFormat", "ModelBundle", "IGNORE_INDEX", "MIN_TRANSFORMERS", "check_transformers"]

IGNORE_INDEX = -100
IMAGE_PLACEHOLDER = "<image>"

#: The oldest transformers the bundle works with. Option scoring hands LLaVA pre-encoded
#: pictures (``mm_encoder_outputs``, new in 5.18) and continues from the returned ``cache``
#: (``past_key_values`` before 5.24). An older LLaVA takes both as unknown keyword arguments and
#: drops them, so every option would be scored as if the prompt had no picture, without an error.
MIN_TRANSFORMERS = "5.24"


def check_transformers(version: str | None = None) -> None:
    """Raise when the installed transformers (or ``version``) is older than
    :data:`MIN_TRANSFORMERS`, naming both versions and the upgrade command."""
    found = version or transformers.__version__
    if Version(found) < Version(MIN_TRANSFORMERS):
        raise RuntimeError(
            f"transformers {found} is too old for DRAKE's models: multiple-choice scoring needs "
            f">= {MIN_TRANSFORMERS} (older LLaVA forwards drop the pre-encoded pictures without an "
            f"error, so scores would ignore the images). Upgrade with "
            f"`pip install -U 'transformers>={MIN_TRANSFORMERS}'`."
        )


@dataclass(frozen=True)
class ChatFormat:
    """How a prompt and an answer become one token sequence.

    The model sees ``[bos] prefix + prompt + suffix`` and, when training, ``answer_prefix +
    answer`` followed by the end-of-sequence token.

    ``instruction_first`` (the tiny families) puts the prompt's text, images left out, before the
    prompt itself when it has pictures: ``prefix + text + "\n" + prompt + suffix``. A causal
    model then reads the pictures already knowing the question, so each image token can check
    itself against what is asked, as InstructBLIP's instruction-aware visual features do. A
    small model that meets the question only after the pictures must find the asked-for object
    from the answer position in one step, which two- to four-layer models learn slowly
    (issue #13).
    """

    prefix: str = "USER: "
    suffix: str = " ASSISTANT:"
    answer_prefix: str = " "
    add_bos: bool = True
    instruction_first: bool = False

    def render(self, prompt: str, placeholder: str = IMAGE_PLACEHOLDER) -> str:
        """The text the tokenizer sees for ``prompt`` (image placeholders still in it)."""
        if self.instruction_first and placeholder in prompt:
            text = " ".join(prompt.replace(placeholder, " ").split())
            prompt = text + "\n" + prompt
        return self.prefix + prompt + self.suffix


@dataclass
class _Encoded:
    ids: list[int]
    labels: list[int]
    images: list[Any]


class ModelBundle:
    """A base model, its tokenizer and the glue between schema samples and tensors.

    Parameters
    ----------
    name : str
        Zoo name of the model.
    info : ModelInfo
        Its zoo entry.
    model : torch.nn.Module
        A LLaVA-style ``...ForConditionalGeneration`` (or a peft model wrapping one).
    tokenizer : PreTrainedTokenizerBase
        Must map ``image_token`` to ``image_token_id`` as a single token.
    image_size : int
        Side of the square images the vision tower takes.
    image_seq_length : int
        Image tokens per ``<image>`` placeholder.
    image_token_id : int
        Id of the image token in the model's vocabulary.
    pixel_fn : callable
        ``pixel_fn(images) -> Tensor[N, 3, image_size, image_size]`` for a list of schema images.
    chat : ChatFormat
        The chat wrapping.
    image_token : str
        The tokenizer's spelling of the image token (``<image>`` for every model of the zoo);
        placeholders in prompts are rewritten to it.
    """

    def __init__(
        self,
        name: str,
        info: ModelInfo,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        image_size: int,
        image_seq_length: int,
        image_token_id: int,
        pixel_fn: Callable[[Sequence[Any]], torch.Tensor],
        chat: ChatFormat | None = None,
        image_token: str = IMAGE_PLACEHOLDER,
    ) -> None:
        check_transformers()
        self.name = name
        self.info = info
        self.model = model
        self.tokenizer = tokenizer
        self.image_size = int(image_size)
        self.image_seq_length = int(image_seq_length)
        self.image_token_id = int(image_token_id)
        self.image_token = image_token
        self.chat = chat or ChatFormat()
        self._pixel_fn = pixel_fn
        self._features: dict[tuple[str, int], torch.Tensor] = {}
        self._features_key: tuple = ()
        self._features_bytes = 0
        pad = tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else tokenizer.eos_token_id)
        if tokenizer.eos_token_id is None:
            raise ValueError(f"the tokenizer of {name} has no eos token; set tokenizer.eos_token")
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.bos_token_id = tokenizer.bos_token_id
        probe = tokenizer(image_token, add_special_tokens=False)["input_ids"]
        if list(probe) != [self.image_token_id]:
            raise ValueError(
                f"the tokenizer of {name} encodes {image_token!r} as {list(probe)}, not as the "
                f"single image token {self.image_token_id}; add it as a special token"
            )

    def __repr__(self) -> str:
        return (f"ModelBundle({self.name!r}, hidden={self.hidden_size}, "
                f"image_seq_length={self.image_seq_length}, device={self.device})")

    # ------------------------------------------------------------------ properties

    @property
    def device(self) -> torch.device:
        """Device of the model's parameters (batches are built there)."""
        return next(self.model.parameters()).device

    @property
    def hidden_size(self) -> int:
        """Hidden size of the language model."""
        return int(_base_config(self.model).text_config.hidden_size)

    @property
    def num_layers(self) -> int:
        """Number of decoder layers of the language model."""
        return int(_base_config(self.model).text_config.num_hidden_layers)

    # ------------------------------------------------------------------ adapters

    def add_lora(self, adapter_name: str, **overrides: Any) -> torch.nn.Module:
        """Add a LoRA adapter with this model's zoo defaults (overridable); updates ``model``.

        See :func:`drake.models.lora.add_lora`; ``overrides`` may set ``r``, ``alpha``,
        ``dropout``, ``target_regex`` and ``seed``.
        """
        from drake.models.lora import add_lora

        defaults = self.info.lora_defaults
        kwargs: dict[str, Any] = {
            "r": defaults["r"],
            "alpha": defaults["alpha"],
            "dropout": defaults["dropout"],
            "target_regex": defaults["target_regex"],
        }
        kwargs.update(overrides)
        self.model = add_lora(self.model, adapter_name, **kwargs)
        return self.model

    # ------------------------------------------------------------------ batching

    def _prompt_ids(self, sample: Mapping[str, Any]) -> tuple[list[int], list[Any]]:
        prompt = sample.get("prompt")
        if not isinstance(prompt, str):
            raise SchemaError(f"sample {sample.get('id', '<no id>')!r}: 'prompt' must be a str")
        images = list(sample.get("images") or [])
        n_placeholders = prompt.count(IMAGE_PLACEHOLDER)
        if n_placeholders != len(images):
            raise SchemaError(
                f"sample {sample.get('id', '<no id>')!r}: prompt has {n_placeholders} "
                f"{IMAGE_PLACEHOLDER} placeholder(s) but {len(images)} image(s); "
                "put exactly one placeholder per image"
            )
        text = self.chat.render(prompt)
        if self.image_token != IMAGE_PLACEHOLDER:
            text = text.replace(IMAGE_PLACEHOLDER, self.image_token)
        raw = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        ids: list[int] = []
        if self.chat.add_bos and self.bos_token_id is not None:
            ids.append(int(self.bos_token_id))
        for tok in raw:
            if tok == self.image_token_id:
                ids.extend([self.image_token_id] * self.image_seq_length)
            else:
                ids.append(int(tok))
        return ids, images

    def _answer_ids(self, answer: Any, *, eos: bool, sample_id: Any) -> list[int]:
        if not isinstance(answer, str):
            raise SchemaError(f"sample {sample_id!r}: 'answer' must be a str to train or score")
        ids = [int(t) for t in self.tokenizer(self.chat.answer_prefix + answer,
                                              add_special_tokens=False)["input_ids"]]
        if eos:
            ids.append(self.eos_token_id)
        return ids

    def _encode(self, sample: Mapping[str, Any], *, answer: str | None, eos: bool) -> _Encoded:
        ids, images = self._prompt_ids(sample)
        if answer is None:
            return _Encoded(ids, [IGNORE_INDEX] * len(ids), images)
        ans = self._answer_ids(answer, eos=eos, sample_id=sample.get("id", "<no id>"))
        return _Encoded(ids + ans, [IGNORE_INDEX] * len(ids) + ans, images)

    def _pad(self, items: Sequence[_Encoded], *, left: bool, with_labels: bool
             ) -> dict[str, torch.Tensor]:
        if not items:
            raise ValueError("cannot collate an empty list of samples")
        width = max(len(it.ids) for it in items)
        n = len(items)
        input_ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((n, width), dtype=torch.long)
        labels = torch.full((n, width), IGNORE_INDEX, dtype=torch.long)
        for row, it in enumerate(items):
            length = len(it.ids)
            span = slice(width - length, width) if left else slice(0, length)
            input_ids[row, span] = torch.tensor(it.ids, dtype=torch.long)
            attention[row, span] = 1
            labels[row, span] = torch.tensor(it.labels, dtype=torch.long)
        batch = {"input_ids": input_ids, "attention_mask": attention}
        if with_labels:
            batch["labels"] = labels
        images = [img for it in items for img in it.images]
        if images:
            batch["pixel_values"] = self._pixel_fn(images)
        device = self.device
        dtype = _float_dtype(self.model)
        out = {}
        for key, value in batch.items():
            value = value.to(device)
            if key == "pixel_values":
                value = value.to(dtype)
            out[key] = value
        return out

    def collate(self, samples: Sequence[Mapping[str, Any]], *, train: bool
                ) -> dict[str, torch.Tensor]:
        """Turn samples into a model batch.

        Parameters
        ----------
        samples : sequence of dict
            Schema samples. ``images`` may hold PIL images or parquet image dicts; a sample may
            have no image at all (text-only).
        train : bool
            True: ``input = [bos] chat(prompt) answer eos``, right-padded, with ``labels`` equal
            to the input on the answer and eos tokens and ``-100`` everywhere else. False: the
            chat-wrapped prompt only, left-padded so that generation continues every row at the
            same position; no labels.

        Returns
        -------
        dict
            ``input_ids`` and ``attention_mask`` ``[B, T]``, ``labels`` ``[B, T]`` when
            training, and ``pixel_values`` ``[N, 3, S, S]`` holding the images of all samples in
            order (absent when the batch has no image).
        """
        if train:
            items = [self._encode(s, answer=s.get("answer"), eos=True) for s in samples]
        else:
            items = [self._encode(s, answer=None, eos=False) for s in samples]
        return self._pad(items, left=not train, with_labels=train)

    # ------------------------------------------------------------------ model calls

    def _forward(self, batch: Mapping[str, torch.Tensor], **kwargs: Any) -> Any:
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        return self.model(**inputs, use_cache=False, **kwargs)

    def _label_logits(self, batch: Mapping[str, torch.Tensor]
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Logits that predict the labelled tokens, with those labels and their batch rows.

        Only the positions that predict a label go through the LM head (answers are a few tokens
        of a long prompt), which saves most of its cost with large vocabularies.
        """
        out = self._forward(batch, output_hidden_states=True, logits_to_keep=1)
        hidden = out.hidden_states[-1][:, :-1]
        labels = batch["labels"][:, 1:]
        mask = labels != IGNORE_INDEX
        rows = torch.nonzero(mask, as_tuple=True)[0]
        head = self.model.get_output_embeddings()
        logits = head(hidden[mask]).float()
        return logits, labels[mask], rows

    def label_logits(self, batch: Mapping[str, torch.Tensor]
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """The next-token logits ``[T, V]`` of a train batch's labelled tokens (answer and eos,
        every row's in order) and those tokens ``[T]``: what :meth:`loss` averages."""
        logits, labels, _ = self._label_logits(batch)
        return logits, labels

    def loss(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Mean token cross-entropy of the labelled tokens (answer and eos) of a train batch.

        Position ``t`` predicts token ``t + 1``; every labelled token of the batch weighs the same.
        """
        if "labels" not in batch:
            raise ValueError("loss needs a batch from collate(samples, train=True)")
        if not bool((batch["labels"][:, 1:] != IGNORE_INDEX).any()):
            raise ValueError("the batch has no answer tokens to train on; check the answers")
        logits, labels, _ = self._label_logits(batch)
        return F.cross_entropy(logits, labels)

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                yield
        finally:
            self.model.train(was_training)

    def generate(
        self,
        samples: Sequence[Mapping[str, Any]],
        max_new_tokens: int = 16,
        *,
        batch_size: int | None = None,
    ) -> list[str]:
        """Greedy answers, one string per sample (the new tokens only, decoded and stripped).

        Decoding is deterministic: no sampling, one beam, and it stops at end-of-sequence or after
        ``max_new_tokens`` tokens. ``batch_size`` splits long lists (default: one batch).
        """
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        config = GenerationConfig(
            max_new_tokens=int(max_new_tokens),
            do_sample=False,
            num_beams=1,
            pad_token_id=self.pad_token_id,
            eos_token_id=self.eos_token_id,
            bos_token_id=self.bos_token_id,
        )
        answers: list[str] = []
        with self._inference():
            for chunk in _chunks(samples, batch_size):
                batch = self.collate(chunk, train=False)
                out = self.model.generate(**batch, generation_config=config)
                new = out[:, batch["input_ids"].shape[1]:]
                texts = self.tokenizer.batch_decode(new, skip_special_tokens=True,
                                                    clean_up_tokenization_spaces=False)
                answers.extend(t.strip() for t in texts)
        return answers

    def choice_logliks(
        self,
        samples: Sequence[Mapping[str, Any]],
        *,
        batch_size: int | None = None,
    ) -> list[list[float]]:
        """Log-likelihood of every option of every sample, as the answer to its prompt.

        For option ``c`` of sample ``s`` the score is ``sum_t log p(c_t | chat(s.prompt), c_<t)``
        over the option's tokens (no end-of-sequence token), as lm-evaluation-harness scores
        multiple choice; the predicted option is the arg-max. A sample without choices gives
        ``[]``. ``batch_size`` bounds the number of (sample, option) rows per forward pass.

        The prompt is read once per sample, not once per option: a forward pass over the
        (left-padded) prompts keeps their key/value cache and the logits of the first answer
        token; options of one token are scored from those logits alone, longer options continue
        from the cache, one row per option. Each picture's features are computed once as well.
        The scores equal those of one full forward pass per option (up to float rounding).
        """
        scores: list[list[float]] = [[] for _ in samples]
        wanted = [i for i, sample in enumerate(samples) if sample.get("choices")]
        if not wanted:
            return scores
        with self._inference():
            features = self._image_features(samples, set(wanted), batch_size)
            for chunk in _option_chunks(samples, wanted, batch_size):
                for index, row in zip(chunk, self._score_options(samples, chunk, features)):
                    scores[index] = row
        return scores

    def _score_options(self, samples: Sequence[Mapping[str, Any]], chunk: Sequence[int],
                       features: Mapping[int, list[torch.Tensor]]) -> list[list[float]]:
        """Option scores of the samples ``chunk`` (see :meth:`choice_logliks`)."""
        device = self.device
        prompts = [self._encode(samples[i], answer=None, eos=False) for i in chunk]
        prompts = [_Encoded(p.ids, p.labels, []) for p in prompts]  # pictures: ``features``
        batch = self._pad(prompts, left=True, with_labels=False)
        mask = batch["attention_mask"]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        pictures = [f for i in chunk for f in features.get(i, [])]
        extra = ({"mm_encoder_outputs": {"image": BaseModelOutputWithPooling(
            pooler_output=pictures)}} if pictures else {})
        out = self.model(**batch, position_ids=positions, use_cache=True, logits_to_keep=1,
                         **extra)
        first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        options = [[self._answer_ids(str(c), eos=False, sample_id=samples[i].get("id", "<no id>"))
                    for c in samples[i]["choices"]] for i in chunk]
        owner = torch.tensor([k for k, opts in enumerate(options) for _ in opts], device=device)
        flat = [ids for opts in options for ids in opts]
        width = max(len(ids) for ids in flat)
        ids = torch.full((len(flat), width), self.pad_token_id, dtype=torch.long, device=device)
        keep = torch.zeros((len(flat), width), dtype=torch.bool, device=device)
        for row, option in enumerate(flat):
            ids[row, :len(option)] = torch.tensor(option, dtype=torch.long)
            keep[row, :len(option)] = True
        if not bool(keep[:, 0].all()):
            raise ValueError("an option encodes to no token; give every choice some text")
        total = first[owner].gather(-1, ids[:, :1])[:, 0]
        if width > 1:  # later tokens continue from the prompt's cache, one row per option
            cache = out.cache
            cache.reorder_cache(owner)
            attention = torch.cat([mask[owner], keep.long()], dim=1)
            steps = positions[owner, -1:] + 1 + torch.arange(width, device=device)
            hidden = self.model(input_ids=ids, attention_mask=attention, position_ids=steps,
                                cache=cache, use_cache=True,
                                output_hidden_states=True, logits_to_keep=1).hidden_states[-1]
            later = keep[:, 1:]
            head = self.model.get_output_embeddings()
            logp = torch.log_softmax(head(hidden[:, :-1][later]).float(), dim=-1)
            picked = logp.gather(-1, ids[:, 1:][later][:, None])[:, 0]
            total = total.index_add(0, torch.nonzero(later, as_tuple=True)[0], picked)
        values = total.tolist()
        rows, start = [], 0
        for opts in options:
            rows.append([float(v) for v in values[start:start + len(opts)]])
            start += len(opts)
        return rows

    def _image_features(self, samples: Sequence[Mapping[str, Any]], wanted: set[int],
                        batch_size: int | None) -> dict[int, list[torch.Tensor]]:
        """Projected image features of the samples ``wanted``, computed once per picture: every
        option of a multiple-choice sample reuses them (the vision tower and the projector carry
        no adapters, so they are the same under any adapter)."""
        order = [i for i in sorted(wanted) if samples[i].get("images")]
        if not order:
            return {}
        base = _base_llava(self.model)
        cache = self._feature_cache(base)
        keys = {i: [(str(samples[i].get("id")), k) if samples[i].get("id") else None
                    for k in range(len(samples[i]["images"]))] for i in order}
        todo = [(i, k, image) for i in order for k, image in enumerate(samples[i]["images"])
                if keys[i][k] not in cache]
        device, dtype = self.device, _float_dtype(self.model)
        fresh: dict[tuple[int, int], torch.Tensor] = {}
        for chunk in _chunks(todo, batch_size):
            pixels = self._pixel_fn([image for _, _, image in chunk]).to(device, dtype)
            feats = base.model.get_image_features(pixel_values=pixels, return_dict=True)
            for (i, k, _), feat in zip(chunk, feats.pooler_output):
                fresh[i, k] = feat
                key = keys[i][k]
                size = feat.numel() * feat.element_size()
                if key is not None and self._features_bytes + size <= FEATURE_CACHE_BYTES:
                    cache[key] = feat
                    self._features_bytes += size
        return {i: [fresh[i, k] if (i, k) in fresh else cache[key]
                    for k, key in enumerate(keys[i])] for i in order}

    def _feature_cache(self, base: torch.nn.Module) -> dict[tuple[str, int], torch.Tensor]:
        """Projected picture features by (sample id, picture index), kept while the vision
        tower and projector are unchanged: the key is every such parameter's identity, storage
        and in-place version counter, so any update (an optimizer step, a load) empties it."""
        modules = [m for m in (getattr(base.model, "vision_tower", None),
                               getattr(base.model, "multi_modal_projector", None)) if m is not None]
        key = tuple((id(p), p.data_ptr(), p._version) for m in modules for p in m.parameters())
        if key != self._features_key:
            self._features, self._features_key, self._features_bytes = {}, key, 0
        return self._features

    def last_hidden(self, samples: Sequence[Mapping[str, Any]], *,
                    batch_size: int | None = None) -> torch.Tensor:
        """Last-layer hidden state of the last prompt token of each sample, ``[B, H]`` float32.

        Computed on the chat-wrapped prompt (no answer), with whatever adapters are active, in
        eval mode and without gradients.
        """
        parts = []
        with self._inference():
            for chunk in _chunks(samples, batch_size):
                batch = self.collate(chunk, train=False)
                out = self._forward(batch, output_hidden_states=True)
                parts.append(out.hidden_states[-1][:, -1, :].float())
        return torch.cat(parts, dim=0)


#: Memory a bundle may keep for reused picture features (evaluation reads the same test
#: pictures for every client and every round).
FEATURE_CACHE_BYTES = 256 * 2**20


def _option_chunks(samples: Sequence[Mapping[str, Any]], wanted: Sequence[int],
                   size: int | None) -> Iterator[list[int]]:
    """Consecutive samples of ``wanted`` whose options add up to at most ``size`` rows (a
    sample with more options than ``size`` goes alone)."""
    if size is not None and size < 1:
        raise ValueError(f"batch_size must be >= 1 or None, got {size}")
    chunk: list[int] = []
    rows = 0
    for index in wanted:
        n = len(samples[index]["choices"])
        if chunk and size is not None and rows + n > size:
            yield chunk
            chunk, rows = [], 0
        chunk.append(index)
        rows += n
    if chunk:
        yield chunk


def _chunks(items: Sequence[Any], size: int | None) -> Iterator[Sequence[Any]]:
    if size is not None and size < 1:
        raise ValueError(f"batch_size must be >= 1 or None, got {size}")
    step = len(items) if size is None else size
    for start in range(0, len(items), max(step, 1)):
        yield items[start:start + step]


def _base_llava(model: torch.nn.Module) -> torch.nn.Module:
    """The ``...ForConditionalGeneration`` under any adapter wrapper."""
    base = getattr(model, "get_base_model", None)
    return base() if base is not None else model


def _base_config(model: torch.nn.Module) -> Any:
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "text_config"):
        base = getattr(model, "get_base_model", None)
        if base is not None:
            config = base().config
    return config


def _float_dtype(model: torch.nn.Module) -> torch.dtype:
    for param in model.parameters():
        if param.is_floating_point():
            return param.dtype
    return torch.float32
