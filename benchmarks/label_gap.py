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

``--probe`` also fits two linear probes on the label layer's input, per family: from the answer
position to the gold option's text (is the looked-up value there for the head to match?) and
from each option's last word to its own text (is each option's value there?).

Beside each family: chance (the mean of one over the option count). Where the three fall
together, the chain breaks at the pointer: the head does not find the option that holds the
value the model looked up. Where the pointer is right and the read-out is not, the labels are
not bound to their options' words.

    python benchmarks/label_gap.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--samples 3000] [--probe] [--seed 0] [--json FILE]

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


def read_heads(bundle: Any, samples: Sequence[dict[str, Any]], states: bool = False
               ) -> list[dict[str, Any] | None]:
    """Per sample, :func:`chain` and its option count (None when no option line is the gold
    answer), read in stage 4's own forward pass (no gradient). With ``states``, also the label
    layer's input at the answer position (``answer_state``) and at each option's last word
    (``option_states``), with the options' texts (``option_texts``; ``gold``, the gold one's
    index), for :func:`value_probes`."""
    found: list[dict[str, Any] | None] = []
    layers = bundle.model.model.language_model.layers
    entering: dict[str, torch.Tensor] = {}

    def keep_input(_module: Any, args: Any, kwargs: Any) -> None:
        hidden = kwargs.get("hidden_states")
        entering["hidden"] = args[0] if hidden is None else hidden

    def record(bundle: Any, items: Any, attentions: Any, head_inputs: Any,
               heads: tuple[tuple[int, int], tuple[int, int]]) -> None:
        (layer, head), _ = heads
        for row, item in enumerate(items):
            tokens = bundle.tokenizer.convert_ids_to_tokens(list(item.ids))
            lines = label.option_lines(tokens)
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
            link = {**chain(mass, [float(logits[t]) for t in spelt], gold[0]),
                    "options": len(lines)}
            if states:
                hidden = entering["hidden"][row]
                link.update(answer_state=hidden[query].clone(), gold=gold[0],
                            option_states=[hidden[words[-1]].clone() for _, _, words in lines],
                            option_texts=[bundle.tokenizer.convert_tokens_to_string(
                                [tokens[w] for w in words]).strip() for _, _, words in lines])
            found.append(link)
        return None

    model = bundle.model
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")  # the label head's attention weights are read
    label_layer = label.LABEL_HEADS[bundle.name][0][0]
    hook = layers[label_layer].register_forward_pre_hook(keep_input, with_kwargs=True)
    try:
        with torch.no_grad():
            for start in range(0, len(samples), _BATCH):
                label._step_loss(bundle, samples[start:start + _BATCH], losses=record)
    finally:
        hook.remove()
        model.set_attn_implementation(before)
    return found


def value_probes(samples: Sequence[dict[str, Any]], links: Sequence[dict[str, Any] | None],
                 train: float = 0.7, min_questions: int = 40) -> dict[str, dict[str, Any]]:
    """Per family (with ``min_questions`` or more), held-out accuracy of two linear probes
    (:func:`picture_gap.linear_probe`) on the label layer's input, fitted on the first ``train``
    share of the questions (the options of a question stay on its side): from the answer
    position to the gold option's text (is the looked-up value there for the label head to
    match?) and from an option's last word to its own text (is each option's value there?)."""
    from picture_gap import linear_probe

    by_family: dict[str, list[dict[str, Any]]] = {}
    for sample, link in zip(samples, links):
        if link is not None:
            by_family.setdefault(pretrain._meta(sample)["family"], []).append(link)
    out = {}
    for family, rows in sorted(by_family.items()):
        if len(rows) < min_questions:
            continue
        cut = int(train * len(rows))
        texts = sorted({t for r in rows for t in r["option_texts"]})
        index = {t: i for i, t in enumerate(texts)}
        answer_x = torch.stack([r["answer_state"] for r in rows])
        answer_y = torch.tensor([index[r["option_texts"][r["gold"]]] for r in rows])
        option_x = torch.stack([x for r in rows for x in r["option_states"]])
        option_y = torch.tensor([index[t] for r in rows for t in r["option_texts"]])
        option_cut = sum(len(r["option_texts"]) for r in rows[:cut])
        out[family] = {"questions": len(rows), "values": len(texts),
                       "answer": linear_probe(answer_x, answer_y, cut, classes=len(texts)),
                       "options": linear_probe(option_x, option_y, option_cut,
                                               classes=len(texts))}
    return out


def measure(bundle: Any, samples: Sequence[dict[str, Any]], probe: bool = False
            ) -> dict[str, Any]:
    """Per family and over all: questions, chance, mean gold mass and how often the pointer,
    the read-out and the greedy answer are right; with ``probe``, also :func:`value_probes`."""
    links = read_heads(bundle, samples, states=probe)
    answers = bundle.generate(samples, max_new_tokens=3, batch_size=32)
    rows: dict[str, list[dict[str, float]]] = {}
    for sample, link, answer in zip(samples, links, answers):
        if link is None:
            continue
        row = {**{k: link[k] for k in ("mass", "pointer", "readout", "options")},
               "answer": float(answer.strip() == sample["answer"])}
        for key in (pretrain._meta(sample)["family"], "all"):
            rows.setdefault(key, []).append(row)
    result = {family: {"questions": len(r), "chance": float(np.mean([1 / x["options"] for x in r])),
                       **{k: float(np.mean([x[k] for x in r]))
                          for k in ("mass", "pointer", "readout", "answer")}}
              for family, r in sorted(rows.items(), key=lambda kv: (kv[0] == "all", kv[0]))}
    out = {"families": result, "unlabelled": sum(link is None for link in links)}
    if probe:
        out["probes"] = value_probes(samples, links)
    return out


def table(result: dict[str, Any]) -> str:
    lines = ["| family | n | chance | gold mass | pointer | read-out | answer |",
             "|---|---|---|---|---|---|---|"]
    for family, r in result["families"].items():
        lines.append(f"| {family} | {r['questions']} | {100 * r['chance']:.1f} | "
                     f"{r['mass']:.2f} | {100 * r['pointer']:.1f} | {100 * r['readout']:.1f} | "
                     f"{100 * r['answer']:.1f} |")
    if result.get("probes"):
        lines += ["linear probes on the label layer's input (held out, %): the gold option's text "
                  "from the answer position; an option's text from its last word",
                  "| family | n | values | answer position | option word |", "|---|---|---|---|---|"]
        lines += [f"| {family} | {r['questions']} | {r['values']} | {100 * r['answer']:.1f} | "
                  f"{100 * r['options']:.1f} |" for family, r in result["probes"].items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--samples", type=int, default=3000,
                        help="held-out public samples to draw the questions from (default 3000)")
    parser.add_argument("--probe", action="store_true",
                        help="also fit linear probes on the label layer's input (value_probes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error(f"--samples must be >= 1, got {args.samples}")
    heads = label.LABEL_HEADS.get(args.model)
    if heads is None:
        parser.error(f"--model {args.model} has no label head; choose one of "
                     f"{sorted(label.LABEL_HEADS)}")
    bundle = load_tiny(args)
    samples = label_questions(args.samples, args.seed)
    result = {"model": args.model, "model_cache": args.model_cache, "seed": args.seed,
              "label_head": list(heads[0]), **measure(bundle, samples, args.probe)}
    print(f"{args.model}: label head {tuple(heads[0])}, {len(samples)} held-out lettered or "
          "numbered look-ups (%)")
    print(table(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
