"""Does a pretrained tiny model see the objects but fail to look one up? (#13)

Stage 2 of ``drake models pretrain`` trains every image token, read through the tied output
embeddings, to name its grid cell's largest object (colour, shape, fill and size words: the
*grounding* loss). So the facts a look-up needs sit in the image tokens, bound per cell, as the
text models of ``benchmarks/composition_depth.py`` get them with ``--facts bound``. This script
measures both halves on held-out public pictures (``test`` split):

* **seen**: per cell holding an object, whether the projected image token names that object's
  colour, shape, fill and size (the argmax among the words of that slot);
* **looked up**: the greedy answers to the two plainest look-ups, "what colour is the <shape>?"
  and "which shape is <colour>?" (the public ``colour`` and ``shape`` families), beside what a
  model would score that answers with an attribute *present in the picture* picked at random
  (the mean of one over the distinct values present), and how often the answer is present at all.

A model that sees (grounding near 100%) but scores near the present-guess line names a colour it
sees without finding the one asked about: the look-up is missing, not the vision.

``--attention N`` also reads where the answer position looks, on the first N questions of each
look-up whose picture holds two objects or more: per layer and head, the mean attention per image
token on the named object's cell against that on another object's cell. A head that finds the
named object puts several times more on its cell; one that reads the picture as a bag, about
the same.

    python benchmarks/lookup_gap.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--questions 600] [--attention 150] [--seed 0] [--json FILE]

One thread, CPU: the defaults take about a minute, ``--attention 150`` 15 s more.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from public_formats import load_tiny, model_arguments, write_json

pretrain = importlib.import_module("drake.models.pretrain")

#: The look-up families; each is named after the attribute it asks (its answer).
LOOKUPS = ("colour", "shape")
SLOTS = ("colour", "shape", "fill", "size")
#: Public questions generated at a time while collecting the look-up families.
_CHUNK = 400


def scene_objects(sample: dict[str, Any]) -> list[dict[str, str]]:
    """The attributes of every object in a one-picture public sample (from its ``meta``)."""
    from drake.synth.scene import Scene

    scene = Scene.from_summary(pretrain._meta(sample)["scenes"][0])
    return [{"colour": o.colour, "shape": o.shape, "fill": o.fill, "size": o.size}
            for o in scene.objects]


def present_guess(sample: dict[str, Any], attribute: str) -> float:
    """Expected accuracy of answering with a value of ``attribute`` present in the picture,
    drawn at random among the distinct ones."""
    values = {o[attribute] for o in scene_objects(sample)}
    return 1.0 / len(values) if values else 0.0


def slot_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """Per grounding slot, the share of cells whose target word wins the argmax among the words
    that slot names anywhere in ``targets`` (cells with no object, ``IGNORE_INDEX``, skipped).
    ``logits``: (cells, vocabulary); ``targets``: (cells, 4) word ids in :data:`SLOTS` order."""
    known = targets[:, 0] >= 0
    out = {}
    for j, slot in enumerate(SLOTS):
        words = torch.unique(targets[known][:, j])
        if not len(words):
            continue
        picked = words[logits[known][:, words].argmax(1)]
        out[slot] = float((picked == targets[known][:, j]).float().mean())
    return out


def lookup_questions(count: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """The first ``count`` held-out ``synth-public-open`` questions of each look-up family."""
    found: dict[str, list[dict[str, Any]]] = {f: [] for f in LOOKUPS}
    start = 0
    while min(len(v) for v in found.values()) < count:
        for s in pretrain.public_samples("synth-public-open", "test", _CHUNK, seed, start=start):
            family = pretrain._meta(s)["family"]
            if family in found and len(found[family]) < count:
                found[family].append(s)
        start += _CHUNK
    return found


def grounding(bundle: Any, samples: Sequence[dict[str, Any]]) -> tuple[dict[str, float], int]:
    """:func:`slot_accuracy` of ``samples``' pictures through ``bundle``'s tower and projector,
    and the number of cells holding an object."""
    model = bundle.model
    features = pretrain._Features(bundle, pretrain._picture_inputs(bundle, samples))
    feats, words = features.rows(range(len(samples)))
    with torch.no_grad():
        projected = model.model.multi_modal_projector(feats).reshape(-1, bundle.hidden_size)
        logits = model.get_output_embeddings()(projected)
    targets = words.reshape(-1, 4)
    return slot_accuracy(logits, targets), int((targets[:, 0] >= 0).sum())


def object_cells(sample: dict[str, Any], attribute: str) -> tuple[list[int], list[int]]:
    """(cells of the object the question is about, cells of the other objects): the grid cells
    whose grounding words (:func:`drake.models.vision.grounding_words`) name an object whose
    ``attribute`` is the gold answer, and the other non-empty cells."""
    from drake.models.vision import grounding_words

    cells = grounding_words(pretrain._meta(sample)["scenes"][0])
    slot = SLOTS.index(attribute)
    named = [k for k, words in enumerate(cells) if words and words[slot] == sample["answer"]]
    return named, [k for k, words in enumerate(cells) if words and k not in named]


def selectivity(attentions: Sequence[torch.Tensor], image: Sequence[int], named: Sequence[int],
                others: Sequence[int]) -> torch.Tensor:
    """(layers, heads, 2): the last position's mean attention per image token on the ``named``
    cells and on the ``others``. ``attentions``: per layer, (heads, positions, positions) of one
    question; ``image``: the positions of its image tokens, in cell order."""
    rows = torch.stack([layer[:, -1, :] for layer in attentions])
    return torch.stack([rows[:, :, [image[k] for k in named]].mean(-1),
                        rows[:, :, [image[k] for k in others]].mean(-1)], dim=-1)


def attention(bundle: Any, samples: Sequence[dict[str, Any]], attribute: str,
              count: int) -> dict[str, Any]:
    """:func:`selectivity` averaged over the first ``count`` of ``samples`` with a named object
    and another one (eager attention: the model is switched to it and back)."""
    model = bundle.model
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    total, used = None, 0
    try:
        for sample in samples:
            if used == count:
                break
            named, others = object_cells(sample, attribute)
            if not named or not others:
                continue
            prompt = bundle._encode(sample, answer=None, eos=False)
            inputs = pretrain._picture_inputs(bundle, [sample])
            feats, words = pretrain._Features(bundle, inputs).rows([0])
            batch, embeds, _ = pretrain.multimodal_inputs(
                bundle, [pretrain._Encoded(prompt.ids, prompt.labels, [])], feats, words)
            with torch.no_grad():
                out = model.model.language_model(inputs_embeds=embeds,
                                                 attention_mask=batch["attention_mask"],
                                                 output_attentions=True)
            image = [i for i, t in enumerate(prompt.ids) if t == bundle.image_token_id]
            picked = selectivity([a[0] for a in out.attentions], image, named, others)
            total = picked if total is None else total + picked
            used += 1
    finally:
        model.set_attn_implementation(before)
    if total is None:
        return {"questions": 0, "named": [], "other": []}
    mean = total / used
    return {"questions": used, "named": mean[..., 0].tolist(), "other": mean[..., 1].tolist()}


def measure(bundle: Any, count: int, seed: int, heads: int = 0) -> dict[str, Any]:
    questions = lookup_questions(count, seed)
    pictures = [s for family in LOOKUPS for s in questions[family]]
    seen, cells = grounding(bundle, pictures)
    result: dict[str, Any] = {"grounding": seen, "cells": cells, "lookups": {}}
    for attribute in LOOKUPS:
        samples = questions[attribute]
        outputs = bundle.generate(samples, max_new_tokens=4, batch_size=64)
        answers = [o.strip() for o in outputs]
        result["lookups"][attribute] = {
            "questions": len(samples),
            "accuracy": float(np.mean([a == s["answer"] for a, s in zip(answers, samples)])),
            "present_guess": float(np.mean([present_guess(s, attribute) for s in samples])),
            "answer_present": float(np.mean([
                a in {o[attribute] for o in scene_objects(s)} for a, s in zip(answers, samples)])),
        }
        if heads:
            result["lookups"][attribute]["attention"] = attention(bundle, samples, attribute,
                                                                  heads)
    return result


def table(result: dict[str, Any]) -> str:
    lines = [f"seen: per cell with an object ({result['cells']} cells), the image token names its "
             "object's",
             "  " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in result["grounding"].items()),
             "looked up (greedy, held out):",
             "| question | n | accuracy | present-guess line | answer present in picture |",
             "|---|---|---|---|---|"]
    for family, r in result["lookups"].items():
        lines.append(f"| {family} | {r['questions']} | {100 * r['accuracy']:.1f} | "
                     f"{100 * r['present_guess']:.1f} | {100 * r['answer_present']:.1f} |")
    for family, r in result["lookups"].items():
        seen = r.get("attention")
        if not seen:
            continue
        lines.append(f"attention of the answer position, {family} ({seen['questions']} questions "
                     "with two objects or more): per head, named cell / other object's cell")
        for layer, (named, other) in enumerate(zip(seen["named"], seen["other"])):
            lines.append(f"  layer {layer}: " + "  ".join(f"{a:.3f}/{b:.3f}"
                                                          for a, b in zip(named, other)))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--questions", type=int, default=600,
                        help="held-out questions per look-up family (default 600)")
    parser.add_argument("--attention", type=int, default=0,
                        help="also read the answer position's attention on this many questions "
                        "per look-up (default 0: not read)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    if args.questions < 1 or args.attention < 0:
        parser.error(f"--questions must be >= 1 and --attention >= 0, got {args.questions} "
                     f"and {args.attention}")
    bundle = load_tiny(args)
    result = {"model": args.model, "model_cache": args.model_cache, "seed": args.seed,
              **measure(bundle, args.questions, args.seed, args.attention)}
    print(table(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
