"""Run presets: the values each sets, explicit values over them, and their errors."""

import pytest

from drake.errors import UnknownNameError
from drake.presets import PRESET_FIELDS, get_preset, resolve_preset
from drake.runtime import RunConfig


def test_every_preset_sets_every_field_and_the_cpu_preset_is_runconfigs_default():
    defaults = RunConfig(data="d", scenario="s", method="m", out="o")
    cpu = get_preset("cpu", "drake-synth")
    assert set(cpu.values) == set(PRESET_FIELDS)
    assert {k: getattr(defaults, k) for k in PRESET_FIELDS} == dict(cpu.values)
    from drake.registry import benchmark_names

    for benchmark in benchmark_names():  # every registered benchmark has its paper's protocol
        paper = get_preset("paper", benchmark)
        assert set(paper.values) == set(PRESET_FIELDS) and paper.source and paper.departures


def test_fedmosaic_paper_values():
    values = dict(get_preset("paper", "drake").values)
    assert values == {"compute_budget": 100, "batch_size": 4, "lr": 2e-5, "eval_every": 5,
                      "eval_per_task": None, "frac": 1.0, "max_new_tokens": 512,
                      "eval_unseen": True, "rounds": None, "local_epochs": None,
                      "first_round_all": False}
    assert get_preset("paper", "hflb") is get_preset("paper", "drake")


def test_fedilora_paper_values():
    values = dict(get_preset("paper", "fedilora").values)
    assert (values["lr"], values["batch_size"], values["frac"]) == (3e-4, 32, 0.4)
    assert values["eval_per_task"] is None and values["eval_unseen"] is False  # none declared
    assert values["rounds"] == 8 and values["eval_every"] == 8  # scored once, at the end


@pytest.mark.parametrize("benchmark,rounds,frac", [
    ("clip-base2novel/dtd", 100, 1.0), ("synth-cls", 100, 1.0), ("cifar100-dir", 50, 0.1),
    ("domainnet", 50, 0.25), ("office-caltech10", 50, 0.25)])
def test_pfedmma_paper_values(benchmark, rounds, frac):
    values = dict(get_preset("paper", benchmark).values)
    assert (values["lr"], values["batch_size"], values["local_epochs"]) == (1e-3, 32, 1.0)
    assert (values["rounds"], values["frac"], values["first_round_all"]) == (rounds, frac, True)
    assert values["eval_every"] == rounds  # the last round only: no best-on-test pick


@pytest.mark.parametrize("scenario,rounds,frac", [
    ("base2novel", 100, 1.0), ("by-domain", 50, 0.25), ("alpha0.3", 50, 0.1), (None, 100, 1.0)])
def test_synth_cls_follows_the_protocol_its_scenario_twins(scenario, rounds, frac):
    """synth-cls stands in for base-to-novel, DomainNet/Office and CIFAR: each scenario runs
    the paper preset of the protocol it twins."""
    values, _ = resolve_preset("paper", "synth-cls", {}, scenario)
    assert (values["rounds"], values["frac"]) == (rounds, frac)


def test_tap_paper_values():
    preset = get_preset("paper", "tap")
    values = dict(preset.values)
    assert (values["rounds"], values["compute_budget"], values["batch_size"]) == (200, 20, 128)
    assert values["lr"] == 3e-4 and values["frac"] * 30 == pytest.approx(2)
    assert any("warm-up" in d for d in preset.departures)


def test_explicit_values_win_and_unknown_names_fail():
    values, preset = resolve_preset("paper", "drake", {"lr": 1e-4, "eval_per_task": 8})
    assert preset.name == "paper" and values["lr"] == 1e-4 and values["eval_per_task"] == 8
    assert values["compute_budget"] == 100
    with pytest.raises(UnknownNameError, match="unknown preset 'fast'"):
        get_preset("fast", "drake")
    with pytest.raises(UnknownNameError, match="'my-bench' has no paper preset yet"):
        get_preset("paper", "my-bench")
    with pytest.raises(ValueError, match=r"does not set \['seed'\]"):
        resolve_preset("cpu", "drake", {"seed": 3})
