"""Can a tiny model learn a drake-synth task? LoRA on one task, held-out accuracy over steps.

For each task, samples are generated directly with the task's knobs (``drake.synth.knobs``, or
the overrides given here), so a knob can be tried without a build. A fresh LoRA (the zoo's
defaults) on a pretrained tiny model trains on ``--train-size`` samples of the task alone, and
``--test`` held-out samples are scored by option likelihood before training and every
``--every`` steps. It prints chance, the score before training and the curve.

This is the calibration measurement of drake-synth: ``--json drake/synth/calibration.json``
records it, and the dataset card renders that file (a test checks that the recorded knobs are
still the defaults, so the table cannot silently describe other data).

    python benchmarks/learnability.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--tasks synth-spatial ...] [--steps 240] [--every 80] [--closeness 0.0]
        [--objects 1 2] [--degradation 1.0] [--count 1 5] [--jobs 2] [--device cuda]
        [--json drake/synth/calibration.json]

With ``--tasks``, an existing ``--json`` file measured with the same settings keeps its other
rows, so a re-calibrated task can be re-measured alone.

``--tasks probe-colour-lookup`` measures the smallest text-conditioned look-up instead (see
:data:`LOOKUP_PROBE`), ``--tasks probe-where-lookup`` the same look-up of a position
(:data:`WHERE_PROBE`), ``--tasks probe-option-copy`` the language model's option indirection
alone, without pictures (:data:`COPY_PROBE`), and ``--tasks probe-text-two-hop`` the look-up and
the option indirection composed, both in text (:data:`TWO_HOP_PROBE`); ``--full`` trains every
weight, to tell capacity from the LoRA setup.

The pretrained tiny models are the shipped ones unless ``--model-cache`` names a cache that
``drake models pretrain`` filled.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import torch
from lora_probe import hits, lora_bundle, open_scores, train

from drake.workers import exit_with_parent

LOOKUP_PROBE = "probe-colour-lookup"
"""Not a drake-synth task: public pictures of one to four shapes (distinct shapes and colours)
asked "Is the <shape> <colour>?" (Yes/No), the gold colour or another one with equal odds. It
is the smallest text-conditioned visual look-up (the question names what to find), which every
client statement task composes. A model that cannot learn it cannot learn those tasks."""


def _yes_no_probe(split: str, count: int, seed: int, family: str, salt: int,
                  values: Sequence[str], question: Callable[[dict, str], str]) -> list[dict]:
    """The first ``count`` pictures of ``synth-public-open``'s ``family`` questions, each asked
    the Yes/No ``question(sample, value)`` of its own answer (Yes) or, with equal odds, of
    another of ``values`` (No), drawn by a generator of its own (``salt``)."""
    from drake.synth.catalog import generate_sample

    rng = np.random.default_rng([seed, salt])
    out, index = [], 0
    while len(out) < count:
        sample = generate_sample("synth-public-open", split, index, seed)
        index += 1
        if json.loads(sample["meta"])["family"] != family:
            continue
        truth = bool(rng.random() < 0.5)
        value = sample["answer"] if truth else str(
            rng.choice([v for v in values if v != sample["answer"]]))
        out.append({**sample, "choices": ["Yes", "No"], "answer": "Yes" if truth else "No",
                    "prompt": f"<image>\n{question(sample, value)}\nChoice list:[Yes, No]. "
                              "Your answer is:"})
    return out


def lookup_probe(split: str, count: int, seed: int) -> list[dict]:
    from drake.synth.scene import COLOURS, SHAPES

    def question(sample: dict, colour: str) -> str:
        shape = next(s for s in SHAPES if f" the {s}." in sample["prompt"])
        return f"Is the {shape} {colour}?"

    return _yes_no_probe(split, count, seed, "colour", 7, COLOURS, question)


WHERE_PROBE = "probe-where-lookup"
"""Not a drake-synth task: :data:`LOOKUP_PROBE` with a position for the colour. Public pictures of
one to five shapes (distinct shapes and colours) asked "Is the <colour> <shape> at the
<position>?" (Yes/No; one of the nine grid positions), the object's own position or another one
with equal odds. It is the smallest position look-up, which the spatial client tasks compose
(two of them, then a comparison)."""


def where_probe(split: str, count: int, seed: int) -> list[dict]:
    from drake.synth.scene import POSITIONS

    def question(sample: dict, position: str) -> str:
        named = re.search(r"where the (\w+ \w+) sits\.", sample["prompt"]).group(1)
        return f"Is the {named} at the {position}?"

    return _yes_no_probe(split, count, seed, "where", 8, POSITIONS, question)


COPY_PROBE = "probe-option-copy"
"""Not a drake-synth task, and no picture: "Which option is <word>?" over two to five lettered or
numbered options of public words, answered with the option's letter or id. It is the indirection
every lettered and numbered client task ends with (find the option that says the answer, give
its label), with the look-up taken away: the question states the answer. A model that cannot
learn it cannot answer those tasks however well it sees."""

#: Words of the option-copy probe: the public scene vocabulary.
_COPY_WORDS = ("left", "right", "centre", "top", "bottom", "under", "above", "nothing")
_LETTERS = "ABCDE"


def _probe_rng(seed: int, salt: int, split: str) -> np.random.Generator:
    """A text probe's generator: its own stream per probe (``salt``) and split."""
    return np.random.default_rng([seed, salt, {"public": 0, "test": 1}[split]])


