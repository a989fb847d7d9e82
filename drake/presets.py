"""Run presets: the budget and evaluation protocol a run starts from.

``cpu`` is the small budget every offline run, test and quickstart uses; ``paper`` is a
benchmark's published protocol, as far as the local runtime can express it. A preset fills the
run settings that ``drake eval`` is not given; a value given on the command line always wins.
The preset's name and every resolved value go into ``config.json`` and ``results.json``, so a
leaderboard entry says which protocol produced it.

Each ``paper`` preset names its source and lists, one line each, where the run departs from
the paper because the runtime cannot express it (``drake eval`` prints them). A benchmark
without a paper preset is an error that says so, never a silent fall-back to ``cpu``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from drake.errors import UnknownNameError

__all__ = ["PRESET_NAMES", "PRESET_FIELDS", "Preset", "get_preset", "resolve_preset"]

#: The run settings a preset sets (``RunConfig`` fields); ``eval_per_task`` and
#: ``max_new_tokens`` may be None: every test sample, the protocol's default length;
#: ``eval_unseen`` scores the benchmark's unseen tasks after the last round; ``rounds`` None
#: runs the scenario's stream rounds; ``local_epochs`` (None: the step budget) sets each
#: client's steps from its rows; ``first_round_all`` trains every client in round 0.
PRESET_FIELDS = ("compute_budget", "batch_size", "lr", "eval_every", "eval_per_task", "frac",
                 "max_new_tokens", "eval_unseen", "rounds", "local_epochs", "first_round_all")

#: what a preset leaves as the runtime's defaults unless it says otherwise
_PLAIN = {"eval_unseen": False, "rounds": None, "local_epochs": None, "first_round_all": False}


@dataclass(frozen=True)
class Preset:
    """One preset for one benchmark: its values, their source and the departures."""

    name: str
    values: Mapping[str, Any]
    source: str
    departures: tuple[str, ...] = field(default=())


_CPU = Preset("cpu", MappingProxyType({
    "compute_budget": 20, "batch_size": 4, "lr": 2e-3, "eval_every": 1, "eval_per_task": 20,
    "frac": 1.0, "max_new_tokens": None, **_PLAIN,
}), "the offline budget: 20 SFT-equivalent steps per round, 20 test samples per task")

# FedMosaic's protocol on DRAKE and HFLB (paper §6 and A.5; the public code's scripts, see
# shared/reference/fedmosaic-drake-hflb.md): lr 2e-5 (PQ-LoRA's P and Q at 5e-5 through the
# method's pq_lr_scale of 2.5), 100 SFT steps per round (each method's compute-matched share:
# FedMosaic 94, Ditto 50, ...), batch 1 with gradient accumulation 4, evaluation every 5 rounds
# (the end of each task) on the whole test set, greedy answers of up to 512 tokens; the 7 unseen
# tasks scored by every client's final model at the end (DRAKE's generalisation check, §5).
_FEDMOSAIC = Preset("paper", MappingProxyType({
    "compute_budget": 100, "batch_size": 4, "lr": 2e-5, "eval_every": 5, "eval_per_task": None,
    "frac": 1.0, "max_new_tokens": 512, **_PLAIN, "eval_unseen": True,
}), "FedMosaic (DRAKE/HFLB) §6, A.5 and its public training scripts", (
    "batch 1 x gradient accumulation 4 runs as one batch of 4 (the loss is the mean over the "
    "batch's answer tokens, not the mean of four per-sample means)",
    "the unseen tasks are scored as they stand after the last round; the paper's fast "
    "adaptation on them (200 fine-tuning iterations, Fig. 5) runs with --fast-adapt 200",
    "the learning rate is constant in both; bf16 on GPU there, float32 on the CPU here",
))

# FediLoRA's protocol (paper §4, A; its public code, see shared/reference/pfedmma-fedilora-tap.md
# §3): AdamW 3e-4, batch 32, 40% of the 10 clients per round, each client one local epoch over a
# random 30% (then 50%) of its rows, 8 rounds; scored once at the end (the last round is always
# scored): the global model on the global test split, the personalised ones on their local test
# rows, all samples.
_FEDILORA = Preset("paper", MappingProxyType({
    "compute_budget": 20, "batch_size": 32, "lr": 3e-4, "eval_every": 8, "eval_per_task": None,
    "frac": 0.4, "max_new_tokens": None, **_PLAIN, "rounds": 8,
}), "FediLoRA §4 and its public training code", (
    "one local epoch over a random 30-50% of a client's rows runs as 20 steps of 32 (about one "
    "such epoch of SAM-LLaVA's ~1,800 rows per client: 17-28 steps)",
    "fp16 on GPU there, float32 on the CPU here",
))

# pFedMMA's protocols (its §4 and scripts, shared/reference/pfedmma-fedilora-tap.md §1): SGD
# (the method's own optimiser) at lr 1e-3, batch 32, one local epoch per round, every client in
# round 0 and then a fraction; scored once, after the last round (the release picks the best
# checkpoint on the test set, which the suite never does). Base-to-novel: 10 clients, all of
# them every round, 100 rounds; CIFAR: 100 clients, 10% a round, 50 rounds; DomainNet and
# Office-Caltech10: 25% a round, 50 rounds.
_PFEDMMA_DEPARTURES = (
    "random resized crop and flip are not applied to the training images",
    "float32 on the CPU here, mixed precision on GPU there",
)


def _pfedmma(rounds: int, frac: float, what: str) -> Preset:
    return Preset("paper", MappingProxyType({
        "compute_budget": 20, "batch_size": 32, "lr": 1e-3, "eval_every": rounds,
        "eval_per_task": None, "frac": frac, "max_new_tokens": None, **_PLAIN,
        "rounds": rounds, "local_epochs": 1.0, "first_round_all": True,
    }), f"pFedMMA §4 and its public scripts ({what})", _PFEDMMA_DEPARTURES)


_PFEDMMA_B2N = _pfedmma(100, 1.0, "base-to-novel")
_PFEDMMA_CIFAR = _pfedmma(50, 0.1, "CIFAR")
_PFEDMMA_DOMAINS = _pfedmma(50, 0.25, "DomainNet and Office-Caltech10")

# TAP's protocol (its Tab. 21, FLAVA column): 200 rounds, 2 of the 30 clients a round, 20 local
# iterations of batch 128 (32 x 4 accumulated), AdamW at 3e-4 after a warm-up from 1e-4;
# scored after the last round, on the whole test sets.
_TAP = Preset("paper", MappingProxyType({
    "compute_budget": 20, "batch_size": 128, "lr": 3e-4, "eval_every": 200,
    "eval_per_task": None, "frac": 2 / 30, "max_new_tokens": None, **_PLAIN, "rounds": 200,
}), "TAP Tab. 21 (FLAVA) and its public code", (
    "the 20-round warm-up from lr 1e-4 is not run: the lr is 3e-4 throughout",
    "batch 32 x gradient accumulation 4 runs as one batch of 128",
    "the ViLT setup's 30 local iterations and lr 4e-4 need --compute-budget 30 --lr 4e-4",
))

_PAPER: Mapping[str, Preset] = MappingProxyType({
    "drake": _FEDMOSAIC, "hflb": _FEDMOSAIC,
    # the offline twins run their paper's protocol on the tiny models
    "drake-synth": _FEDMOSAIC,
    "fedilora": _FEDILORA, "synth-caption": _FEDILORA,
    **{f"clip-base2novel/{d}": _PFEDMMA_B2N for d in (
        "oxford_pets", "flowers102", "dtd", "caltech101", "food101", "sun397", "ucf101")},
    "synth-cls": _PFEDMMA_B2N,
    "cifar10-dir": _PFEDMMA_CIFAR, "cifar100-dir": _PFEDMMA_CIFAR,
    "domainnet": _PFEDMMA_DOMAINS, "office-caltech10": _PFEDMMA_DOMAINS,
    "tap": _TAP, "tap-synth": _TAP,
})

#: Where one benchmark stands in for several protocols, the paper preset of a scenario:
#: synth-cls's per-domain split is the twin of DomainNet/Office-Caltech10's, its Dirichlet
#: splits of CIFAR's (the benchmark's own preset is base-to-novel's).
_PAPER_BY_SCENARIO: Mapping[tuple[str, str], Preset] = MappingProxyType({
    ("synth-cls", "by-domain"): _PFEDMMA_DOMAINS,
    ("synth-cls", "alpha0.3"): _PFEDMMA_CIFAR, ("synth-cls", "alpha0.5"): _PFEDMMA_CIFAR,
})

PRESET_NAMES = ("cpu", "paper")


def get_preset(name: str, benchmark: str, scenario: str | None = None) -> Preset:
    """The preset ``name`` for ``benchmark`` (its registered name), on ``scenario`` where the
    benchmark's scenarios follow different papers' protocols (synth-cls).

    Raises
    ------
    UnknownNameError
        For an unknown preset, or ``paper`` on a benchmark that has none yet (naming the ones
        that do and the way round it).
    """
    if name == "cpu":
        return _CPU
    if name != "paper":
        raise UnknownNameError(f"unknown preset {name!r}; choose one of {', '.join(PRESET_NAMES)}")
    if benchmark not in _PAPER:
        raise UnknownNameError(
            f"benchmark {benchmark!r} has no paper preset yet (there is one for "
            f"{', '.join(sorted(_PAPER))}); run it with --preset cpu and give the paper's "
            "values explicitly (--lr, --compute-budget, --batch-size, --eval-every, "
            "--eval-per-task, --frac, --max-new-tokens, --eval-unseen)")
    return _PAPER_BY_SCENARIO.get((benchmark, str(scenario)), _PAPER[benchmark])


def resolve_preset(name: str, benchmark: str, given: Mapping[str, Any],
                   scenario: str | None = None) -> tuple[dict[str, Any], Preset]:
    """Every :data:`PRESET_FIELDS` value for a run: ``given`` (the ones set explicitly; absent
    keys are not set) over the preset's. Returns the values and the preset."""
    preset = get_preset(name, benchmark, scenario)
    unknown = sorted(set(given) - set(PRESET_FIELDS))
    if unknown:
        raise ValueError(f"a preset does not set {unknown}; it sets {', '.join(PRESET_FIELDS)}")
    return {**preset.values, **given}, preset
