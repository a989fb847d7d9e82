"""Fast adaptation (``drake eval --fast-adapt``, FedMosaic's Fig. 5): the aggregated model by
hand, the curves' starting points against the runtime's own scoring, the training rows it
fine-tunes on, determinism, the results file and its refusals."""

import copy

import pytest
import torch

from drake.build import build
from drake.errors import DrakeError
from drake.registry import get_benchmark
from drake.runtime import LocalRuntime, RunConfig
from drake.runtime.client import ClientRecord, RuntimeClient


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("d"), seed=2)


def config(data, out, **kw):
    base = dict(data=str(data), scenario="dynamic", method="fedavg", out=str(out), seed=0,
                rounds=1, local_steps=1, batch_size=2, eval_per_task=2, pretrained=False,
                mc_scoring="loglik", fast_adapt=2, fast_adapt_every=1)
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
    """A run with fast adaptation, the final records it adapted from, and the ids of the
    samples its fine-tuning drew (handles of round ``rounds``: after the last round)."""
    drawn: list[str] = []
    next_batch, fast = RuntimeClient.next_batch, LocalRuntime.fast_adaptation
    final: dict = {}

    def spy(self):
        batch = next_batch(self)
        if self.round == 1:
            drawn.extend(s["id"] for s in self.last_samples)
        return batch

    def keep(self, records):
        final.update(copy.deepcopy(dict(records)))
        return fast(self, records)

    RuntimeClient.next_batch, LocalRuntime.fast_adaptation = spy, keep
    try:
        runtime = LocalRuntime(config(data, tmp_path_factory.mktemp("r") / "run"))
        results = runtime.run()
    finally:
        RuntimeClient.next_batch, LocalRuntime.fast_adaptation = next_batch, fast
    return runtime, results, drawn, final


def test_the_aggregated_model_is_the_sample_weighted_mean_of_the_group(run):
    runtime = run[0]
    arch = runtime.models[0]
    group = [c for c in range(runtime.data.num_clients) if runtime.models[c] == arch]
    records = {}
    for c in range(runtime.data.num_clients):
        base = runtime.init_state[runtime.models[c]]["local"]
        records[c] = ClientRecord(adapters={"local": {k: torch.full_like(v, float(c))
                                                      for k, v in base.items()}})
    seen = {c: len(runtime.data.streams[c].seen(runtime.rounds - 1)) for c in group}
    want = sum(c * seen[c] for c in group) / sum(seen.values())
    got = runtime.aggregated_model(arch, records)["local"]
    for value in got.values():
        torch.testing.assert_close(value, torch.full_like(value, want))


def test_curves_start_at_the_runtime_scores_of_both_starts(run):
    runtime, results, drawn, records = run
    fa = results["fast_adaptation"]
    assert fa["steps"] == [0, 1, 2] and fa["iterations"] == 2 and fa["every"] == 1
    unseen = runtime.data.unseen_tasks
    assert len(unseen) == 7 and set(fa["curves"]) == set(runtime.models)
    for arch, starts in fa["curves"].items():
        assert set(starts) == {"aggregated", "pretrained"}
        agg = runtime.aggregated_model(arch, records)
        for task in unseen:
            test = list(runtime.data.unseen_samples(task))
            for start, model in (("aggregated", {n: (s, 1.0) for n, s in agg.items()}),
                                 ("pretrained", {})):
                preds = runtime.predict_global(arch, model, runtime.rounds, test)
                assert starts[start][task][0] == runtime._score(task, test, preds), \
                    (arch, task, start)
                assert len(starts[start][task]) == 3
    # the mean curve is over architectures and tasks
    first = [fa["curves"][a]["aggregated"][t][0] for a in fa["curves"] for t in unseen]
    assert fa["mean"]["aggregated"][0] == pytest.approx(sum(first) / len(first))
    # fine-tuning drew only the unseen tasks' training rows: 2 archs × 7 tasks × 2 starts ×
    # 2 iterations × batch 2
    assert len(drawn) == 2 * 7 * 2 * 2 * 2
    assert all("-train-" in sid and sid.rsplit("-train-", 1)[0] in unseen for sid in drawn)


def test_fast_adaptation_is_deterministic(run, data, tmp_path):
    results = run[1]
    again = LocalRuntime(config(data, tmp_path / "again")).run()
    assert again["fast_adaptation"] == results["fast_adaptation"]


def test_the_results_schema_checks_the_curves(run):
    from pydantic import ValidationError

    from leaderboard.run_result import RunResult

    results = run[1]
    RunResult.model_validate(results)
    broken = copy.deepcopy(results)
    arch = next(iter(broken["fast_adaptation"]["curves"]))
    task = next(iter(broken["fast_adaptation"]["curves"][arch]["aggregated"]))
    broken["fast_adaptation"]["curves"][arch]["aggregated"][task].append(50.0)
    with pytest.raises(ValidationError, match="4 scores for 3 steps"):
        RunResult.model_validate(broken)
    broken = copy.deepcopy(results)
    broken["fast_adaptation"]["steps"] = [0, 2, 1]
    with pytest.raises(ValidationError, match="must increase from 0"):
        RunResult.model_validate(broken)


def test_fast_adaptation_refusals(data, tmp_path):
    with pytest.raises(ValueError, match="fast_adapt_every >= 1"):
        config(data, tmp_path / "x", fast_adapt_every=0).validate()
    pytest.importorskip("flwr")
    from drake.runtime.flower import FlowerRuntime

    with pytest.raises(DrakeError, match="run it on the local runtime"):
        FlowerRuntime(config(data, tmp_path / "f"))


def test_drake_report_plots_the_curves(run, tmp_path):
    pytest.importorskip("matplotlib")
    from drake.report import write_report

    runtime = run[0]
    write_report([runtime.out], tmp_path / "rep")
    plots = sorted(p.name for p in (tmp_path / "rep" / "plots").iterdir())
    assert "fast-adapt-drake-synth-dynamic-hetero.svg" in plots
    svg = (tmp_path / "rep" / "plots" / "fast-adapt-drake-synth-dynamic-hetero.svg").read_text()
    assert "fedavg (pretrained start)" in svg
