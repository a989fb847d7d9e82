"""Where, layer by layer, does a pretrained tiny model hold the answer it is asked for? (#13)

``public_formats.py`` shows the tiny models pick answers from a word list (``choice``) well above
chance and answer by option label (``letter``, ``id``) at chance. This script looks inside, on
held-out ``synth-public-formats`` questions in those three formats, at the answer position (the
prompt's last token, where the first answer token is predicted), after every layer:

* the *lens*: the residual stream read through the final norm and the tied output embeddings
  (a logit lens) ranks the first tokens of the offered answers' words (a choice list's words;
  the words on the option lines of a lettered or numbered question). Reported: how often the
  gold answer's word ranks first (ties, from words sharing a first token, broken at random).
  After the last layer it is the model's own output ranking of those words. A lettered
  question whose gold word ranks first at some layer holds the answer there as a word, which
  the label step could then match to its option line. Layer 0 is the last prompt token's
  embedding, the same in every question: its rate is the words' prior, the baseline to read
  the later layers against;
* the *probe* (lettered and numbered questions): a logistic regression on the same residual,
  trained on 70% of the questions and scored on the rest, predicts the gold option's index
  (argmax over the question's options). Above chance, the residual knows which option is
  right in some linear form, whether or not the model emits its label.

    python benchmarks/answer_lens.py [--model tiny-llava-qwen] [--model-cache DIR]
        [--weights FILE.safetensors] [--samples 6000] [--families background fill] [--seed 0]

``--weights`` loads a language model saved by ``option_indirection.py --save`` over the
pretrained one. One thread, CPU; 6,000 held-out questions (about 3,600 in these formats) take
about 2 minutes on the 3-layer qwen.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from option_indirection import answer_token, lens_logits
from public_formats import gold_index, load_tiny, meta, model_arguments, options

from evaluators.choice import parse_choices

#: Formats whose offered answers are words the lens can rank.
FORMATS = ("choice", "letter", "id")
#: Share of the lettered and numbered questions the probe trains on.
PROBE_TRAIN = 0.7


def word_ids(bundle: Any, sample: dict[str, Any]) -> list[int]:
    """First token of each offered answer's word as the model would answer it, in option order
    (the listed word of a choice list, the word on each option line of a lettered or numbered
    question)."""
    return [answer_token(bundle, sample, w) for w in parse_choices(sample["prompt"])]


def answer_states(bundle: Any, sample: dict[str, Any]) -> torch.Tensor:
    """``[layers + 1, hidden]``: the residual stream at the answer position, as the embedding
    (row 0) and after each layer (the last row after the final norm, as transformers returns
    it)."""
    model = bundle.model
    enc = bundle._encode(sample, answer=None, eos=False)
    with torch.no_grad():
        out = model(**bundle._pad([enc], left=False, with_labels=False),
                    output_hidden_states=True)
    return torch.stack([h[0, -1] for h in out.hidden_states])


def lens_scores(bundle: Any, states: torch.Tensor, ids: Sequence[int]) -> torch.Tensor:
    """``[layers + 1, options]``: each layer's logit-lens logits of the offered words ``ids``
    (:func:`answer_states` rows)."""
    with torch.no_grad():
        return torch.cat([lens_logits(bundle, states[:-1], final=False),
                          lens_logits(bundle, states[-1:], final=True)])[:, list(ids)]


def gold_first(scores: torch.Tensor, gold: int) -> np.ndarray:
    """Per row of ``[layers, options]`` scores, the chance that the gold option ranks first
    with ties broken at random: 1 / (number of top options) if the gold is among them, else 0.
    (Options whose words share a first token tie.)"""
    top = scores == scores.max(1, keepdim=True).values
    return (top[:, gold].float() / top.sum(1)).numpy()


def fit_probe(x: np.ndarray, y: np.ndarray, classes: int, *, steps: int = 300, seed: int = 0):
    """A logistic regression of labels ``y`` on standardised features ``x`` (Adam, weight
    decay 1e-3); returns a function from features to ``[n, classes]`` logits."""
    torch.manual_seed(seed)
    xs, ys = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    mean, std = xs.mean(0), xs.std(0) + 1e-5
    linear = torch.nn.Linear(xs.shape[1], classes)
    optimizer = torch.optim.Adam(linear.parameters(), lr=1e-2, weight_decay=1e-3)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(linear((xs - mean) / std), ys)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def predict(z: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return linear((torch.tensor(z, dtype=torch.float32) - mean) / std).numpy()

    return predict


def probe_accuracy(states: np.ndarray, gold: np.ndarray, counts: np.ndarray, seed: int = 0
                   ) -> float:
    """Percent of the held-out questions (the last ``1 - PROBE_TRAIN``) whose gold option a
    probe trained on the first ones picks, the argmax over each question's ``counts`` options."""
    cut = int(round(PROBE_TRAIN * len(gold)))
    predict = fit_probe(states[:cut], gold[:cut], int(counts.max()), seed=seed)
    logits = predict(states[cut:])
    picks = [int(np.argmax(row[:k])) for row, k in zip(logits, counts[cut:])]
    return 100.0 * float(np.mean(np.array(picks) == gold[cut:]))


