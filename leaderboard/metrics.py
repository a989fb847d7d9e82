"""Metric names, value ranges and primary metrics: the one place they are declared.

Every metric the leaderboard accepts is listed in :data:`METRICS` with its direction
(``higher_is_better``) and its valid range. Which metrics an entry may and must carry is
decided by its evaluation *protocol* (:data:`PROTOCOLS`), refined per benchmark:

- ``self_others`` (DRAKE, HFLB, drake-synth): Self/Others A_last and A_AUC are required;
  ``forgetting`` and ``unseen_a_last`` are optional. Primary metric: ``self_a_last``.
- ``base_novel`` (CLIP base-to-novel, pFedMMA Tab. 1/9): ``local``, ``base``, ``novel`` and
  their harmonic mean ``hm`` are required. Primary metric: ``hm``.
- ``classification`` (CIFAR Dirichlet, DomainNet, Office-Caltech10, synth-cls): ``accuracy``
  is required; multi-domain benchmarks may add per-domain accuracies ``acc_<domain>``.
  Primary metric: ``accuracy``.
- ``generation`` (FediLoRA, TAP, synth-caption): any of the text-generation metrics. The
  primary metric is the one the benchmark's paper reports as its main number:

  - ``fedilora``: ``rougeLsum``. FediLoRA Tab. 1 reports Google-BLEU and ROUGE-Lsum ("RSUM");
    Tab. 2 and the ablations use ROUGE-Lsum alone, so it is the main metric.
  - ``synth-caption``: ``rougeLsum``, as for FediLoRA, whose captioning setting it mirrors.
  - ``tap``: TAP's Tab. 1-3 mix three task kinds, so its scenarios are one task each
    (``<backbone>-<task>``, see :data:`TAP_TASKS`) and the primary metric follows the task:
    ``mse`` (lower is better) for image generation (Tab. 1/2), ``accuracy`` for
    classification (Tab. 2/3), ``bertscore_f1`` for text generation (Tab. 3 lists BERTScore
    "BS" first and the text quotes the average BS as the headline number).

Ranges: every metric lies in [0, 100] (percent scale) except

- ``cider``: CIDEr is a consensus score that is not bounded by 1 (commonly ~1-3, reported
  ×100), so it is allowed in [0, 1000];
- ``mse``: TAP's image-reconstruction error, stored as printed (not a percentage),
  any finite value ≥ 0, lower is better;
- ``forgetting``: average drop from the best earlier accuracy to the last one, in
  [-100, 100] (negative means backward transfer), lower is better.

Examples
--------
>>> primary_metric("self_others", "drake", "dynamic-hetero")
'self_a_last'
>>> primary_metric("generation", "tap", "vilt-fmnist")
'mse'
>>> METRICS["mse"].higher_is_better
False
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from evaluators.registry import REGISTRY
from leaderboard.errors import SubmissionError


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its name, direction, valid range and a one-line meaning.

    Parameters
    ----------
    name : str
        Metric name as it appears in results and entries.
    higher_is_better : bool
        Ranking direction.
    lower : float
        Smallest valid value (inclusive).
    upper : float
        Largest valid value (inclusive); ``math.inf`` for unbounded.
    description : str
        What the number means.
    """

    name: str
    higher_is_better: bool
    lower: float
    upper: float
    description: str

    def check(self, value: float, where: str) -> None:
        """Raise :class:`SubmissionError` unless ``value`` is finite and within range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SubmissionError(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise SubmissionError(f"{where}: {value!r} is not finite; report a finite number")
        if not self.lower <= value <= self.upper:
            raise SubmissionError(
                f"{where}: {value!r} is outside [{self.lower}, {self.upper}] for metric "
                f"{self.name!r}; metrics are on the 0-100 scale (multiply fractions by 100)"
            )


# the suite's one metric registry decides names, directions and ranges; the leaderboard adds
# its submission checks on top
METRICS: Mapping[str, MetricSpec] = MappingProxyType({
    m.name: MetricSpec(m.name, m.higher_is_better, m.lower, m.upper, m.description)
    for m in REGISTRY.values()})
"""Every fixed-name metric, by name (per-domain ``acc_<domain>`` are added per benchmark)."""

GENERATION_METRICS: tuple[str, ...] = (
    "bleu",
    "google_bleu",
    "rouge1",
    "rouge2",
    "rougeL",
    "rougeLsum",
    "meteor",
    "bertscore_f1",
    "cider",
)


@dataclass(frozen=True)
class ProtocolSpec:
    """Metric rules of one evaluation protocol.

    Parameters
    ----------
    name : str
        Protocol name.
    required : tuple of str
        Metrics every entry of the protocol must carry.
    optional : tuple of str
        Further metrics it may carry.
    primary : str or None
        Ranking metric, or None where it is chosen per benchmark.
    """

    name: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    primary: str | None


PROTOCOLS: Mapping[str, ProtocolSpec] = MappingProxyType(
    {
        "self_others": ProtocolSpec(
            "self_others",
            ("self_a_last", "self_a_auc", "others_a_last", "others_a_auc"),
            ("forgetting", "unseen_a_last"),
            "self_a_last",
        ),
        "base_novel": ProtocolSpec("base_novel", ("local", "base", "novel", "hm"), (), "hm"),
        "generation": ProtocolSpec("generation", (), GENERATION_METRICS, None),
        "classification": ProtocolSpec("classification", ("accuracy",), (), "accuracy"),
    }
)
"""The four protocols a benchmark can declare."""

GENERATION_PRIMARY: Mapping[str, str] = MappingProxyType(
    {"fedilora": "rougeLsum", "synth-caption": "rougeLsum"}
)
"""Primary metric of generation benchmarks whose scenarios all share one metric."""

TAP_TASKS: Mapping[str, str] = MappingProxyType(
    {
        "tinyimagenet": "classification",
        "cifar100": "classification",
        "agnews": "classification",
        "fmnist": "image_generation",
        "caltech256": "image_generation",
        "mmlu": "text_generation",
        "vqa": "text_generation",
        "commongen": "text_generation",
    }
)
"""TAP task -> task kind; a TAP scenario is ``<backbone>-<task>``."""

TAP_BENCHMARKS = ("tap", "tap-synth")
"""TAP's benchmark and its offline twin (whose tasks carry the names of those they stand for)."""

