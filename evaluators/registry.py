"""The metric registry: every metric's direction, range, meaning, and how a task is scored by it.

One table read by the runtime (a task's ``metrics`` in its spec decide how it is scored), by
``results.json`` and by the leaderboard (:mod:`leaderboard.metrics` builds its checks from it).

Two kinds of entries:

* **task metrics** have a ``score(predictions, samples)`` function: predictions are what the
  runtime's answerer returned for each sample (an option index, or ``None``, for a
  multiple-choice sample; a class id for a classification sample; an ``H x W x 3`` array for
  an ``"image"`` sample; text otherwise) and samples are the benchmark rows (``answer``,
  ``choices``, ``label``; an image sample's ``images``, its target last). A task's score is one
  number on the metric's scale; clients and tasks are then combined by ``aggregate``
  (``mean``).
* **run metrics** (``self_a_last``, ``hm``, ...) are computed from the evaluation points by
  the protocol's plan; they have no ``score``.

Names in task specs may use the short forms in :data:`ALIASES` (``bertscore`` is
``bertscore_f1``).

Examples
--------
>>> score_task("accuracy", [0, 1], [{"choices": ["a", "b"], "answer": "a"},
...                                 {"choices": ["a", "b"], "answer": "a"}])
50.0
>>> REGISTRY["mse"].higher_is_better
False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from evaluators.bertscore import bertscore
from evaluators.errors import MetricInputError
from evaluators.generation import bleu, cider, google_bleu, meteor, rouge
from evaluators.image import mse
from evaluators.text import exact_match, token_f1

Scorer = Callable[[Sequence[Any], Sequence[Mapping[str, Any]]], float]


@dataclass(frozen=True)
class Metric:
    """One metric of the suite.

    Parameters
    ----------
    name : str
        As it appears in results, entries and (or by an alias) task specs.
    higher_is_better : bool
        Ranking direction.
    lower, upper : float
        Valid range, inclusive (``math.inf``: unbounded).
    description : str
        What the number means.
    score : callable, optional
        ``score(predictions, samples) -> float`` for task metrics; ``None`` for run metrics.
    aggregate : str
        How values of several tasks or clients combine (``mean``: the unweighted mean).
    """

    name: str
    higher_is_better: bool
    lower: float
    upper: float
    description: str
    score: Scorer | None = None
    aggregate: str = "mean"

    def in_range(self, value: float) -> bool:
        return math.isfinite(value) and self.lower <= value <= self.upper


def _texts(predictions: Sequence[Any]) -> list[str]:
    return ["" if p is None else str(p) for p in predictions]


def _answers(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    return [s["answer"] for s in samples]


def _accuracy(predictions: Sequence[Any], samples: Sequence[Mapping[str, Any]]) -> float:
    right = []
    for i, (p, s) in enumerate(zip(predictions, samples, strict=True)):
        if s.get("choices"):
            if p is not None and not (isinstance(p, int) and 0 <= p < len(s["choices"])):
                raise MetricInputError(f"sample {s.get('id', i)!r}: prediction {p!r} is not an "
                                       f"option index of its {len(s['choices'])} choices")
            right.append(p is not None and s["choices"][p] == s["answer"])
        elif s.get("label", -1) >= 0:
            right.append(p == s["label"])
        else:
            raise MetricInputError(f"sample {s.get('id', i)!r} has neither choices nor a label; "
                                   f"score open answers with token_f1 or a generation metric")
    if not right:
        raise MetricInputError("accuracy of an empty task")
    return 100.0 * sum(right) / len(right)


def _mse(predictions: Sequence[Any], samples: Sequence[Mapping[str, Any]]) -> float:
    """TAP's image generation: each prediction a reconstructed ``H x W x 3`` image, pixels in
    [0, 1]; its target the sample's stored target image, the last of its ``images`` (samples of
    answer type ``"image"``, :mod:`drake.schema`), at that size (RGB, bilinear) scaled to
    [0, 1]; :func:`evaluators.image.mse` of the two. A decoder that works on normalised pixels
    maps them back to [0, 1] before scoring."""
    import numpy as np

    from drake.models.images import to_pil

    targets = []
    for i, (p, s) in enumerate(zip(predictions, samples, strict=True)):
        sid = s.get("id", i)
        if s.get("answer_type") != "image":
            raise MetricInputError(f"sample {sid!r}: mse scores image generation, which needs "
                                   f"answer_type 'image' with its target as the last image; got "
                                   f"answer_type {s.get('answer_type')!r} (rebuild the task)")
        shape = np.shape(p)
        images = list(s.get("images") or [])
        if len(shape) != 3 or shape[2] != 3 or not images:
            raise MetricInputError(f"sample {sid!r}: mse scores a reconstruction of the "
                                   f"sample's target image as an H x W x 3 array; got shape "
                                   f"{shape} for {len(images)} image(s)")
        target = to_pil(images[-1]).resize((shape[1], shape[0]), resample=2)  # bilinear
        targets.append(np.asarray(target, dtype=np.float64) / 255.0)
    return mse([np.asarray(p, dtype=np.float64) for p in predictions], targets)


def _text(fn: Callable[[list[str], list[str]], float]) -> Scorer:
    return lambda predictions, samples: float(fn(_texts(predictions), _answers(samples)))


def _rouge(kind: str) -> Scorer:
    def score(predictions, samples):
        return float(rouge(_texts(predictions), _answers(samples))[kind])

    return score


def _bertscore(predictions, samples) -> float:
    return float(bertscore(_texts(predictions), _answers(samples))["f1"])


def _pct(name: str, description: str, score: Scorer | None = None,
         higher: bool = True) -> Metric:
    return Metric(name, higher, 0.0, 100.0, description, score)


_ALL = (
    # run metrics (computed by the protocols' plans)
    _pct("self_a_last", "Self accuracy at the last evaluation point (own tasks)"),
    _pct("self_a_auc", "Self accuracy averaged over evaluation points (area under curve)"),
    _pct("others_a_last", "Others accuracy at the last evaluation point (other clients' tasks)"),
    _pct("others_a_auc", "Others accuracy averaged over evaluation points"),
    Metric("forgetting", False, -100.0, 100.0, "Mean drop from best earlier to last accuracy"),
    _pct("unseen_a_last", "Accuracy on unseen tasks at the last evaluation point"),
    _pct("local", "Accuracy on each client's own classes"),
    _pct("base", "Accuracy on classes seen by other clients"),
    _pct("novel", "Accuracy on classes unseen in training"),
    _pct("hm", "Harmonic mean of local, base and novel"),
    # task metrics
    _pct("accuracy", "Top-1 accuracy", _accuracy),
    _pct("token_f1", "Token-level F1 (SQuAD style), x100",
         _text(token_f1)),
    _pct("exact_match", "Exact match after normalisation, x100",
         _text(exact_match)),
    _pct("bleu", "Corpus BLEU (sacrebleu), x100", _text(bleu)),
    _pct("google_bleu", "Google-BLEU (sentence GLEU averaged), x100",
         _text(google_bleu)),
    _pct("rouge1", "ROUGE-1 F, x100", _rouge("rouge1")),
    _pct("rouge2", "ROUGE-2 F, x100", _rouge("rouge2")),
    _pct("rougeL", "ROUGE-L F, x100", _rouge("rougeL")),
    _pct("rougeLsum", "ROUGE-Lsum F (summary-level LCS), x100", _rouge("rougeLsum")),
    _pct("meteor", "METEOR, x100", _text(meteor)),
    _pct("bertscore_f1", "BERTScore F1, x100", _bertscore),
    Metric("cider", True, 0.0, 1000.0, "CIDEr-D, x100 (not bounded by 100)",
           _text(cider)),
    Metric("mse", False, 0.0, math.inf, "Mean squared reconstruction error, pixels in [0, 1]",
           _mse),
)

REGISTRY: Mapping[str, Metric] = MappingProxyType({m.name: m for m in _ALL})
"""Every fixed-name metric, by name (per-domain ``acc_<domain>`` are added per benchmark)."""

ALIASES: Mapping[str, str] = MappingProxyType({"bertscore": "bertscore_f1"})
"""Short names task specs may use."""


def resolve(name: str) -> Metric:
    """The registry entry of ``name`` (aliases allowed); a clear error for unknown names."""
    metric = REGISTRY.get(ALIASES.get(name, name))
    if metric is None:
        raise MetricInputError(f"unknown metric {name!r}; known: "
                               f"{', '.join(sorted([*REGISTRY, *ALIASES]))}")
    return metric


def score_task(name: str, predictions: Sequence[Any],
               samples: Sequence[Mapping[str, Any]]) -> float:
    """Score one task's predictions with metric ``name`` (see the module docstring)."""
    metric = resolve(name)
    if metric.score is None:
        raise MetricInputError(f"{metric.name} is computed from a run's evaluation points, not "
                               f"from one task's predictions")
    if len(predictions) != len(samples):
        raise MetricInputError(f"{len(predictions)} predictions for {len(samples)} samples")
    value = float(metric.score(predictions, samples))
    # float round-off at a bound (sacrebleu's 100.00000000000004) is not a range error
    if metric.lower - 1e-9 <= value < metric.lower or metric.upper < value <= metric.upper + 1e-9:
        value = min(max(value, metric.lower), metric.upper)
    return value
