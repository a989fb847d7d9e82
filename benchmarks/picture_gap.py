"""Does a pretrained tiny model see every picture but fail to compare pictures? (#13)

Most multi-picture client twins stay at chance under a LoRA (``synth-triple-style``,
``synth-quality-pair``, ``synth-pair-statement``, the "Image A-D" choices), while the
one-picture questions they compose (the background, the photo quality, a colour present) are
answered in pretraining. This script finds where a multi-picture question loses the pictures,
with linear probes (one linear layer, fitted on the first 3/4 of a task's samples and scored on
the rest) at three points of the model:

* **seen**: each picture's projected image tokens, averaged: its background (one of the six
  domains), and for every colour and shape whether the picture holds one;
* **placed**: every image token's hidden state, per layer (0 = the projected token the language
  model receives): which picture of the prompt the token belongs to;
* **gathered**: the answer position's hidden state (the last prompt token), per layer: the
  background of each picture, and the gold answer.

A model that sees and places but does not gather reads the pictures without carrying them to
the answer; one that gathers each picture but does not answer has them at hand and cannot
compare them.

    python benchmarks/picture_gap.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--tasks synth-triple-style synth-quality-pair] [--samples 600] [--seed 0] [--json FILE]

One thread, CPU: about a minute per task at the defaults.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from public_formats import load_tiny, model_arguments

DEFAULT_TASKS = ("synth-triple-style", "synth-quality-pair", "synth-pair-statement",
                 "synth-idiom-image")
#: Samples forwarded at a time.
_BATCH = 24


def linear_probe(x: torch.Tensor, y: torch.Tensor, train: int, *, classes: int,
                 steps: int = 300, seed: int = 0) -> float:
    """Accuracy on rows ``train:`` of a linear classifier fitted on rows ``:train``.

    ``x`` (rows, features) is standardised with the training rows' mean and spread; the
    classifier is fitted full-batch by Adam (lr 1e-2, weight decay 1e-3) on cross-entropy over
    ``classes`` classes (``y`` holds class ids)."""
    generator = torch.Generator().manual_seed(seed)
    x = x.float()
    x = (x - x[:train].mean(0)) / (x[:train].std(0) + 1e-5)
    layer = torch.nn.Linear(x.shape[1], classes)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) * 0.01)
        layer.bias.zero_()
    opt = torch.optim.Adam(layer.parameters(), lr=1e-2, weight_decay=1e-3)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(layer(x[:train]), y[:train]).backward()
        opt.step()
    with torch.no_grad():
        return float((layer(x[train:]).argmax(1) == y[train:]).float().mean())


def picture_facts(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Per picture of ``sample`` (from its ``meta["scenes"]``): its background's index among
    :data:`~drake.synth.scene.DOMAINS` (held-out domains follow them) and the colours and
    shapes it holds."""
    from drake.synth.scene import ALL_DOMAINS, Scene

    meta = sample["meta"]
    meta = json.loads(meta) if isinstance(meta, str) else meta
    out = []
    for summary in meta["scenes"]:
        scene = Scene.from_summary(summary)
        out.append({"background": ALL_DOMAINS.index(scene.domain),
                    "colours": {o.colour for o in scene.objects},
                    "shapes": {o.shape for o in scene.objects}})
    return out