_TAP_KIND_METRICS: Mapping[str, tuple[tuple[str, ...], str]] = MappingProxyType(
    {
        "classification": (("accuracy",), "accuracy"),
        "image_generation": (("mse",), "mse"),
        "text_generation": (GENERATION_METRICS, "bertscore_f1"),
    }
)

DOMAINS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "domainnet": ("clipart", "infograph", "painting", "quickdraw", "real", "sketch"),
        "office-caltech10": ("amazon", "caltech", "dslr", "webcam"),
        # drake.synth.scene.DOMAINS (a test keeps the two equal)
        "synth-cls": ("plain", "noise", "stripes", "gradient", "sketch", "texture"),
    }
)
"""Multi-domain classification benchmarks and their domains (metrics ``acc_<domain>``)."""

DOMAIN_METRIC_PATTERN = re.compile(r"^acc_[a-z0-9]{1,32}$")
"""Form of a per-domain accuracy name."""

ALL_PROTOCOL_METRIC_NAMES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "self_others": frozenset(
            PROTOCOLS["self_others"].required + PROTOCOLS["self_others"].optional
        ),
        "base_novel": frozenset(PROTOCOLS["base_novel"].required),
        "generation": frozenset(GENERATION_METRICS + ("accuracy", "mse")),
        "classification": frozenset(("accuracy",)),
    }
)
"""Names a protocol admits before benchmark-specific narrowing (classification also admits
``acc_<domain>``; generation admits ``accuracy`` and ``mse`` because TAP mixes task kinds)."""


