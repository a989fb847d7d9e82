"""Where does the label step break? (#13)

Stage 4 of ``drake models pretrain`` (the label step) trains a chain at the answer position of
a lettered or numbered question: the *label head* (:data:`drake.models.label_pretrain.LABEL_HEADS`)
attends to the option whose words hold the looked-up answer, and its own output names that
option's label, which the answer then gives. This script reads each link on held-out questions
(``test`` split of ``synth-public-formats``: one picture, a look-up family that names its
object, the lettered or numbered format), per family:

* **pointer**: the label head's attention from the answer position, summed over each option's
  words; right when the gold option gets the most (``mass`` is the gold option's share);
* **read-out**: the label head's own output at the answer position, read through the final norm
  and the tied head (as stage 4's read-out loss reads it), among the options' labels; right when
  the gold label scores highest;
* **answer**: the model's greedy answer, right when it is the gold label.

Beside each family: chance (the mean of one over the option count). Where the three fall
together, the chain breaks at the pointer: the head does not find the option that holds the
value the model looked up. Where the pointer is right and the read-out is not, the labels are
not bound to their options' words.

    python benchmarks/label_gap.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--samples 3000] [--seed 0] [--json FILE]

``--samples`` public questions are drawn; about one in seven is a lettered or numbered look-up.
One thread, CPU: the defaults take about two minutes.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from public_formats import load_tiny, model_arguments, write_json

from drake.models.bundle import IGNORE_INDEX

pretrain = importlib.import_module("drake.models.pretrain")
label = importlib.import_module("drake.models.label_pretrain")

#: The formats whose answer is an option's label.
FORMATS = ("letter", "id")
_BATCH = 16


def label_questions(count: int, seed: int) -> list[dict[str, Any]]:
    """The lettered and numbered look-up questions among the first ``count`` held-out
    ``synth-public-formats`` samples of ``seed``, in index order."""
    samples = pretrain.public_samples("synth-public-formats", "test", count, seed)
    return [s for s in samples
            if pretrain._meta(s).get("format") in FORMATS
            and pretrain._meta(s).get("family") in pretrain.LOOKUP_FAMILIES
            and label.named_cells(s, formats=True)]


def chain(mass: Sequence[float], readout: Sequence[float], gold: int) -> dict[str, float]:
    """One question's links: ``mass`` (the label head's attention per option), ``readout``
    (its output's score per option's label), ``gold`` (the gold option's index)."""
    return {"mass": float(mass[gold]),
            "pointer": float(int(np.argmax(mass)) == gold),
            "readout": float(int(np.argmax(readout)) == gold)}


def read_heads(bundle: Any, samples: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Per sample, :func:`chain` and its option count (None when no option line is the gold
    answer), read in stage 4's own forward pass (no gradient)."""
    found: list[dict[str, Any] | None] = []

    def record(bundle: Any, items: Any, attentions: Any, head_inputs: Any,
               heads: tuple[tuple[int, int], tuple[int, int]]) -> None:
        (layer, head), _ = heads
        for row, item in enumerate(items):
            lines = label.option_lines(bundle.tokenizer.convert_ids_to_tokens(list(item.ids)))
            answer = next(i for i, t in enumerate(item.labels) if t != IGNORE_INDEX)
            spelt = [label._answer_token(bundle, name) for name, _, _ in lines]
            gold = [k for k, token in enumerate(spelt) if token == item.labels[answer]]
            if not gold:
                found.append(None)
                continue
            query = answer - 1
            mass = [float(attentions[layer][row, head, query, words].sum())
                    for _, _, words in lines]
            logits = label.head_logits(bundle, head_inputs[layer][row, query], layer, head)
            found.append({**chain(mass, [float(logits[t]) for t in spelt], gold[0]),
                          "options": len(lines)})
        return None

    model = bundle.model
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")  # the label head's attention weights are read
    try:
        with torch.no_grad():
            for start in range(0, len(samples), _BATCH):
                label._step_loss(bundle, samples[start:start + _BATCH], losses=record)
    finally:
        model.set_attn_implementation(before)
    return found


def measure(bundle: Any, samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per family and over all: questions, chance, mean gold mass and how often the pointer,
    the read-out and the greedy answer are right."""
    links = read_heads(bundle, samples)
    answers = bundle.generate(samples, max_new_tokens=3, batch_size=32)
    rows: dict[str, list[dict[str, float]]] = {}
    for sample, link, answer in zip(samples, links, answers):
        if link is None:
            continue
        row = {**link, "answer": float(answer.strip() == sample["answer"])}
        for key in (pretrain._meta(sample)["family"], "all"):
            rows.setdefault(key, []).append(row)
    result = {family: {"questions": len(r), "chance": float(np.mean([1 / x["options"] for x in r])),
                       **{k: float(np.mean([x[k] for x in r]))
                          for k in ("mass", "pointer", "readout", "answer")}}
              for family, r in sorted(rows.items(), key=lambda kv: (kv[0] == "all", kv[0]))}
    return {"families": result, "unlabelled": sum(link is None for link in links)}


def table(result: dict[str, Any]) -> str:
    lines = ["| family | n | chance | gold mass | pointer | read-out | answer |",
             "|---|---|---|---|---|---|---|"]
    for family, r in result["families"].items():
        lines.append(f"| {family} | {r['questions']} | {100 * r['chance']:.1f} | "
                     f"{r['mass']:.2f} | {100 * r['pointer']:.1f} | {100 * r['readout']:.1f} | "
                     f"{100 * r['answer']:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--samples", type=int, default=3000,
                        help="held-out public samples to draw the questions from (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error(f"--samples must be >= 1, got {args.samples}")
    bundle = load_tiny(args)
    heads = label.LABEL_HEADS.get(args.model)
    if heads is None:
        parser.error(f"--model {args.model} has no label head; choose one of "
                     f"{sorted(label.LABEL_HEADS)}")
    samples = label_questions(args.samples, args.seed)
    result = {"model": args.model, "model_cache": args.model_cache, "seed": args.seed,
              "label_head": list(heads[0]), **measure(bundle, samples)}
    print(f"{args.model}: label head {tuple(heads[0])}, {len(samples)} held-out lettered or "
          "numbered look-ups (%)")
    print(table(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
