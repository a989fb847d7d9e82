"""TAP (baselines.tap) against hand-computed cases: the replacement rule (Eq. 3-4) copies
exactly the named modules when the FL copy beats the personal model by the margin, and nothing
otherwise; the KD terms (Eq. 5); the per-component mean and the server's per-client parts; and
both TAP methods end to end on tap-synth."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from baselines.base import ClientInfo, Payload
from baselines.tap import (
    DisentAFL,
    Tap,
    TapFedAvg,
    TapFedDAT,
    TapPerFedAvg,
    component_mean,
    disentanglement,
    kd_term,
    replaced,
    replacement_flags,
    task_keys,
)
from drake.build import build
from drake.cli import main
from drake.registry import get_benchmark


def test_replacement_flag_is_strictly_fl_loss_plus_margin_below_personal_loss():
    fl = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.2}
    personal = {"a": 1.02, "b": 1.01, "c": 1.005, "e": 3.0}
    margins = {"a": 0.01, "b": 0.01, "c": 0.005, "d": 0.01}
    # a: 1.01 < 1.02 yes; b: 1.01 < 1.01 no (equal); c: 1.005 < 1.005 no; d has no personal
    # history and e no FL history: never replaced
    assert replacement_flags(fl, personal, margins) == {"a": True, "b": False, "c": False}


def test_replacement_copies_exactly_the_flagged_tasks_modules():
    personal = {"encoders.image.neck.w": torch.zeros(2), "encoders.text.neck.w": torch.zeros(2),
                "shared_proj.w": torch.zeros(1), "heads.news.w": torch.zeros(3),
                "heads.pics.w": torch.zeros(3), "heads.pics2.w": torch.zeros(1)}
    fl = {k: torch.ones_like(v) for k, v in personal.items()}
    modules = {"pics": ["encoders.image", "shared_proj", "heads.pics"],
               "news": ["encoders.text", "shared_proj", "heads.news"]}
    out = replaced(personal, fl, {"pics": True, "news": False}, modules)
    copied = {k for k, v in out.items() if v.sum() > 0}
    # "heads.pics2" shares a prefix with "heads.pics" but is another module: kept
    assert copied == {"encoders.image.neck.w", "shared_proj.w", "heads.pics.w"}
    assert replaced(personal, fl, {"pics": False, "news": False}, modules).keys() == \
        personal.keys()
    assert all(v.sum() == 0 for v in replaced(personal, fl, {"pics": False}, modules).values())
    assert task_keys(list(personal), ["heads.pics"]) == ["heads.pics.w"]


def test_kd_terms_by_hand():
    student = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    teacher = torch.tensor([[0.0, 0.0], [2.0, 0.0]])

    def kl(t, s):  # KL(softmax t || softmax s) by hand
        p, q = torch.softmax(t, -1), torch.softmax(s, -1)
        return float((p * (p.log() - q.log())).sum())

    want = (kl(teacher[0], student[0]) + kl(teacher[1], student[1])) / 2
    assert float(kd_term("text_classification", student, teacher)) == pytest.approx(want)
    # temperature 2: T^2 KL of the softened distributions
    want2 = 4 * (kl(teacher[0] / 2, student[0] / 2) + kl(teacher[1] / 2, student[1] / 2)) / 2
    assert float(kd_term("image_classification", student, teacher, temperature=2.0)) == \
        pytest.approx(want2)
    # text generation: the mean over answer tokens only
    s3, t3 = torch.stack([student, student]), torch.stack([teacher, teacher])
    labels = torch.tensor([[5, -100], [-100, 7]])
    want3 = (kl(teacher[0], student[0]) + kl(teacher[1], student[1])) / 2
    assert float(kd_term("text_generation", s3, t3, labels)) == pytest.approx(want3)
    # reconstruction: the MSE to the teacher's image; the teacher gets no gradient
    img_s = torch.zeros(1, 3, 2, 2, requires_grad=True)
    img_t = torch.full((1, 3, 2, 2), 0.5, requires_grad=True)
    loss = kd_term("image_generation", img_s, img_t)
    assert float(loss.detach()) == pytest.approx(0.25)
    loss.backward()
    assert img_t.grad is None and img_s.grad is not None


def test_component_mean_averages_each_key_over_its_holders():
    a = {"x": torch.tensor([1.0]), "y": torch.tensor([2.0])}
    b = {"x": torch.tensor([4.0])}
    out = component_mean([a, b], [1.0, 2.0])
    assert float(out["x"]) == pytest.approx((1 * 1 + 4 * 2) / 3)
    assert float(out["y"]) == 2.0  # only a holds y


def test_server_keeps_components_and_sends_each_client_its_part():
    method = TapFedAvg()
    modules = {("pics",): ["heads.pics", "shared"], ("news",): ["heads.news", "shared"]}
    method.server = SimpleNamespace(task_modules=lambda arch, tasks: modules[tuple(tasks)])
    clients = {0: ClientInfo(0, "tiny-tap", 10, ("pics",)),
               1: ClientInfo(1, "tiny-tap", 30, ("news",)),
               2: ClientInfo(2, "tiny-tap", 5, ("pics",))}
    up0 = {"heads.pics.w": torch.tensor([1.0]), "shared.w": torch.tensor([0.0])}
    up1 = {"heads.news.w": torch.tensor([2.0]), "shared.w": torch.tensor([4.0])}
    out = method.aggregate({0: Payload({"local": up0}), 1: Payload({"local": up1})}, clients, 0)
    shared = (0 * 10 + 4 * 30) / 40
    assert set(out) == {0, 1, 2}  # client 2 did not train, and still gets its part
    assert set(out[2].tensors["local"]) == {"heads.pics.w", "shared.w"}
    assert float(out[2].tensors["local"]["shared.w"]) == pytest.approx(shared)
    assert float(out[1].tensors["local"]["heads.news.w"]) == 2.0
    # next round only client 2 uploads: the news head keeps its last mean
    up2 = {"heads.pics.w": torch.tensor([5.0]), "shared.w": torch.tensor([1.0])}
    out = method.aggregate({2: Payload({"local": up2})}, clients, 1)
    assert float(out[1].tensors["local"]["heads.news.w"]) == 2.0
    assert float(out[1].tensors["local"]["shared.w"]) == 1.0


def test_disentanglement_by_hand():
    a = torch.tensor([[1.0, 0.0], [2.0, 0.0]])  # both along x
    b = torch.tensor([[1.0, 1.0]])  # 45 degrees: cos^2 = 1/2
    c = torch.tensor([[0.0, 3.0]])  # orthogonal to a
    assert float(disentanglement({("image", "k"): a, ("text", "k"): b})) == pytest.approx(0.5)
    # pairs (a, b) 0.5, (a, c) 0, (b, c) 0.5: their mean
    assert float(disentanglement({("i", "1"): a, ("i", "2"): b, ("t", "1"): c})) == \
        pytest.approx(1 / 3)
    assert float(disentanglement({("image", "k"): a})) == 0.0  # one pair: nothing to split
    assert DisentAFL().disent_weight == 0.5 and TapFedAvg().disent_weight == 0.0


def test_latents_are_split_by_modality_and_task_kind():
    """A batch of a VQA task (picture and text) and a text classification gives three pairs;
    each latent is the private path's MoTE output, mean-pooled over real tokens."""
    from drake.models import load_model
    from drake.models.tap import SHARED
    from drake.models.tap_bundle import layout_for
    from drake.synth import generate_sample

    tasks = ["tap-synth-vqa", "tap-synth-topic"]
    specs = [t.to_dict() for t in get_benchmark("tap-synth", size="tiny").tasks
             if t.id in tasks]
    bundle = load_model("tiny-tap", pretrained=False, seed=0)
    bundle.bind(layout_for(specs, {"tap-synth-topic": 4}))
    samples = [generate_sample(t, "train", i, seed=0) for i in range(3) for t in tasks]
    batch = bundle.collate(samples)
    with torch.no_grad():
        bundle.loss(batch)
    latents = bundle.last_latents
    assert {k: tuple(v.shape) for k, v in latents.items()} == {
        ("image", "text_generation"): (3, 64), ("text", "text_generation"): (3, 64),
        ("text", "text_classification"): (3, 64)}
    topic = batch["tasks"]["tap-synth-topic"]
    tap = bundle.tap
    with torch.no_grad():
        x, mask = tap.encoders["text"](topic)
        add = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        h = tap.mote["text"](x, add, "text_classification")
        w = mask.float().unsqueeze(-1)
        want = (h * w).sum(1) / w.sum(1)
    torch.testing.assert_close(latents[("text", "text_classification")], want)
    assert SHARED not in {k[0] for k in latents}