def metric_spec(name: str) -> MetricSpec:
    """Return the spec of ``name``, including per-domain ``acc_<domain>`` accuracies.

    Raises
    ------
    SubmissionError
        If the metric is unknown.
    """
    if name in METRICS:
        return METRICS[name]
    if DOMAIN_METRIC_PATTERN.fullmatch(name):
        return MetricSpec(name, True, 0.0, 100.0, f"Accuracy on domain {name[4:]!r}")
    raise SubmissionError(
        f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))} and acc_<domain>"
    )


def metric_order(names: Iterable[str]) -> list[str]:
    """Sort metric names in declaration order (protocol order), per-domain ones last."""
    order = {name: i for i, name in enumerate(METRICS)}
    return sorted(set(names), key=lambda n: (order.get(n, len(order)), n))


def _tap_task(scenario: str) -> str:
    task = scenario.split("-", 1)[1] if "-" in scenario else ""
    if task not in TAP_TASKS:
        raise SubmissionError(
            f"scenario {scenario!r} of a TAP benchmark names no TAP task; use "
            f"<flava|vilt>-<{'|'.join(TAP_TASKS)}>"
        )
    return task


def _protocol(protocol: str) -> ProtocolSpec:
    if protocol not in PROTOCOLS:
        raise SubmissionError(f"unknown protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS[protocol]


def allowed_metrics(protocol: str, benchmark: str, scenario: str) -> frozenset[str]:
    """Metric names an entry of this protocol, benchmark and scenario may carry."""
    spec = _protocol(protocol)
    if benchmark in TAP_BENCHMARKS:
        return frozenset(_TAP_KIND_METRICS[TAP_TASKS[_tap_task(scenario)]][0])
    names = set(spec.required) | set(spec.optional)
    if protocol == "classification":
        names |= {f"acc_{d}" for d in DOMAINS.get(benchmark, ())}
    return frozenset(names)


def primary_metric(protocol: str, benchmark: str, scenario: str) -> str:
    """The ranking metric of a benchmark and scenario (see the module docstring)."""
    spec = _protocol(protocol)
    if benchmark in TAP_BENCHMARKS:
        return _TAP_KIND_METRICS[TAP_TASKS[_tap_task(scenario)]][1]
    if spec.primary is not None:
        return spec.primary
    if benchmark in GENERATION_PRIMARY:
        return GENERATION_PRIMARY[benchmark]
    raise SubmissionError(
        f"generation benchmark {benchmark!r} has no primary metric; add it to "
        "leaderboard.metrics.GENERATION_PRIMARY"
    )


def required_metrics(protocol: str, benchmark: str, scenario: str) -> frozenset[str]:
    """Metric names an entry must carry: the protocol's required ones plus the primary."""
    spec = _protocol(protocol)
    return frozenset(spec.required) | {primary_metric(protocol, benchmark, scenario)}


def check_metric_names(
    names: Iterable[str], protocol: str, benchmark: str, scenario: str, where: str = "metrics"
) -> None:
    """Refuse unknown, disallowed or missing metric names.

    Raises
    ------
    SubmissionError
        Naming the first offending metric and the names that are allowed.
    """
    present = list(names)
    allowed = allowed_metrics(protocol, benchmark, scenario)
    for name in present:
        metric_spec(name)
        if name not in allowed:
            raise SubmissionError(
                f"{where}.{name}: metric not allowed for protocol {protocol!r} on "
                f"{benchmark}/{scenario}; allowed: {', '.join(sorted(allowed))}"
            )
    missing = sorted(required_metrics(protocol, benchmark, scenario) - set(present))
    if missing:
        raise SubmissionError(
            f"{where}: missing required metric(s) {', '.join(missing)} for protocol "
            f"{protocol!r} on {benchmark}/{scenario}"
        )