def _option_lines(labels, words) -> str:
    return "\n".join(f"{label}. {word}" for label, word in zip(labels, words))


def option_probe(split: str, count: int, seed: int) -> list[dict]:
    from drake.synth.scene import COLOURS, SHAPES

    words = list(COLOURS) + list(SHAPES) + list(_COPY_WORDS)
    rng = _probe_rng(seed, 11, split)
    out = []
    for i in range(count):
        k = int(rng.integers(2, 6))
        options = [str(w) for w in rng.choice(words, k, replace=False)]
        gold = int(rng.integers(k))
        if rng.random() < 0.5:
            labels = list(_LETTERS[:k])
            tail = "Answer with the option's letter from the given choices directly."
        else:
            labels = [str(j + 1) for j in range(k)]
            tail = f"Print only the answer with a single answer id ({','.join(labels)})."
        body = _option_lines(labels, options)
        out.append({"id": f"{COPY_PROBE}-{split}-{i}", "images": [], "choices": labels,
                    "answer": labels[gold],
                    "prompt": f"Question: Which option is {options[gold]}?\n{body}\n{tail}"})
    return out


TWO_HOP_PROBE = "probe-text-two-hop"
"""Not a drake-synth task, and no picture: two to four facts in text ("The star is red."), then
"What colour is the <shape>?" over two to four lettered colours, answered with the letter. It is
the composition the lettered client tasks need (look the answer up, then give the label of the
option that says it) with both hops in text, so it measures the language model's depth for it
apart from the vision side. The asked shape's colour is always among the options; the others are
colours the facts may or may not mention."""


def two_hop_probe(split: str, count: int, seed: int) -> list[dict]:
    from drake.synth.scene import COLOURS, SHAPES

    rng = _probe_rng(seed, 13, split)
    out = []
    for i in range(count):
        k = int(rng.integers(2, 5))
        shapes = [str(w) for w in rng.choice(SHAPES, k, replace=False)]
        colours = [str(w) for w in rng.choice(COLOURS, k, replace=False)]
        asked = int(rng.integers(k))
        others = [c for c in COLOURS if c != colours[asked]]
        options = [colours[asked], *(str(c) for c in rng.choice(others, int(rng.integers(1, 4)),
                                                                replace=False))]
        rng.shuffle(options)
        labels = list(_LETTERS[:len(options)])
        facts = "\n".join(f"The {shape} is {colour}." for shape, colour in zip(shapes, colours))
        body = _option_lines(labels, options)
        out.append({"id": f"{TWO_HOP_PROBE}-{split}-{i}", "images": [], "choices": labels,
                    "answer": labels[options.index(colours[asked])],
                    "prompt": f"{facts}\nQuestion: What colour is the {shapes[asked]}?\n{body}\n"
                              "Answer with the option's letter from the given choices directly."})
    return out


PROBES = {LOOKUP_PROBE: lookup_probe, WHERE_PROBE: where_probe, COPY_PROBE: option_probe,
          TWO_HOP_PROBE: two_hop_probe}
