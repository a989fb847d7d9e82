"""Stage 4 of ``drake models pretrain`` (``--label-steps N``, after stage 3 or alone with
``--label-only``): teach a tiny LLaVA the *label step*, answering a lettered or numbered
question with the label of the option that holds the answer it looked up.

After stage 3 the tiny families look a named object up, yet asked the same question over
lettered options ("A. red / B. blue / C. green; answer with the option's letter") they answer
at chance (``benchmarks/public_formats.py``), and neither more such questions nor their answer
loss alone teaches the step (the card's measured paragraphs, issue #13). The step needs three
things no loss of the earlier stages names, so this stage supervises each:

* **binding**: at every token of an option's text, head :data:`LABEL_HEADS` ``[name][1]`` (a
  head of the first layer) attends to that option's label token (``-log`` of that attention,
  averaged over the option tokens), and its own output, read through the final norm and the
  tied head, names the label as the answer would spell it (cross-entropy): the option's words
  then carry their label;
* **the label pointer**: from the answer position, head ``[name][0]`` (a free head of the last
  layer) attends to the gold option's text tokens (``-log`` of that attention's sum);
* **the read-out**: that head's output at the answer position, read the same way, names the
  gold label (cross-entropy).

Each weighs 1 beside stage 2's answer and grounding losses and stage 3's look-up pointer
(:data:`drake.models.lookup_pretrain.POINTER_HEADS`), which here also covers the label
questions (:func:`~drake.models.lookup_pretrain.named_cells` with ``formats``). A step's
samples are :data:`DEFAULT_LABEL_SHARE` label questions (:func:`label_sample`: one-picture
``synth-public-formats`` questions in the lettered, numbered or verdict format, of the look-up
families, that name their object; the verdicts keep that format from being forgotten) and the
rest drawn as stage 3 draws them. Everything else (optimiser, schedule, checkpoints, report)
is stage 3's (:func:`drake.models.lookup_pretrain.run_attention_stage`); the report gains
``label_stage``.

Measured (the dataset card, *Supervising the label step*; issue #13). Without the value
read-out below, 2,000 steps of 32 at ``lr=2e-3`` from the stage-3 ``tiny-llava-qwen`` took it
from 36.8% to 48.6% on held-out lettered questions and from 37.8% to 44.6% on numbered ones
(``benchmarks/public_formats.py``; chance about 37%); ``tiny-llava-llama`` moved to 39.3% and
39.0%, and the colour and shape questions stayed at chance in both. The label pointer sits
near one over the option count for some hundreds of steps before it finds the gold option.

``value_weight`` > 0 adds a fifth loss, the *value read-out* (:func:`value_loss`): at the
answer position, the first look-up head's own output names the first word of the gold
option's text, the value the look-up should bring under the option lines. Without it the
answer position carried the gold colour in 71% of lettered questions and the label head found
its option in 47% (``benchmarks/label_gap.py``); with weight 1 the colour and shape label
answers rose from 35 and 27% to 71 and 66%, and ``tiny-llava-llama``'s label head left chance.
The defaults (:data:`DEFAULT_VALUE_WEIGHT` 1, :data:`DEFAULT_LABEL_LR` 1e-3,
:data:`~drake.models.pretrain.DEFAULT_LABEL_STEPS` steps, seed 0) made the shipped weights
(the card, *Stage 4 in the shipped weights*).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch
import torch.nn.functional as F

from drake.models.bundle import IGNORE_INDEX, ModelBundle, _Encoded
from drake.models.lookup_pretrain import (
    _STREAM_START,
    LOOKUP_STAGE,
    POINTER_HEADS,
    POINTER_WEIGHT,
    AttentionStage,
    StagePlans,
    named_cells,
    pointer_loss,
    run_attention_stage,
)
from drake.models.pretrain import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CHECKPOINT_EVERY,
    DEFAULT_EVAL_SIZE,
    DEFAULT_LABEL_STEPS,
    LOOKUP_FAMILIES,
    Progress,
    _Features,
    _first_kept,
    _language_loss,
    _meta,
    _prepare,
)

__all__ = [
    "DEFAULT_LABEL_LR",
    "DEFAULT_LABEL_SHARE",
    "DEFAULT_VALUE_WEIGHT",
    "LABEL_FORMATS",
    "LABEL_HEADS",
    "LABEL_STAGE",
    "label_losses",
    "label_sample",
    "option_lines",
    "pretrain_label",
    "value_loss",
]

#: The report key this stage adds.
LABEL_STAGE = "label_stage"
#: Formats of the label questions: the two the step serves and the verdict, kept in training.
LABEL_FORMATS = ("letter", "id", "verdict")
DEFAULT_LABEL_SHARE = 0.5
#: Weight of :func:`value_loss` (0 leaves it out). Without it the colour and shape label
#: questions stayed at chance and ``tiny-llava-llama``'s label head did not leave it at all.
DEFAULT_VALUE_WEIGHT = 1.0
#: Stage 3's. Without the value read-out, 1e-3 left the label pointer on its plateau for 850
#: steps and more; with it, 1e-3 answers the label questions as well as 2e-3 and keeps more of
#: the counting client tasks (a seed-1 trial: ``synth-count-easy`` 69.0% against 52.0%; the
#: stage-3 weights 78.0%).
DEFAULT_LABEL_LR = 1e-3
#: Per family: (the label head, the binding head) as (layer, head). The label head sits in
#: the last layer, after the look-up of :data:`POINTER_HEADS` has brought the answer; in
#: ``tiny-llava-qwen`` head 0 of that layer is unused by the look-up.
LABEL_HEADS: MappingProxyType[str, tuple[tuple[int, int], tuple[int, int]]] = MappingProxyType({
    "tiny-llava-llama": ((3, 0), (0, 0)),
    "tiny-llava-qwen": ((2, 0), (0, 0)),
})
#: Label question ``k`` is the first kept one among ``synth-public-formats`` indices
#: ``_LABEL_START + k * _LABEL_BLOCK`` on; about one in five is kept, so a block misses with
#: odds of about 1e-12 (it then gives its last sample, which trains without the label losses).
_LABEL_START = 9 * 10**8
_LABEL_BLOCK = 128
_LABEL_TASK = "synth-public-formats"
#: A planned label question's pseudo-task.
_LABEL_PLAN = "label-question"
#: This stage's regular draws start beyond stage 3's.
_REGULAR_START = _STREAM_START + 10**8


def label_sample(seed: int, index: int) -> dict[str, Any]:
    """Label question ``index``: the first sample of its block that is a one-picture
    ``synth-public-formats`` question of :data:`LABEL_FORMATS` and a look-up family naming
    its object (:func:`named_cells`)."""
    def keep(sample: dict[str, Any]) -> bool:
        meta = _meta(sample)
        return bool(meta.get("format") in LABEL_FORMATS and meta.get("family") in LOOKUP_FAMILIES
                    and named_cells(sample, formats=True))

    return _first_kept(_LABEL_TASK, seed, _LABEL_START + index * _LABEL_BLOCK, _LABEL_BLOCK, keep)


def option_lines(tokens: Sequence[str]) -> list[tuple[str, int, list[int]]]:
    """The option lines of an encoded prompt, given its tokens as strings: ``(label, label
    position, positions of the option's text)`` per line ``\\nA. text\\n`` or ``\\n1. text\\n``
    (a label is one capital letter or one digit 1-9, alone in its token, then a ``.`` token;
    the text runs to the next line break)."""
    out = []
    for i in range(len(tokens) - 3):
        label = tokens[i + 1]
        if (tokens[i] != "\n" or tokens[i + 2] != "." or len(label) != 1
                or not (label.isupper() or label in "123456789")):
            continue
        end = next((j for j in range(i + 3, len(tokens)) if tokens[j] == "\n"), None)
        if end is not None and end > i + 3:
            out.append((label, i + 1, list(range(i + 3, end))))
    return out


def _answer_token(bundle: ModelBundle, label: str) -> int:
    """The token an answer that is ``label`` starts with (as the prompt's template spells an
    answer: after a space)."""
    ids = bundle.tokenizer(" " + label, add_special_tokens=False).input_ids
    if len(ids) != 1:
        raise ValueError(f"the answer {label!r} is {len(ids)} tokens in {bundle.name}'s "
                         "tokenizer; the label stage needs one-token labels")
    return ids[0]


def head_logits(bundle: ModelBundle, head_inputs: torch.Tensor, layer: int, head: int
                ) -> torch.Tensor:
    """The vocabulary logits of one attention head's own output: ``head_inputs`` (positions,
    heads x head size), the inputs of layer ``layer``'s output projection, sliced to ``head``,
    projected by its columns, normalised by the final norm and read by the tied head."""
    lm = bundle.model.model.language_model
    size = lm.config.hidden_size // lm.config.num_attention_heads
    columns = lm.layers[layer].self_attn.o_proj.weight[:, head * size:(head + 1) * size]
    part = head_inputs[..., head * size:(head + 1) * size] @ columns.T
    return bundle.model.get_output_embeddings()(lm.norm(part))


def _gold_lines(bundle: ModelBundle, item: _Encoded
                ) -> tuple[list[tuple[str, int, list[int]]], list[int], int, list[list[int]]]:
    """An item's option lines (:func:`option_lines`), each line's label as the answer spells
    it, the answer's first position, and the text positions of the lines whose label is the
    gold answer (empty when the gold answer is no line's label)."""
    lines = option_lines(bundle.tokenizer.convert_ids_to_tokens(list(item.ids)))
    answer = next(i for i, label in enumerate(item.labels) if label != IGNORE_INDEX)
    spelt = [_answer_token(bundle, label) for label, _, _ in lines]  # once per line
    gold = [ws for (_, _, ws), token in zip(lines, spelt) if token == item.labels[answer]]
    return lines, spelt, answer, gold


def label_losses(bundle: ModelBundle, items: Sequence[_Encoded],
                 attentions: Sequence[torch.Tensor], head_inputs: dict[int, torch.Tensor],
                 heads: tuple[tuple[int, int], tuple[int, int]]) -> torch.Tensor | None:
    """The four label losses (module docstring), each a mean over the items with option lines
    whose gold answer is one of their labels, summed; None when no item has them.

    ``attentions``: per layer (batch, heads, positions, positions), of a batch padded on the
    right; ``head_inputs``: per layer of ``heads``, the inputs of its output projection
    (batch, positions, heads x head size); ``heads``: (label head, binding head).
    """
    (label_layer, label_head), (bind_layer, bind_head) = heads
    pointer, readout, binding, bound = [], [], [], []
    for row, item in enumerate(items):
        lines, spelt, answer, gold = _gold_lines(bundle, item)
        if not gold:
            continue
        gold_token = item.labels[answer]
        query = answer - 1
        pointer.append(-torch.log(attentions[label_layer][row, label_head, query, gold[0]].sum()
                                  + 1e-6))
        logits = head_logits(bundle, head_inputs[label_layer][row, query], label_layer,
                             label_head)
        readout.append(F.cross_entropy(logits[None], torch.tensor([gold_token])))
        words = [w for _, _, ws in lines for w in ws]
        labels = [at for _, at, ws in lines for _ in ws]
        targets = torch.tensor([token for (_, _, ws), token in zip(lines, spelt) for _ in ws])
        binding.append(-torch.log(attentions[bind_layer][row, bind_head, words, labels]
                                  + 1e-6).mean())
        logits = head_logits(bundle, head_inputs[bind_layer][row, words], bind_layer, bind_head)
        bound.append(F.cross_entropy(logits, targets))
    if not pointer:
        return None
    return sum(torch.stack(terms).mean() for terms in (pointer, readout, binding, bound))


def value_loss(bundle: ModelBundle, items: Sequence[_Encoded],
               head_inputs: dict[int, torch.Tensor], head: tuple[int, int]
               ) -> torch.Tensor | None:
    """The value read-out: at the answer position, look-up head ``head``'s own output, read
    through the final norm and the tied head (:func:`head_logits`), names the first word of
    the gold option's text, the value the look-up should bring (cross-entropy); the mean over
    the items whose gold answer is one of their option labels, None when none is.

    ``head_inputs`` holds the inputs of ``head``'s layer's output projection (batch,
    positions, heads x head size)."""
    layer, index = head
    terms = []
    for row, item in enumerate(items):
        _, _, answer, gold = _gold_lines(bundle, item)
        if not gold:
            continue
        logits = head_logits(bundle, head_inputs[layer][row, answer - 1], layer, index)
        terms.append(F.cross_entropy(logits[None], torch.tensor([int(item.ids[gold[0][0]])])))
    return torch.stack(terms).mean() if terms else None


def _step_loss(bundle: ModelBundle, samples: Sequence[dict[str, Any]],
               losses: Callable[..., torch.Tensor | None] = label_losses,
               value_weight: float = 0.0) -> torch.Tensor:
    """Stage 2's losses, stage 3's pointer loss (label questions included), the label losses
    and, when ``value_weight`` > 0, that weight times :func:`value_loss` on the first head of
    :data:`~drake.models.lookup_pretrain.POINTER_HEADS`, on ``samples``. ``losses`` takes
    :func:`label_losses`' arguments (another function can read the label heads instead:
    ``benchmarks/label_gap.py``)."""
    items, inputs = _prepare(bundle, samples)
    feats, words = _Features(bundle, inputs).rows(range(len(samples)))
    cells = [named_cells(s, formats=True) for s in samples]
    heads = LABEL_HEADS[bundle.name]
    value_head = POINTER_HEADS[bundle.name][0]
    read = {layer for layer, _ in heads} | ({value_head[0]} if value_weight else set())
    layers = bundle.model.model.language_model.layers
    head_inputs: dict[int, torch.Tensor] = {}
    hooks = [layers[layer].self_attn.o_proj.register_forward_pre_hook(
        lambda _module, args, layer=layer: head_inputs.__setitem__(layer, args[0]))
        for layer in read]

    def extra(attentions: Sequence[torch.Tensor]) -> torch.Tensor | None:
        look = pointer_loss(attentions, items, cells, bundle.image_token_id,
                            POINTER_HEADS[bundle.name])
        label = losses(bundle, items, attentions, head_inputs, heads)
        value = value_loss(bundle, items, head_inputs, value_head) if value_weight else None
        kept = [t for t in (None if look is None else POINTER_WEIGHT * look, label,
                            None if value is None else value_weight * value)
                if t is not None]
        return sum(kept) if kept else None

    try:
        return _language_loss(bundle, items, feats, words, extra=extra)
    finally:
        for hook in hooks:
            hook.remove()


def pretrain_label(
    name: str,
    *,
    out_dir: Path | None = None,
    steps: int = DEFAULT_LABEL_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lr: float = DEFAULT_LABEL_LR,
    share: float = DEFAULT_LABEL_SHARE,
    value_weight: float = DEFAULT_VALUE_WEIGHT,
    seed: int = 0,
    eval_size: int = DEFAULT_EVAL_SIZE,
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
    progress: Progress | None = None,
    threads: int | None = 1,
    device: str = "cpu",
) -> Path:
    """Stage 4 on tiny family ``name``: the label step, from its stage-3 weights (the cache's,
    or the shipped ones when no ``out_dir`` is named and the cache has none).

    Arguments as :func:`drake.models.lookup_pretrain.pretrain_lookup`'s; ``share`` is the
    share of each step's samples that are label questions (:func:`label_sample`);
    ``value_weight`` weighs :func:`value_loss` (0: not computed). Raises
    :class:`~drake.models.errors.ModelNotPretrained` without weights to start from and
    ValueError for weights that have not been through stage 3 or have been through this one,
    a bad argument, or a checkpoint of a run with other arguments.
    """
    # a step's label questions first, then the draws of stage 3 (from _REGULAR_START)
    if not (math.isfinite(value_weight) and value_weight >= 0):
        raise ValueError(f"value_weight must be a finite number >= 0, got {value_weight}")
    plans = StagePlans(seed, share, _LABEL_PLAN, _REGULAR_START, label_sample)
    heads = LABEL_HEADS.get(name, ((0, 0), (0, 0)))  # an unknown name is refused by the runner
    spec = AttentionStage(
        key=LABEL_STAGE, title="label", config="label", suffix="label-resume",
        after=LOOKUP_STAGE, starts_from="stage-3", share_name="label_share",
        plan=plans.plan, samples=plans.samples,
        loss=functools.partial(_step_loss, value_weight=value_weight), drawn=plans.drawn,
        report={"label_formats": list(LABEL_FORMATS), "lookup_families": list(LOOKUP_FAMILIES),
                "label_head": list(heads[0]), "binding_head": list(heads[1]),
                "pointer_heads": [list(h) for h in POINTER_HEADS.get(name, ())],
                "pointer_weight": POINTER_WEIGHT, "label_weights": 1.0,
                "value_weight": value_weight},
        settings={"value_weight": value_weight})
    return run_attention_stage(
        spec, name, out_dir=out_dir, steps=steps, batch_size=batch_size, lr=lr, share=share,
        seed=seed, eval_size=eval_size, checkpoint_every=checkpoint_every, progress=progress,
        threads=threads, device=device)