@pytest.fixture(scope="module")
def tap_synth(tmp_path_factory):
    return build(get_benchmark("tap-synth", size="tiny"), tmp_path_factory.mktemp("tap"), seed=0)


def _client(bundle, record, round_, samples, tasks):
    from drake.runtime.client import RuntimeClient

    data = SimpleNamespace(client_tasks={0: tasks}, num_clients=1)
    return RuntimeClient(0, "tiny-tap", bundle, bundle.control, record,
                         list(range(len(samples))), data, round_=round_, steps=2,
                         batch_size=4, lr=1e-3, seed=0,
                         source=lambda ids: [samples[i] for i in ids])


@pytest.mark.parametrize("margin,replaces", [(-100.0, True), (100.0, False)])
def test_a_client_replaces_at_its_second_turn_only_when_the_margin_allows(margin, replaces):
    """Alg. 1: round 0 has no personal history; at the client's next turn every task it trained
    is replaced when ``h_l + m < h_p`` (always for a very negative margin, never for a large
    one), and exactly that task's part of X becomes W's before X trains again."""
    from drake.models import load_model
    from drake.models.tap_bundle import layout_for
    from drake.runtime.client import ClientRecord
    from drake.synth import generate_sample

    tasks = ["tap-synth-topic", "tap-synth-item"]
    specs = [t.to_dict() for t in get_benchmark("tap-synth", size="tiny").tasks
             if t.id in tasks]
    bundle = load_model("tiny-tap", pretrained=False, seed=0)
    bundle.bind(layout_for(specs, {"tap-synth-topic": 4}))
    model = bundle.add_adapter(bundle.model, "local", seed=1)
    bundle.model = bundle.add_adapter(model, "personal", seed=2)
    bundle.control = bundle.adapter_control(bundle.model, ["local", "personal"])
    samples = [generate_sample(t, "train", i, seed=0) for i in range(4) for t in tasks]
    method = Tap(margin=margin, small_margin=margin, post_steps=1)
    seen = []
    import baselines.tap as tap_module

    real = tap_module.replaced

    def spy(personal, fl, flags, modules):
        out = real(personal, fl, flags, modules)
        copied = {k for k in out if not torch.equal(out[k], personal[k])}
        seen.append((dict(flags), copied, {k for k in copied if torch.equal(out[k], fl[k])}))
        return out

    tap_module.replaced = spy
    try:
        first = _client(bundle, ClientRecord(), 0, samples, tasks)
        assert method.local_train(first).meta["replaced"] == 0.0
        record = first.save()
        assert set(record.state) == {"h_fl", "h_personal"}
        second = _client(bundle, record, 1, samples, tasks)
        payload = method.local_train(second)
    finally:
        tap_module.replaced = real
    assert payload.meta["replaced"] == (2.0 if replaces else 0.0)
    if replaces:
        (flags, copied, from_fl), = seen
        assert flags == {t: True for t in tasks}
        modules = [m for t in tasks for m in bundle.tap.task_modules(t)]
        assert copied == from_fl and copied <= set(tap_module.task_keys(list(copied), modules))
        assert any(".heads.tap-synth-topic." in f".{k}" for k in copied)
    else:
        assert seen == []
    # the upload is the client's part of W only: no other task's head
    assert not any("heads.text_generation" in k for k in payload.tensors["local"])
    before = second.get("personal")
    method.post_fl(second)
    after = second.get("personal")
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_per_fedavg_meta_step_and_its_upload_of_the_clients_part():
    from drake.models import load_model
    from drake.models.tap_bundle import layout_for
    from drake.runtime.client import ClientRecord
    from drake.synth import generate_sample

    tasks = ["tap-synth-topic", "tap-synth-item"]
    held = ["tap-synth-topic"]
    specs = [t.to_dict() for t in get_benchmark("tap-synth", size="tiny").tasks
             if t.id in tasks]
    bundle = load_model("tiny-tap", pretrained=False, seed=0)
    bundle.bind(layout_for(specs, {"tap-synth-topic": 4}))
    bundle.model = bundle.add_adapter(bundle.model, "local", seed=1)
    bundle.control = bundle.adapter_control(bundle.model, ["local"])
    samples = [generate_sample("tap-synth-topic", "train", i, seed=0) for i in range(4)]
    client = _client(bundle, ClientRecord(), 0, samples, held)
    method = TapPerFedAvg(lr=0.1, alpha=0.1)
    before = client.get("local")
    payload = method.local_train(client)
    up = payload.tensors["local"]
    assert up and all("item" not in k and "image_generation" not in k for k in up)
    assert any("heads.tap-synth-topic" in k for k in up)
    assert any(not torch.equal(before[k], up[k]) for k in up)  # the meta-step moved it
    # before evaluation one personalising step, undone after
    trained = client.get("local")
    method.before_eval(client)
    assert any(not torch.equal(trained[k], v) for k, v in client.get("local").items())
    method.after_eval(client)
    assert all(torch.equal(trained[k], v) for k, v in client.get("local").items())


