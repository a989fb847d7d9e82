"""Benchmarks the leaderboard knows, and the naming rule of each benchmark's scenarios.

Benchmark lookup goes to ``drake.registry.get_benchmark`` when that module exists (the
registry is the single source of truth for names, versions and protocols). Until it does,
and for names it does not hold, the small table :data:`FALLBACK_BENCHMARKS` is used.

Scenario names are short slugs whose grammar depends on the benchmark family:

=====================================  ===============================================
benchmark                              scenario name
=====================================  ===============================================
drake, hflb, drake-synth               ``<order>-<models>[-<tag>]``: order ``static`` or
                                       ``dynamic``, models ``homo`` or ``hetero``; the
                                       optional tag names a model family other than the
                                       default (hetero = LLaVA-Llama3.2 1B/3B mix, homo =
                                       LLaVA-Llama3.2-3B), e.g. ``dynamic-homo-qwen``,
                                       ``dynamic-hetero-llama1b3b8b``
clip-base2novel/<dataset>              ``pathological-<k>shot[-<tag>]``: the optional tag
                                       names a backbone other than the default CLIP
                                       ViT-B/16, e.g. ``pathological-16shot-vitb32``
cifar10-dir, cifar100-dir              ``dir-alpha<a>``
domainnet, office-caltech10            ``dir-alpha<a>-<k>clients-per-domain``
tap                                    ``<flava|vilt>-<task>`` (task in
                                       :data:`leaderboard.metrics.TAP_TASKS`)
fedilora                               ``<dataset>-missing<pct>-<global|personalized>``
anything else                          a lowercase slug ``[a-z0-9]+([-.][a-z0-9]+)*``
=====================================  ===============================================

For drake-like names the ``order`` and ``models`` fields of the scenario must agree with
the name; for Dirichlet names a ``partition.alpha`` given must equal the name's alpha.

Examples
--------
>>> get_benchmark("drake-synth").protocol
'self_others'
>>> check_scenario_name("drake", "dynamic-hetero", "dynamic", "hetero", {})
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from leaderboard.errors import SubmissionError
from leaderboard.metrics import PROTOCOLS, TAP_BENCHMARKS, TAP_TASKS


@dataclass(frozen=True)
class BenchmarkInfo:
    """What the leaderboard needs to know about a benchmark."""

    name: str
    version: str
    protocol: str
    #: protocols some of its scenarios are scored by instead (synth-cls's base2novel)
    scenario_protocols: tuple[str, ...] = ()


CLIP_DATASETS: tuple[str, ...] = (
    "oxford_pets",
    "flowers102",
    "dtd",
    "caltech101",
    "food101",
    "sun397",
    "ucf101",
)

_FALLBACK: tuple[tuple[str, str], ...] = (
    ("drake", "self_others"),
    ("hflb", "self_others"),
    ("drake-synth", "self_others"),
    ("synth-cls", "classification"),
    ("synth-caption", "generation"),
    ("domainnet", "classification"),
    ("office-caltech10", "classification"),
    *((f"clip-base2novel/{d}", "base_novel") for d in CLIP_DATASETS),
    ("cifar10-dir", "classification"),
    ("cifar100-dir", "classification"),
    ("tap", "generation"),
    ("tap-synth", "generation"),
    ("fedilora", "generation"),
)

FALLBACK_BENCHMARKS: Mapping[str, BenchmarkInfo] = MappingProxyType(
    {name: BenchmarkInfo(name, "1.0", protocol) for name, protocol in _FALLBACK}
)
"""Used until ``drake.registry`` exists, and for names it does not hold."""


def _from_registry(name: str) -> BenchmarkInfo | None:
    try:
        from drake.registry import get_benchmark as registry_get  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        spec = registry_get(name)
    except (KeyError, LookupError, ValueError):
        return None
    protocol = getattr(spec, "protocol", None)
    protocol = str(getattr(protocol, "value", protocol))
    others = sorted({str(getattr(s, "protocol", "") or "") for s in getattr(spec, "scenarios", ())}
                    - {"", protocol})
    return BenchmarkInfo(str(spec.name), str(spec.version), protocol, tuple(others))


def get_benchmark(name: str, cache: dict[str, BenchmarkInfo] | None = None) -> BenchmarkInfo:
    """Look a benchmark up by name (registry first, then the fallback table).

    Parameters
    ----------
    name : str
        Benchmark name.
    cache : dict, optional
        Lookups already made by the caller (validating a whole leaderboard looks the same
        few benchmarks up hundreds of times; building a registry spec is not free).

    Raises
    ------
    SubmissionError
        If no benchmark of that name is known.
    """
    if cache is not None and name in cache:
        return cache[name]
    info = _from_registry(name)
    if info is None:
        info = FALLBACK_BENCHMARKS.get(name)
    if info is None:
        raise SubmissionError(
            f"benchmark.name: unknown benchmark {name!r}; known: "
            f"{', '.join(sorted(FALLBACK_BENCHMARKS))}"
        )
    if info.protocol not in PROTOCOLS:
        raise SubmissionError(
            f"benchmark {name!r} declares protocol {info.protocol!r}, which the leaderboard "
            f"does not know; use one of {', '.join(PROTOCOLS)}"
        )
    if cache is not None:
        cache[name] = info
    return info


def check_benchmark(
    name: str, version: str, protocol: str, cache: dict[str, BenchmarkInfo] | None = None
) -> BenchmarkInfo:
    """Require a known benchmark at its current version, with its own protocol."""
    info = get_benchmark(name, cache)
    if version != info.version:
        raise SubmissionError(
            f"benchmark.version: {name} version {version!r} is not known (current: "
            f"{info.version!r}); rerun on the current version"
        )
    if protocol != info.protocol and protocol not in info.scenario_protocols:
        scenarios = f" (or {', '.join(info.scenario_protocols)} on some scenarios)" if \
            info.scenario_protocols else ""
        raise SubmissionError(
            f"protocol: {protocol!r} does not match benchmark {name!r}, whose protocol is "
            f"{info.protocol!r}{scenarios}"
        )
    return info


_DRAKE_LIKE = frozenset({"drake", "hflb", "drake-synth"})
_ORDER_MODELS = re.compile(r"^(static|dynamic)-(homo|hetero)(?:-([a-z0-9]+))?$")
_SHOTS = re.compile(r"^pathological-([1-9][0-9]{0,2})shot(?:-([a-z0-9]+))?$")
_ALPHA = r"alpha([0-9]{1,3}(?:\.[0-9]{1,4})?)"
_DIR = re.compile(rf"^dir-{_ALPHA}$")
_DIR_DOMAIN = re.compile(rf"^dir-{_ALPHA}-([1-9][0-9]?)clients?-per-domain$")
_TAP = re.compile(rf"^(flava|vilt)-({'|'.join(TAP_TASKS)})$")
_FEDILORA = re.compile(
    r"^(recaps-118k|sam-llava|next-preference)-missing([0-9]{1,2})-(global|personalized)$"
)
GENERIC_SCENARIO = re.compile(r"^[a-z0-9]+(?:[-.][a-z0-9]+)*$")


def _fail(benchmark: str, name: str, rule: str) -> SubmissionError:
    return SubmissionError(
        f"scenario.name: {name!r} does not follow the naming rule of {benchmark!r}: {rule}"
    )


def _check_alpha(benchmark: str, name: str, alpha: str, partition: Mapping[str, Any]) -> None:
    given = partition.get("alpha")
    if given is not None and (isinstance(given, bool) or given != float(alpha)):
        raise SubmissionError(
            f"scenario.partition.alpha: {given!r} disagrees with scenario name {name!r} "
            f"of {benchmark!r} (alpha {alpha})"
        )


def check_scenario_name(
    benchmark: str, name: str, order: str, models: str, partition: Mapping[str, Any]
) -> None:
    """Check a scenario name against its benchmark's naming rule (see module docstring).

    Raises
    ------
    SubmissionError
        Naming the rule that was broken.
    """
    if benchmark in _DRAKE_LIKE:
        m = _ORDER_MODELS.fullmatch(name)
        if not m:
            raise _fail(benchmark, name, "<static|dynamic>-<homo|hetero>[-<model tag>]")
        if m.group(1) != order or m.group(2) != models:
            raise SubmissionError(
                f"scenario: name {name!r} says order={m.group(1)!r}, models={m.group(2)!r} "
                f"but the fields say order={order!r}, models={models!r}; make them agree"
            )
    elif benchmark.startswith("clip-base2novel/"):
        if not _SHOTS.fullmatch(name):
            raise _fail(benchmark, name, "pathological-<k>shot[-<backbone tag>]")
    elif benchmark in ("cifar10-dir", "cifar100-dir"):
        m = _DIR.fullmatch(name)
        if not m:
            raise _fail(benchmark, name, "dir-alpha<alpha>")
        _check_alpha(benchmark, name, m.group(1), partition)
    elif benchmark in ("domainnet", "office-caltech10"):
        m = _DIR_DOMAIN.fullmatch(name)
        if not m:
            raise _fail(benchmark, name, "dir-alpha<alpha>-<k>clients-per-domain")
        _check_alpha(benchmark, name, m.group(1), partition)
    elif benchmark in TAP_BENCHMARKS:
        if not _TAP.fullmatch(name):
            raise _fail(benchmark, name, f"<flava|vilt>-<{'|'.join(TAP_TASKS)}>")
    elif benchmark == "fedilora":
        if not _FEDILORA.fullmatch(name):
            raise _fail(
                benchmark,
                name,
                "<recaps-118k|sam-llava|next-preference>-missing<pct>-<global|personalized>",
            )
    elif not GENERIC_SCENARIO.fullmatch(name):
        raise _fail(benchmark, name, "a lowercase slug [a-z0-9]+([-.][a-z0-9]+)*")
