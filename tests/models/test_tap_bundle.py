"""The TAP model kind as the runtime drives it (drake.models.tap_bundle): the layout of a
build's tasks, mixed-task batches and TAP's task-weighted loss, each kind's prediction, and
the one-adapter-at-a-time control."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from drake.errors import DrakeError
from drake.models import load_model
from drake.models.errors import ModelNotPretrained
from drake.models.tap_bundle import layout_for, pixels, task_kind, unnormalise
from drake.registry import get_benchmark
from drake.synth import generate_sample

TASKS = ("tap-synth-objects", "tap-synth-topic", "tap-synth-item", "tap-synth-vqa",
         "tap-synth-quiz")


@pytest.fixture(scope="module")
def bundle():
    specs = [t.to_dict() for t in get_benchmark("tap-synth", size="tiny").tasks
             if t.id in TASKS]
    b = load_model("tiny-tap", pretrained=False, seed=0)
    b.bind(layout_for(specs, {"tap-synth-objects": 192, "tap-synth-topic": 4}))
    model = b.add_adapter(b.model, "w", seed=1)
    b.model = b.add_adapter(model, "x", seed=2)
    b.control = b.adapter_control(b.model, ["w", "x"])
    return b


def _samples(per_task: int = 2) -> list[dict]:
    return [generate_sample(t, "train", i, seed=0) for i in range(per_task) for t in TASKS]


def test_layout_of_the_tap_synth_tasks():
    specs = [t.to_dict() for t in get_benchmark("tap-synth", size="tiny").tasks]
    layout = layout_for(specs, {"tap-synth-objects": 192, "tap-synth-coarse": 64,
                                "tap-synth-topic": 4})
    got = {t.name: (t.kind, t.modalities, t.classes) for t in layout.tasks}
    assert got == {
        "tap-synth-objects": ("image_classification", ("image",), 192),
        "tap-synth-coarse": ("image_classification", ("image",), 64),
        "tap-synth-item": ("image_generation", ("image",), 0),
        "tap-synth-scene": ("image_generation", ("image",), 0),
        "tap-synth-topic": ("text_classification", ("text",), 4),
        "tap-synth-quiz": ("text_generation", ("text",), 0),
        "tap-synth-vqa": ("text_generation", ("image", "text"), 0),
        "tap-synth-describe": ("text_generation", ("text",), 0)}
    # the real TAP benchmark's tasks get the same kinds
    kinds = {t.id: task_kind(t.to_dict()) for t in get_benchmark("tap").tasks}
    assert kinds["fashion-mnist"] == "image_generation" and kinds["ag-news"] == \
        "text_classification" and kinds["vqav2-small"] == "text_generation"


def test_pixels_are_taps_normalised_64px_and_come_back():
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (48, 48, 3), np.uint8))
    x = pixels(img)
    assert x.shape == (3, 64, 64)
    back = unnormalise(x[None])[0]
    want = np.asarray(img.resize((64, 64), Image.BILINEAR), np.float32) / 255.0
    np.testing.assert_allclose(back, want, atol=1e-5)


def test_mixed_batch_loss_is_the_task_share_weighted_sum(bundle):
    bundle.control.activate(["w"], trainable=["w"])
    bundle.model.eval()
    samples = _samples(2)[:-1]  # quiz once, the others twice: unequal shares
    batch = bundle.collate(samples)
    assert batch["counts"] == {"tap-synth-objects": 2, "tap-synth-topic": 2,
                               "tap-synth-item": 2, "tap-synth-vqa": 2, "tap-synth-quiz": 1}
    losses = bundle.task_losses(batch)
    want = sum(losses[t] * n / 9 for t, n in batch["counts"].items())
    torch.testing.assert_close(bundle.loss(batch), want)
    # text generation is teacher-forced: the decoder input is the answer shifted right
    vqa = batch["tasks"]["tap-synth-vqa"]
    labels, inputs = vqa["labels"][0], vqa["decoder_input_ids"][0]
    n = int((labels != -100).sum())
    assert inputs[0] == bundle.bos and labels[n - 1] == bundle.eos
    assert inputs[1:n].tolist() == labels[:n - 1].tolist()
    assert bundle.tokenizer.decode(labels[:n - 1]).strip() == samples[3]["answer"]


def test_reconstruction_reads_its_inputs_and_learns_the_stored_target(bundle):
    """A reconstruction feeds all but its last picture and is scored against the last, the
    stored target: a sample whose target differs from its input gets the target's loss."""
    import torch.nn.functional as F

    bundle.control.activate(["w"])
    bundle.model.eval()
    sample = generate_sample("tap-synth-item", "train", 0, seed=0)
    black = Image.new("RGB", (64, 64), (0, 0, 0))
    other = {**sample, "images": [sample["images"][0], black]}
    batch = bundle.collate([other])["tasks"]["tap-synth-item"]
    torch.testing.assert_close(batch["pixel_values"][0], pixels(sample["images"][0]))
    torch.testing.assert_close(batch["target_values"][0], pixels(black))
    with torch.no_grad():
        out = bundle.outputs(bundle.collate([other]))["tap-synth-item"]
        loss = bundle.task_losses(bundle.collate([other]))["tap-synth-item"]
    torch.testing.assert_close(loss, F.mse_loss(out, pixels(black)[None]))
    assert not torch.allclose(loss, F.mse_loss(out, batch["pixel_values"]))
    # the stored target of a tap-synth sample is its input's pixels
    same = bundle.collate([sample])["tasks"]["tap-synth-item"]
    torch.testing.assert_close(same["target_values"], same["pixel_values"])