def picture_of_tokens(ids: Sequence[int], image_token_id: int, per_picture: int
                      ) -> list[tuple[int, int]]:
    """(position, picture index) of every image token in ``ids``: the pictures' tokens come in
    blocks of ``per_picture``, in prompt order."""
    positions = [i for i, token in enumerate(ids) if token == image_token_id]
    if len(positions) % per_picture:
        raise ValueError(f"{len(positions)} image tokens are not blocks of {per_picture}")
    return [(p, k // per_picture) for k, p in enumerate(positions)]


def task_samples(task: str, count: int, seed: int) -> list[dict[str, Any]]:
    """The first ``count`` training samples of ``task`` at its default knobs; every one must
    hold the same number of pictures (two or more)."""
    from drake.synth.catalog import generate_sample

    samples = [generate_sample(task, "train", i, seed) for i in range(count)]
    counts = {len(s["images"]) for s in samples}
    if len(counts) != 1 or min(counts) < 2:
        raise SystemExit(f"{task}: picture_gap needs a task whose samples all hold the same "
                         f"number of pictures, two or more; these hold {sorted(counts)}")
    return samples


def seen(bundle: Any, samples: Sequence[dict[str, Any]], train: int) -> dict[str, float]:
    """Probe accuracies of the averaged projected tokens of every picture (the pictures of the
    first ``train`` samples fit the probes): ``background``, and ``colour present`` and ``shape
    present`` averaged over the colours and shapes, each beside its majority baseline."""
    from drake.synth.scene import ALL_DOMAINS, COLOURS, SHAPES

    with torch.no_grad():
        per_sample = bundle._image_features(samples, set(range(len(samples))), 64)
    x = torch.stack([f.float().mean(0) for i in range(len(samples)) for f in per_sample[i]])
    facts = [fact for s in samples for fact in picture_facts(s)]
    cut = sum(len(s["images"]) for s in samples[:train])
    result = {"pictures": len(facts),
              "background": linear_probe(x, torch.tensor([f["background"] for f in facts]), cut,
                                         classes=len(ALL_DOMAINS))}
    for key, words in (("colour", COLOURS), ("shape", SHAPES)):
        right, base_rate = [], []
        for word in words:
            y = torch.tensor([int(word in f[f"{key}s"]) for f in facts])
            right.append(linear_probe(x, y, cut, classes=2))
            share = float(y[cut:].float().mean())
            base_rate.append(max(share, 1.0 - share))
        result[f"{key} present"] = float(np.mean(right))
        result[f"{key} present baseline"] = float(np.mean(base_rate))
    return result


def hidden_states(bundle: Any, samples: Sequence[dict[str, Any]]
                  ) -> tuple[list[torch.Tensor], list[list[tuple[int, int]]], list[torch.Tensor]]:
    """Per sample: the hidden states of its image tokens (layers + 1, tokens, hidden), their
    picture indices, and the answer position's hidden states (layers + 1, hidden)."""
    per_picture = bundle.model.config.image_seq_length
    tokens, where, answer = [], [], []
    with torch.no_grad():
        for start in range(0, len(samples), _BATCH):
            batch = bundle.collate(samples[start:start + _BATCH], train=False)
            states = torch.stack(bundle._forward(batch, output_hidden_states=True).hidden_states,
                                 dim=1).float()
            for row, ids in enumerate(batch["input_ids"].tolist()):
                placed = picture_of_tokens(ids, bundle.image_token_id, per_picture)
                tokens.append(states[row][:, [p for p, _ in placed]])
                where.append(placed)
                answer.append(states[row][:, -1])  # left-padded: the last prompt token
    return tokens, where, answer


def placed(tokens: Sequence[torch.Tensor], where: Sequence[list[tuple[int, int]]],
           train: int) -> list[float]:
    """Per layer, the probe accuracy of an image token's picture index (tokens of the first
    ``train`` samples fit it)."""
    x = torch.cat([t.transpose(0, 1) for t in tokens])  # tokens, layers + 1, hidden
    y = torch.tensor([k for placed_ in where for _, k in placed_])
    cut = sum(len(placed_) for placed_ in where[:train])
    pictures = int(y.max()) + 1
    return [linear_probe(x[:, layer], y, cut, classes=pictures) for layer in range(x.shape[1])]


def gathered(answer: Sequence[torch.Tensor], samples: Sequence[dict[str, Any]], train: int
             ) -> dict[str, Any]:
    """Per layer, the probe accuracy of each picture's background and of the gold answer from
    the answer position's hidden state."""
    from drake.synth.scene import ALL_DOMAINS

    x = torch.stack(list(answer))  # samples, layers + 1, hidden
    backgrounds = torch.tensor([[f["background"] for f in picture_facts(s)] for s in samples])
    choices = samples[0]["choices"]
    gold = torch.tensor([choices.index(s["answer"]) for s in samples])
    layers = range(x.shape[1])
    return {
        "background": [[linear_probe(x[:, layer], backgrounds[:, k], train,
                                     classes=len(ALL_DOMAINS)) for k in range(backgrounds.shape[1])]
                       for layer in layers],
        "answer": [linear_probe(x[:, layer], gold, train, classes=len(choices))
                   for layer in layers],
        "answer baseline": float(torch.bincount(gold[train:]).max()) / len(gold[train:]),
    }


def measure(bundle: Any, task: str, count: int, seed: int) -> dict[str, Any]:
    samples = task_samples(task, count, seed)
    train = (3 * count) // 4
    tokens, where, answer = hidden_states(bundle, samples)
    return {"task": task, "samples": count, "pictures": len(samples[0]["images"]),
            "seen": seen(bundle, samples, train), "placed": placed(tokens, where, train),
            "gathered": gathered(answer, samples, train)}


def table(result: dict[str, Any]) -> str:
    pct = lambda v: f"{100 * v:.1f}"  # noqa: E731
    seen_ = result["seen"]
    gathered_ = result["gathered"]
    lines = [f"{result['task']} ({result['pictures']} pictures, {result['samples']} samples, "
             "probes fitted on the first 3/4):",
             f"  seen ({seen_['pictures']} pictures): background {pct(seen_['background'])}%, "
             f"colour present {pct(seen_['colour present'])}% (baseline "
             f"{pct(seen_['colour present baseline'])}), shape present "
             f"{pct(seen_['shape present'])}% (baseline {pct(seen_['shape present baseline'])})",
             f"  placed, by layer (chance {pct(1 / result['pictures'])}): "
             + ", ".join(pct(v) for v in result["placed"]),
             "  gathered at the answer position, by layer: each picture's background / the answer "
             f"(baseline {pct(gathered_['answer baseline'])})"]
    for layer, (backgrounds, answer) in enumerate(zip(gathered_["background"],
                                                      gathered_["answer"])):
        lines.append(f"    layer {layer}: " + " ".join(pct(v) for v in backgrounds)
                     + f" / {pct(answer)}")
    return "\n".join(lines)


def probe_main(doc: str, tasks: Sequence[str], samples: int,
               measure_task: Callable[[Any, str, int, int], dict[str, Any]],
               show: Callable[[dict[str, Any]], str]) -> None:
    """The command line of a probe script (this one, ``position_gap.py``): the model, the
    tasks (default ``tasks``), samples per task (default ``samples``) and seed; each task's
    ``measure_task(bundle, task, samples, seed)`` printed by ``show``, and all of them written
    to ``--json``."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    model_arguments(parser)
    parser.add_argument("--tasks", nargs="+", default=list(tasks))
    parser.add_argument("--samples", type=int, default=samples)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    bundle = load_tiny(args)
    bundle.model.eval()
    results = []
    for task in args.tasks:
        results.append(measure_task(bundle, task, args.samples, args.seed))
        print(show(results[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"model": args.model, "model_cache": args.model_cache, "seed": args.seed,
                       "results": results}, fh, indent=1)
            fh.write("\n")


def main() -> None:
    probe_main(__doc__, DEFAULT_TASKS, 600, measure, table)


if __name__ == "__main__":
    main()