#: The knob overrides, named as the :class:`~drake.synth.knobs.Knobs` fields they replace.
KNOB_FLAGS = ("closeness", "objects", "degradation", "count")
#: Flags added after the calibration was first recorded: in its settings only when given.
LATER_FLAGS = ("degradation", "count")


def knobs_for(task: str, args: argparse.Namespace):
    from drake.synth.knobs import DEFAULT_KNOBS

    given = {name: getattr(args, name) for name in KNOB_FLAGS}
    return dataclasses.replace(DEFAULT_KNOBS[task], **{
        name: tuple(value) if isinstance(value, list) else value
        for name, value in given.items() if value is not None})


def group_of(sample: dict, key: str, words: int) -> str:
    """A sample's group for ``--by``: its ``meta[key]`` (a list joined by ``+``), cut to its
    first ``words`` words when ``words`` > 0."""
    value = json.loads(sample["meta"]).get(key)
    text = "+".join(map(str, value)) if isinstance(value, list) else str(value)
    return " ".join(text.split()[:words]) if words > 0 else text


def by_group(samples: list[dict], right: list[bool], key: str, words: int
             ) -> dict[str, list[float]]:
    """Per group (:func:`group_of`): [accuracy in percent, sample count]."""
    groups: dict[str, list[bool]] = {}
    for sample, hit in zip(samples, right):
        groups.setdefault(group_of(sample, key, words), []).append(hit)
    return {g: [round(100.0 * float(np.mean(v)), 1), len(v)] for g, v in sorted(groups.items())}


def _progress(task: str, step: int, steps: int, score: str) -> None:
    """A scored point, on stderr as it comes (a long ``--full`` run is otherwise silent until
    its task ends; the table goes to stdout)."""
    print(f"{task}: step {step}/{steps}, {score}", file=sys.stderr, flush=True)