def test_a_reconstruction_without_a_stored_target_is_refused(bundle):
    sample = generate_sample("tap-synth-item", "train", 0, seed=0)
    old = {**sample, "images": sample["images"][:1], "answer_type": "captioning"}
    with pytest.raises(DrakeError, match=r"stores no target image.*answer_type 'image'"):
        bundle.collate([old])


def test_predictions_per_kind_in_sample_order(bundle):
    bundle.control.activate(["w"])
    samples = _samples(1)
    preds = bundle.predict(samples)
    assert isinstance(preds[0], int) and 0 <= preds[0] < 192
    assert isinstance(preds[1], int) and 0 <= preds[1] < 4
    assert preds[2].shape == (64, 64, 3) and 0 <= preds[2].min() and preds[2].max() <= 1
    assert isinstance(preds[3], str) and isinstance(preds[4], str)
    # the text is the argmax at each answer position, cut at the end token
    batch = bundle.collate(samples[3:4])
    with torch.no_grad():
        logits = bundle.outputs(batch)["tap-synth-vqa"][0]
    labels = batch["tasks"]["tap-synth-vqa"]["labels"][0]
    ids = [int(t) for t, g in zip(logits.argmax(-1), labels) if g != -100]
    ids = ids[:ids.index(bundle.eos)] if bundle.eos in ids else ids
    assert preds[3] == bundle.tokenizer.decode(ids, skip_special_tokens=True).strip()


def test_adapters_are_separate_and_one_runs_at_a_time(bundle):
    control = bundle.control
    w, x = control.state("w"), control.state("x")
    assert set(w) == set(x) and any("modules_to_save" in k for k in w)
    batch = bundle.collate(_samples(1))
    # both start as copies of the same head; move x's
    control.load("x", {k: v + 0.1 if "heads.tap-synth-topic" in k else v for k, v in x.items()})
    control.activate(["w"])
    with torch.no_grad():
        out_w = bundle.outputs(batch)["tap-synth-topic"]
    control.activate(["x"])
    with torch.no_grad():
        out_x = bundle.outputs(batch)["tap-synth-topic"]
    assert not torch.allclose(out_w, out_x)  # each runs its own head
    control.load("x", w)
    with torch.no_grad():
        torch.testing.assert_close(bundle.outputs(batch)["tap-synth-topic"], out_w)
    control.load("x", x)
    with pytest.raises(ValueError, match="2 adapters"):
        control.activate(["w", "x"], [1.0])


@pytest.mark.parametrize("name", ["tiny-tap", "tiny-tap-vilt"])
def test_tiny_tap_loads_the_shipped_backbone_and_an_empty_cache_says_how_to_fix(
        name, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from drake.models.shipped import SHIPPED_ROOT

    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty"))
    bundle = load_model(name)
    saved = load_file(str(SHIPPED_ROOT / name / "model.safetensors"))
    state = bundle.base.state_dict()
    assert set(saved) == set(state) and all(torch.equal(state[k], v) for k, v in saved.items())
    with pytest.raises(ModelNotPretrained, match=f"drake models pretrain --model {name}"):
        load_model(name, cache_dir=tmp_path / "other")
    assert issubclass(ModelNotPretrained, DrakeError)