def measure(bundle: Any, samples: Sequence[dict[str, Any]], seed: int = 0
            ) -> dict[str, dict[str, Any]]:
    """Per format of :data:`FORMATS` among ``samples``: ``n``, ``chance`` and per layer the
    lens's gold-first rate (``lens``), all in percent; the lettered and numbered formats also
    the probe's accuracy per layer (``probe``, on their held-out share)."""
    out: dict[str, dict[str, Any]] = {}
    for fmt in FORMATS:
        group = [s for s in samples if meta(s)["format"] == fmt]
        if not group:
            continue
        states = [answer_states(bundle, s) for s in group]
        gold = np.array([gold_index(s) for s in group])
        counts = np.array([len(options(s)) for s in group])
        first = np.array([gold_first(lens_scores(bundle, st, word_ids(bundle, s)), g)
                          for st, s, g in zip(states, group, gold)])
        row: dict[str, Any] = {
            "n": len(group), "chance": round(100.0 * float(np.mean(1 / counts)), 1),
            "lens": [round(100.0 * float(np.mean(first[:, k])), 1)
                     for k in range(first.shape[1])]}
        if fmt != "choice":
            stacked = torch.stack(states).numpy()
            row["probe"] = [round(probe_accuracy(stacked[:, k], gold, counts, seed), 1)
                            for k in range(stacked.shape[1])]
        out[fmt] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_arguments(parser)
    parser.add_argument("--weights", default=None,
                        help="safetensors written by option_indirection.py --save")
    parser.add_argument("--samples", type=int, default=6000,
                        help="held-out formats questions drawn (all formats)")
    parser.add_argument("--families", nargs="+", default=None,
                        help="only these public families (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import importlib

    pretrain = importlib.import_module("drake.models.pretrain")
    bundle = load_tiny(args)
    if args.weights:
        from safetensors.torch import load_file

        missing = bundle.model.load_state_dict(load_file(args.weights), strict=False).missing_keys
        if [k for k in missing if k != "lm_head.weight"]:
            raise SystemExit(f"{args.weights} lacks {missing[:3]}...: not a full {args.model}")
        bundle.model.tie_weights()
    bundle.model.eval()
    samples = [s for s in pretrain.public_samples("synth-public-formats", "test", args.samples,
                                                  args.seed)
               if args.families is None or meta(s)["family"] in args.families]
    result = measure(bundle, samples, args.seed)
    print(f"{args.model}{' + ' + args.weights if args.weights else ''}: held-out "
          "synth-public-formats at the answer position, per layer (0: embeddings); % of "
          "questions")
    for fmt, row in result.items():
        print(f"{fmt:>7} (n {row['n']}, chance {row['chance']}): lens gold first "
              + " ".join(f"{a:5.1f}" for a in row["lens"])
              + ("" if "probe" not in row else "; probe gold option "
                 + " ".join(f"{a:5.1f}" for a in row["probe"])))


if __name__ == "__main__":
    main()
