"""Metric rules per protocol, benchmark lookup and scenario naming rules."""

from __future__ import annotations

import sys
import types

import pytest

from leaderboard import benchmarks
from leaderboard.benchmarks import (
    FALLBACK_BENCHMARKS,
    check_benchmark,
    check_scenario_name,
    get_benchmark,
)
from leaderboard.errors import SubmissionError
from leaderboard.metrics import (
    METRICS,
    PROTOCOLS,
    allowed_metrics,
    check_metric_names,
    metric_order,
    metric_spec,
    primary_metric,
    required_metrics,
)


@pytest.mark.parametrize(
    "protocol,benchmark,scenario,primary",
    [
        ("self_others", "drake", "dynamic-hetero", "self_a_last"),
        ("self_others", "drake-synth", "static-homo", "self_a_last"),
        ("base_novel", "clip-base2novel/dtd", "pathological-16shot", "hm"),
        ("classification", "domainnet", "dir-alpha0.5-2clients-per-domain", "accuracy"),
        ("generation", "fedilora", "sam-llava-missing40-global", "rougeLsum"),
        ("generation", "synth-caption", "static-homo", "rougeLsum"),
        ("generation", "tap", "flava-mmlu", "bertscore_f1"),
        ("generation", "tap", "vilt-fmnist", "mse"),
        ("generation", "tap", "flava-agnews", "accuracy"),
    ],
)
def test_primary_metric(protocol: str, benchmark: str, scenario: str, primary: str) -> None:
    assert primary_metric(protocol, benchmark, scenario) == primary
    assert primary in required_metrics(protocol, benchmark, scenario)
    assert primary in allowed_metrics(protocol, benchmark, scenario)


def test_directions_and_ranges() -> None:
    assert not METRICS["mse"].higher_is_better and METRICS["mse"].upper == float("inf")
    assert METRICS["cider"].upper == 1000.0
    assert not METRICS["forgetting"].higher_is_better
    assert all(METRICS[m].upper == 100.0 for m in PROTOCOLS["base_novel"].required)
    assert metric_spec("acc_clipart").higher_is_better
    with pytest.raises(SubmissionError, match="unknown metric 'bleu2'"):
        metric_spec("bleu2")
    with pytest.raises(SubmissionError, match="outside"):
        METRICS["cider"].check(1000.5, "metrics.cider")
    METRICS["cider"].check(999.0, "metrics.cider")
    with pytest.raises(SubmissionError, match="not finite"):
        METRICS["mse"].check(float("inf"), "metrics.mse")


def test_metric_names_per_benchmark() -> None:
    assert allowed_metrics("classification", "domainnet", "x") >= {"accuracy", "acc_sketch"}
    assert "acc_sketch" not in allowed_metrics("classification", "cifar10-dir", "dir-alpha1")
    assert allowed_metrics("generation", "tap", "vilt-caltech256") == {"mse"}
    check_metric_names(["local", "base", "novel", "hm"], "base_novel", "clip-base2novel/dtd", "s")
    with pytest.raises(SubmissionError, match="missing required metric.*others_a_auc"):
        check_metric_names(
            ["self_a_last", "self_a_auc", "others_a_last"], "self_others", "drake", "s"
        )
    with pytest.raises(SubmissionError, match="metrics.meteor: metric not allowed"):
        check_metric_names(["mse", "meteor"], "generation", "tap", "flava-fmnist")
    with pytest.raises(SubmissionError, match="no TAP task"):
        primary_metric("generation", "tap", "flava-imagenet")
    with pytest.raises(SubmissionError, match="unknown protocol"):
        primary_metric("self/others", "drake", "s")


def test_metric_order_follows_declaration() -> None:
    assert metric_order(["acc_b", "others_a_auc", "self_a_last", "acc_a"]) == [
        "self_a_last",
        "others_a_auc",
        "acc_a",
        "acc_b",
    ]


def test_fallback_table_matches_registry_names() -> None:
    names = set(FALLBACK_BENCHMARKS)
    assert {"drake", "hflb", "drake-synth", "tap", "fedilora", "clip-base2novel/ucf101"} <= names
    assert all(b.version == "1.0" for b in FALLBACK_BENCHMARKS.values())
    for name in names:
        info = get_benchmark(name)  # registry (when present) and table must agree
        assert (info.version, info.protocol) == (
            FALLBACK_BENCHMARKS[name].version,
            FALLBACK_BENCHMARKS[name].protocol,
        )