def test_tap_runs_on_tap_synth_and_resumes_to_the_same_numbers(tap_synth, tmp_path, capsys):
    def argv(out):
        return ["eval", "--method", "tap", "--data", str(tap_synth), "--scenario", "vilt-30",
                "--rounds", "2", "--local-steps", "2", "--eval-per-task", "1", "--eval-every",
                "2", "--frac", "0.1", "--untrained", "--out", str(out), "--hp",
                "post_steps=1"]

    assert main(argv(tmp_path / "tap")) == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "tap" / "results.json").read_text())
    assert res["method"]["name"] == "tap" and res["metrics"]
    assert all(math.isfinite(v) for v in res["metrics"].values())
    assert main(["leaderboard", "validate", str(tmp_path / "tap" / "results.json"), "--data",
                 str(tap_synth)]) == 0
    # a crash after round 0, then the same command: the same final numbers
    from drake.runtime import local

    real = local.LocalRuntime.run
    local.LocalRuntime.run = lambda self, _stop_after=None: real(self, 0)
    try:
        assert main(argv(tmp_path / "again")) != 0
    finally:
        local.LocalRuntime.run = real
    capsys.readouterr()
    assert main(argv(tmp_path / "again")) == 0
    assert json.loads((tmp_path / "again" / "results.json").read_text())["metrics"] == \
        res["metrics"]