def measure(task: str, args: argparse.Namespace) -> dict | None:
    """Train a fresh LoRA on ``task`` and return its curve: option-likelihood accuracy for a
    multiple-choice task; token F1 (``curve``) and exact match (``exact``) of greedy answers for
    an open-ended one, which has no chance level (its gain is over the untrained model)."""
    torch.set_num_threads(1)
    from drake.synth.catalog import generate_sample

    if task in PROBES:
        knobs = None
        test = PROBES[task]("test", args.test, args.seed)
        train_set = PROBES[task]("public", args.train_size, args.seed)
    else:
        knobs = knobs_for(task, args)
        test = [generate_sample(task, "test", i, args.seed, knobs=knobs)
                for i in range(args.test)]
        train_set = [generate_sample(task, "train", i, args.seed, knobs=knobs)
                     for i in range(args.train_size)]
    bundle, params = lora_bundle(args.model, args.model_cache, args.seed, full=args.full,
                                 train_vision=args.train_vision, device=args.device)
    if test[0]["choices"]:
        chance: float | None = round(100.0 * float(np.mean([1 / len(s["choices"])
                                                            for s in test])), 2)
        last = hits(bundle, test)  # the latest scored point's outcomes, for --by
        curve, exact = [100.0 * sum(last) / len(test)], None

        def score(step: int) -> None:
            last[:] = hits(bundle, test)
            curve.append(100.0 * sum(last) / len(test))
            _progress(task, step, args.steps, f"acc {curve[-1]:.1f}")
    else:
        chance, (f1, em) = None, open_scores(bundle, test)
        curve, exact = [f1], [em]

        def score(step: int) -> None:
            f1, em = open_scores(bundle, test)
            curve.append(f1)
            exact.append(em)
            _progress(task, step, args.steps, f"token F1 {f1:.1f}")
    start = time.perf_counter()
    losses = train(bundle, params, train_set, steps=args.steps, batch_size=args.batch_size,
                   lr=args.lr, seed=args.seed, every=args.every, on_eval=score)
    extra = {} if exact is None else {"metric": "token_f1",
                                      "exact": [round(a, 2) for a in exact]}
    if args.by and chance is not None:
        extra["by"] = by_group(test, last, args.by, args.by_words)
    return {**extra, "chance": chance, "curve": [round(a, 2) for a in curve],
            "knobs": dataclasses.asdict(knobs) if knobs else None,
            "train_loss": [round(float(np.mean(losses[:20])), 4),
                           round(float(np.mean(losses[-20:])), 4)],
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-cache", default=None,
                        help="tiny-model cache (default: the shipped pretrained weights)")
    parser.add_argument("--model", default="tiny-llava-qwen")
    parser.add_argument("--tasks", nargs="+", default=None,
                        help="default: every client task of drake-synth")
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--every", type=int, default=80)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--train-size", type=int, default=600)
    parser.add_argument("--test", type=int, default=80, help="test samples per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--closeness", type=float, default=None, help="override every task's")
    parser.add_argument("--objects", type=int, nargs=2, default=None, metavar=("LO", "HI"),
                        help="override every task's")
    parser.add_argument("--degradation", type=float, default=None,
                        help="override every task's (in the quality tasks, the smallest gap "
                        "between the options' degradations: higher is easier)")
    parser.add_argument("--count", type=int, nargs=2, default=None, metavar=("LO", "HI"),
                        help="override every counting task's range of counts")
    parser.add_argument("--train-vision", action="store_true",
                        help="also train the projector and the vision tower (not FedMosaic's "
                        "setup: it tells whether the frozen visual path is the bottleneck)")
    parser.add_argument("--full", action="store_true",
                        help="train every weight besides the LoRA (capacity, not the PFL setup)")
    parser.add_argument("--jobs", type=int, default=1, help="tasks measured in parallel")
    parser.add_argument("--device", default="cpu",
                        help="where the LoRA trains (cuda where there is one; a table measured "
                        "off the CPU names its device in its settings)")
    parser.add_argument("--by", default=None, metavar="KEY",
                        help="also print the final accuracy per value of the samples' meta[KEY] "
                        "(family, changed, modification, ...); not recorded by --json")
    parser.add_argument("--by-words", type=int, default=0, metavar="N",
                        help="with --by, group by the value's first N words")
    parser.add_argument("--json", default=None, help="write the table here")
    args = parser.parse_args()
    from drake.registry import get_benchmark

    tasks = args.tasks or [t for c in get_benchmark("drake-synth").clients for t in c.tasks]
    if args.json and (set(PROBES) & set(tasks) or args.full or args.train_vision):
        raise SystemExit("--json records the calibration setup only: drop the probe, --full and "
                         "--train-vision")
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn"),
                             initializer=exit_with_parent) as pool:
        futures = {t: pool.submit(measure, t, args) for t in tasks}
        table = {}
        for task, future in futures.items():
            row = table[task] = future.result()
            loss = f"  (train loss {row['train_loss'][0]:.3f} -> {row['train_loss'][1]:.3f})"
            if row["chance"] is None:
                print(f"{task:<24} open-ended  token F1 "
                      + " ".join(f"{a:5.1f}" for a in row["curve"]) + "  exact "
                      + " ".join(f"{a:5.1f}" for a in row["exact"]) + loss, flush=True)
                continue
            print(f"{task:<24} chance {row['chance']:5.1f}  acc "
                  + " ".join(f"{a:5.1f}" for a in row["curve"]) + loss, flush=True)
            for group, (acc, n) in row.pop("by", {}).items():
                print(f"    {args.by} {group}: {acc:5.1f}% of {n}", flush=True)
    final = [r["curve"][-1] - r["chance"] for r in table.values() if r["chance"] is not None]
    print(f"mean gain over chance after {args.steps} steps: {np.mean(final):+.1f} points; "
          f"{sum(g >= 15 for g in final)} of {len(final)} multiple-choice tasks gain 15 points "
          f"or more ({sum(g >= 10 for g in final)} gain 10 or more)")
    if args.json:
        settings = {k: v for k, v in vars(args).items()
                    if k not in ("json", "jobs", "tasks", "model_cache", "by", "by_words")}
        if args.device == "cpu":  # the recorded calibration's device, implied
            del settings["device"]
        for name in LATER_FLAGS:
            if settings[name] is None:
                del settings[name]
        path = Path(args.json)
        if args.tasks and path.exists():  # re-measured tasks replace their rows
            old = json.loads(path.read_text())
            if old["settings"] != settings:
                raise SystemExit(f"{path} was measured with other settings ({old['settings']});"
                                 " re-measure every task (no --tasks) or use the same settings")
            table = {**old["tasks"], **table}
        path.write_text(json.dumps({"settings": settings, "tasks": table},
                                   indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