def test_registry_is_preferred_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("drake.registry")

    def get(name: str) -> object:
        if name != "drake":
            raise KeyError(name)
        return types.SimpleNamespace(name="drake", version="2.0", protocol="self_others")

    fake.get_benchmark = get  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "drake.registry", fake)
    assert get_benchmark("drake").version == "2.0"
    assert get_benchmark("hflb").version == "1.0"  # unknown to the registry -> table
    with pytest.raises(SubmissionError, match=r"version '1.0' is not known \(current: '2.0'\)"):
        check_benchmark("drake", "1.0", "self_others")


def test_registry_absent_uses_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "drake.registry", None)  # import raises ImportError
    assert get_benchmark("drake") == FALLBACK_BENCHMARKS["drake"]


def test_check_benchmark_refusals() -> None:
    with pytest.raises(SubmissionError, match="unknown benchmark 'imagenet'"):
        check_benchmark("imagenet", "1.0", "classification")
    with pytest.raises(SubmissionError, match="protocol: 'classification' does not match"):
        check_benchmark("drake", "1.0", "classification")


@pytest.mark.parametrize(
    "benchmark,name,order,models,partition",
    [
        ("drake", "dynamic-hetero", "dynamic", "hetero", {}),
        ("hflb", "static-homo", "static", "homo", {}),
        ("drake", "dynamic-homo-qwen", "dynamic", "homo", {}),
        ("drake-synth", "dynamic-hetero-llama1b3b8b", "dynamic", "hetero", {}),
        ("clip-base2novel/dtd", "pathological-16shot", "static", "homo", {}),
        ("clip-base2novel/dtd", "pathological-1shot-vitb32", "static", "homo", {}),
        ("cifar10-dir", "dir-alpha0.5", "static", "homo", {"alpha": 0.5}),
        ("cifar100-dir", "dir-alpha10", "static", "homo", {"alpha": 10}),
        ("domainnet", "dir-alpha0.5-2clients-per-domain", "static", "homo", {}),
        ("office-caltech10", "dir-alpha1-1client-per-domain", "static", "homo", {}),
        ("tap", "vilt-commongen", "static", "homo", {}),
        ("fedilora", "next-preference-missing60-personalized", "static", "homo", {}),
        ("synth-cls", "dir-alpha0.1", "static", "homo", {}),
    ],
)
def test_scenario_names_accepted(benchmark, name, order, models, partition) -> None:
    check_scenario_name(benchmark, name, order, models, partition)


@pytest.mark.parametrize(
    "benchmark,name,order,models,partition,match",
    [
        ("drake", "dynamic", "dynamic", "hetero", {}, "naming rule of 'drake'"),
        ("drake", "dynamic-hetero-", "dynamic", "hetero", {}, "naming rule"),
        ("drake", "dynamic-hetero-qwen-extra", "dynamic", "hetero", {}, "naming rule"),
        ("drake", "dynamic-hetero", "static", "hetero", {}, "make them agree"),
        ("drake", "static-homo", "static", "hetero", {}, "make them agree"),
        ("clip-base2novel/dtd", "16shot", "static", "homo", {}, "pathological"),
        ("clip-base2novel/dtd", "pathological-16shot-", "static", "homo", {}, "backbone tag"),
        ("clip-base2novel/dtd", "pathological-16shot-vit-b32", "static", "homo", {}, "pathol"),
        ("cifar10-dir", "dir-alpha0.5", "static", "homo", {"alpha": 0.3}, "disagrees"),
        ("cifar10-dir", "alpha0.5", "static", "homo", {}, "dir-alpha"),
        ("tap", "clip-mmlu", "static", "homo", {}, "flava"),
        ("fedilora", "recaps-118k-missing40", "static", "homo", {}, "missing"),
        ("synth-cls", "Static_Homo", "static", "homo", {}, "lowercase slug"),
    ],
)
def test_scenario_names_refused(benchmark, name, order, models, partition, match) -> None:
    with pytest.raises(SubmissionError, match=match):
        check_scenario_name(benchmark, name, order, models, partition)


def test_module_has_no_mutable_registry_cache() -> None:
    assert isinstance(benchmarks.FALLBACK_BENCHMARKS, types.MappingProxyType)


def test_a_scenario_may_be_scored_by_another_protocol_than_its_benchmark() -> None:
    from leaderboard.benchmarks import check_benchmark

    assert check_benchmark("synth-cls", "1.0", "classification").protocol == "classification"
    assert check_benchmark("synth-cls", "1.0", "base_novel").scenario_protocols == ("base_novel",)
    with pytest.raises(SubmissionError, match=r"or base_novel on some scenarios"):
        check_benchmark("synth-cls", "1.0", "generation")


def test_synth_cls_domains_are_drake_synths() -> None:
    from drake.synth.scene import DOMAINS as SYNTH_DOMAINS
    from leaderboard.metrics import DOMAINS

    assert DOMAINS["synth-cls"] == SYNTH_DOMAINS