def test_kd_in_post_fl_pulls_the_personal_model_toward_the_fl_copy():
    torch.manual_seed(0)
    student = torch.randn(4, 5, requires_grad=True)
    teacher = torch.randn(4, 5)
    loss = kd_term("image_classification", student, teacher)
    loss.backward()
    with torch.no_grad():
        moved = student - 1.0 * student.grad
    before = F.kl_div(F.log_softmax(student, -1), F.softmax(teacher, -1), reduction="batchmean")
    after = F.kl_div(F.log_softmax(moved, -1), F.softmax(teacher, -1), reduction="batchmean")
    assert after < before


def _two_task_bundle(names):
    from drake.models import load_model
    from drake.models.tap_bundle import layout_for

    tasks = ["tap-synth-topic", "tap-synth-item"]
    specs = [t.to_dict() for t in get_benchmark("tap-synth", size="tiny").tasks
             if t.id in tasks]
    bundle = load_model("tiny-tap", pretrained=False, seed=0)
    bundle.bind(layout_for(specs, {"tap-synth-topic": 4}))
    model = bundle.model
    for i, name in enumerate(names):
        model = bundle.add_adapter(model, name, seed=i + 1)
    bundle.model = model
    bundle.control = bundle.adapter_control(model, names)
    return bundle, tasks


