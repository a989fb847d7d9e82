"""Which public questions does a pretrained tiny model answer, per family and answer format?

``synth-public-formats`` asks the public question families (the background, a shape's colour,
the count, ...) in the client tasks' answer formats: ``open`` (a word), ``choice`` (a word from
a choice list), ``letter`` (the option's letter), ``id`` (the option's number) and ``verdict``
(is a proposed answer right). This script scores held-out questions (``test`` split) by greedy
exact match, as pretraining's report does, but per family *and* format, beside each cell's
chance (the mean of one over the option count; none for ``open``).

Read across a row: where ``open`` and ``choice`` are near 1 and ``letter`` is near chance, the
model finds the answer but cannot give its label, so the lettered client tasks fail on the
option indirection, not on the look-up (issue #13).

    python benchmarks/public_formats.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--samples 2400] [--seed 0] [--formats letter choice open]

The pretrained tiny models are the shipped ones unless ``--model-cache`` names a cache that
``drake models pretrain`` filled.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluators.choice import parse_choices

FORMATS = ("open", "choice", "letter", "id", "verdict")

# drake.models re-exports the function `pretrain`, which hides the module of that name
pretrain = importlib.import_module("drake.models.pretrain")


def model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model-cache`` and ``--model``: which pretrained tiny model a probe reads."""
    parser.add_argument("--model-cache", default=None,
                        help="tiny-model cache (default: the shipped pretrained weights)")
    parser.add_argument("--model", default="tiny-llava-qwen")


def load_tiny(args: argparse.Namespace) -> Any:
    """The model :func:`model_arguments` named, with torch on one thread (the probes' timing
    and float order)."""
    import torch

    from drake.models import load_model

    torch.set_num_threads(1)
    return load_model(args.model, cache_dir=args.model_cache)


def save_model_cache(bundle: Any, root: Path, model: str, record: str,
                     settings: dict[str, Any]) -> Path:
    """Write ``bundle``'s model and tokenizer to the model cache ``root`` (``root/<model>/``),
    where ``--model-cache root`` reads them, with the run's ``settings`` as ``record`` (JSON)
    beside them; returns the folder."""
    from drake.models.loading import quiet_transformers

    folder = root / model
    folder.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        bundle.model.save_pretrained(str(folder))
    bundle.tokenizer.save_pretrained(str(folder))
    (folder / record).write_text(json.dumps(settings, indent=2, sort_keys=True))
    return folder


def write_json(path: str | None, result: dict[str, Any]) -> None:
    """Write a benchmark's ``result`` to ``path`` (its ``--json``), sorted and indented; nothing
    when ``path`` is None."""
    if path:
        Path(path).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


def options(sample: dict[str, Any]) -> list[str] | None:
    """The answers a formats question offers (labels for ``letter``/``id``), None for ``open``.

    The options are read from the prompt as the reference evaluation reads them
    (:func:`evaluators.choice.parse_choices`).

    Raises
    ------
    ValueError
        Naming the sample id, when its prompt offers no options its format needs.
    """
    fmt = meta(sample)["format"]
    if fmt == "open":
        return None
    found = parse_choices(sample["prompt"])
    if len(found) < 2:
        raise ValueError(f"sample {sample['id']} ({fmt} format) offers {found!r}; expected two "
                         "or more options in its prompt")
    if fmt == "letter":
        return [chr(ord("A") + i) for i in range(len(found))]
    if fmt == "id":
        return [str(i + 1) for i in range(len(found))]
    return found


def meta(sample: dict[str, Any]) -> dict[str, Any]:
    """A formats sample's ``meta`` (its family and answer format)."""
    return json.loads(sample["meta"])


def gold_index(sample: dict[str, Any]) -> int:
    """Index of the gold answer among the sample's offered answers (:func:`options` order)."""
    return options(sample).index(sample["answer"].strip())


def table(bundle: Any, samples: Sequence[dict[str, Any]],
          formats: Sequence[str] = FORMATS) -> dict[str, dict[str, dict[str, float]]]:
    """``{family: {format: {"accuracy", "chance", "n"}}}`` over the samples of ``formats``.

    Every sample of those formats is scored once (``n`` over the cells sums to their count);
    ``chance`` is None for ``open``.
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in samples:
        info = meta(s)
        if info["format"] in formats:
            groups.setdefault((info["family"], info["format"]), []).append(s)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (family, fmt), group in sorted(groups.items()):
        hits = pretrain.exact_hits(bundle, group)
        out.setdefault(family, {})[fmt] = {
            "accuracy": round(100.0 * float(np.mean(hits)), 1),
            "chance": None if fmt == "open" else
            round(100.0 * float(np.mean([1 / len(options(s)) for s in group])), 1),
            "n": len(group),
        }
    return out


def format_means(result: dict[str, dict[str, dict[str, float]]], formats: Sequence[str] = FORMATS
                 ) -> dict[str, tuple[float | None, float | None, int]]:
    """Per format, over the families of a :func:`table`: ``(accuracy, chance, n)``, the means
    weighted by each cell's count (None where undefined: no sample, or chance of ``open``)."""
    out: dict[str, tuple[float | None, float | None, int]] = {}
    for f in formats:
        cells = [row[f] for row in result.values() if f in row]
        n = sum(c["n"] for c in cells)
        acc = sum(c["accuracy"] * c["n"] for c in cells) / n if n else None
        chance = (sum(c["chance"] * c["n"] for c in cells) / n
                  if n and f != "open" else None)
        out[f] = (acc, chance, n)
    return out


def _cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "-"
    chance = "" if c["chance"] is None else f"{c['chance']:.0f}"
    return f"{c['accuracy']:5.1f} [{chance:>3}] /{c['n']:<4}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--samples", type=int, default=2400,
                        help="held-out formats questions drawn (all formats)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    args = parser.parse_args()

    bundle = load_tiny(args)
    samples = pretrain.public_samples("synth-public-formats", "test", args.samples, args.seed)
    result = table(bundle, samples, args.formats)
    print(f"{args.model}: held-out synth-public-formats, greedy exact match % "
          "(chance in brackets, n after /)")
    print(f"{'family':<12} " + " ".join(f"{f:>20}" for f in args.formats))
    for family, row in result.items():
        print(f"{family:<12} " + " ".join(f"{_cell(row.get(f)):>20}" for f in args.formats))
    for f, (acc, chance, n) in format_means(result, args.formats).items():
        if n:
            print(f"all {f}: {acc:.1f}% of {n}" + ("" if chance is None else
                                                 f" (chance {chance:.1f})"))


if __name__ == "__main__":
    main()