def test_dual_adapter_teacher_mixes_lora_deltas_and_trained_module_outputs():
    """FedDAT's DAT on TAP's model, by hand: with ``local`` and ``teacher`` active at weights
    1/2 each, a LoRA layer adds half of each adapter's delta, and a fully trained module (the
    text classification head) gives half of each copy's output; training only ``local`` leaves
    the teacher's parameters without gradients."""
    from drake.synth import generate_sample

    bundle, tasks = _two_task_bundle(["shared", "local", "teacher"])
    control = bundle.control
    for name in ("local", "teacher"):  # LoRA B starts at zero: give each adapter a delta
        control.load(name, {k: torch.randn_like(v) * 0.1 if "lora_B" in k else v
                            for k, v in control.state(name).items()})
    head = next(m for n, m in bundle.model.named_modules()
                if n.endswith("heads.tap-synth-topic") and hasattr(m, "modules_to_save"))
    feature = torch.randn(3, bundle.tap.hidden)
    with torch.no_grad():
        want = 0.5 * head.modules_to_save["local"](feature) \
            + 0.5 * head.modules_to_save["teacher"](feature)
        control.activate(["local", "teacher"], [0.5, 0.5])
        assert torch.allclose(head(feature), want)
    from peft.tuners.lora import Linear as LoraLinear

    layer = next(m for m in bundle.model.modules() if isinstance(m, LoraLinear))
    x = torch.randn(2, layer.in_features)
    with torch.no_grad():
        base = layer.base_layer(x)
        delta = {n: layer.lora_B[n](layer.lora_A[n](x)) * layer.scaling[n] * 2
                 for n in ("local", "teacher")}  # scaling is halved while mixed
        assert torch.allclose(layer(x), base + 0.5 * delta["local"] + 0.5 * delta["teacher"],
                              atol=1e-6)
    # back to one adapter: one copy, the full delta
    control.activate(["local"])
    with torch.no_grad():
        assert torch.allclose(head(feature), head.modules_to_save["local"](feature))
    samples = [generate_sample(t, "train", i, seed=0) for i in range(2) for t in tasks]
    control.activate(["local", "teacher"], [0.5, 0.5], trainable=["local"])
    bundle.model.train()
    bundle.loss(bundle.collate(samples)).backward()
    assert all(p.grad is None for p in control.params("teacher"))
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in control.params("local"))


def test_feddat_on_tap_weights_task_losses_and_kd_terms_by_task_share():
    """TapFedDAT's supervised loss is TAP's task-share sum of each task's loss of the given
    outputs, and its distillation the same sum of TAP's per-task KD terms (hand-computed)."""
    from drake.synth import generate_sample

    bundle, tasks = _two_task_bundle(["shared"])
    samples = [generate_sample("tap-synth-topic", "train", i, seed=0) for i in range(3)] + \
        [generate_sample("tap-synth-item", "train", 0, seed=0)]
    batch = bundle.collate(samples)
    client = SimpleNamespace(bundle=bundle)
    method = TapFedDAT(temperature=2.0)
    with torch.no_grad():
        out, labels = bundle.label_logits(batch)
        topic, item = out["tap-synth-topic"], out["tap-synth-item"]
        item_target = batch["tasks"]["tap-synth-item"].get(
            "target_values", batch["tasks"]["tap-synth-item"]["pixel_values"])
        want = 0.75 * F.cross_entropy(topic, labels["tap-synth-topic"]) \
            + 0.25 * F.mse_loss(item, item_target)
        assert torch.allclose(method.supervised(client, batch, out, labels), want)
        other = {"tap-synth-topic": topic + torch.randn_like(topic), "tap-synth-item": item + 0.1}
        t = 2.0
        kl = F.kl_div(F.log_softmax(topic / t, -1), F.softmax(other["tap-synth-topic"] / t, -1),
                      reduction="batchmean") * t * t
        want = 0.75 * kl + 0.25 * F.mse_loss(item, other["tap-synth-item"])
        assert torch.allclose(method.distil(client, batch, out, other, labels), want)


def test_feddat_runs_on_tap_synth_with_and_without_post_training(tap_synth, tmp_path, capsys):
    base = ["eval", "--method", "tap-feddat", "--data", str(tap_synth), "--scenario", "flava-30",
            "--rounds", "1", "--local-steps", "1", "--eval-per-task", "1", "--frac", "0.07",
            "--untrained"]
    assert main([*base, "--out", str(tmp_path / "plain")]) == 0, capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "post"), "--hp", "post_steps=2"]) == 0, \
        capsys.readouterr().err
    def views(run):
        return {f.name: json.loads(f.read_text())["metrics"]
                for f in sorted((tmp_path / run).glob("results*.json"))}

    plain, post = views("plain"), views("post")
    assert len(plain) == 8 and set(plain) == set(post)  # every task of the layout is scored
    assert plain != post  # the extra DAT iterations changed the models
