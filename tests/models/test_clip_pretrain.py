"""tiny-clip's pretraining (drake.models.clip_pretrain): deterministic bytes, what each stage
trains, what it loads from, what the shipped file is, and that it classifies far above chance."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from drake.models import ModelLoadError, ModelNotPretrained, clip_pretrain, load_model
from drake.models import shipped as shipped_module
from drake.models.clip import CLASS_TEMPLATE
from drake.models.clip_pretrain import pretrain_clip, pretrained_state
from drake.models.shipped import SHIPPED_ROOT, SHIPPED_SHA256

SMALL = {"pictures": 96, "steps": 8, "tower_steps": 4, "batch_size": 16}


def test_same_seed_same_bytes_and_a_report_of_what_ran(tmp_path):
    first = pretrain_clip(out_dir=tmp_path / "a", **SMALL)
    second = pretrain_clip(out_dir=tmp_path / "b", **SMALL)
    one, two = (f / "model.safetensors" for f in (first, second))
    assert one.read_bytes() == two.read_bytes()
    report = json.loads((first / "pretrain_report.json").read_text())
    assert (report["pictures"], report["steps"], report["tower_steps"], report["classes"]) == (
        96, 8, 4, 192)
    assert report["tower_stages"] == 1 and report["tower_held_out_accuracy"] is not None
    assert set(report["machine"]) == {"cpu", "cpu_capability"}
    assert set(report["held_out_accuracy_by_domain"]) == {
        "plain", "noise", "stripes", "gradient", "sketch", "texture"}
    assert report["held_out_pictures"] == 192 * 6
    # the text side and the tower's last stage are saved; the rest of the tower is the shipped
    # tiny LLaVA tower's
    tower = {k for k in load_file(str(one)) if k.startswith("vision.")}
    assert tower and all(k.startswith(("vision.encoder.layers.3.", "vision.layernorm."))
                         for k in tower)
    other = pretrain_clip(out_dir=tmp_path / "c", seed=1, **SMALL)
    assert (other / "model.safetensors").read_bytes() != one.read_bytes()


def test_load_model_reads_the_cache_then_the_shipped_file(tmp_path, monkeypatch):
    folder = pretrain_clip(out_dir=tmp_path, **SMALL)
    saved = load_file(str(folder / "model.safetensors"))
    cached = pretrained_state(load_model("tiny-clip", cache_dir=tmp_path)._core())
    assert saved.keys() == cached.keys()
    assert all(torch.equal(saved[k], cached[k]) for k in saved)
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty"))
    shipped = load_file(str(SHIPPED_ROOT / "tiny-clip" / "model.safetensors"))
    default = pretrained_state(load_model("tiny-clip")._core())
    assert all(torch.equal(shipped[k], default[k]) for k in shipped)
    untrained = pretrained_state(load_model("tiny-clip", pretrained=False)._core())
    assert not torch.equal(untrained["text_projection.weight"], default["text_projection.weight"])


def test_an_explicit_cache_without_it_names_the_command(tmp_path):
    with pytest.raises(ModelNotPretrained, match="drake models pretrain --model tiny-clip"):
        load_model("tiny-clip", cache_dir=tmp_path)


def test_a_tampered_shipped_text_side_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty"))
    root = tmp_path / "weights"
    for name in ("tiny-llava-llama", "tiny-clip"):
        shutil.copytree(SHIPPED_ROOT / name, root / name)
    weights = root / "tiny-clip" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    monkeypatch.setattr(shipped_module, "SHIPPED_ROOT", root)
    with pytest.raises(ModelLoadError, match="sha256"):
        load_model("tiny-clip")


def test_the_shipped_file_is_the_default_run_and_classifies_far_above_chance():
    """Its report names the defaults and seed 0; on one synth-cls test picture of each of the
    192 classes (a build's rows, never seen in pretraining) the shipped model is right on far
    more than chance's 0.5 % (the report has the held-out figure over 1152 pictures)."""
    from drake.synth.catalog import generate_sample
    from drake.synth.extra import CLS_CLASSES

    report = json.loads((SHIPPED_ROOT / "tiny-clip" / "pretrain_report.json").read_text())
    assert report["weights_sha256"] == SHIPPED_SHA256["tiny-clip"]
    assert (report["pictures"], report["steps"], report["batch_size"], report["lr"],
            report["seed"], report["objective"], report["tower_steps"]) == (
        clip_pretrain.DEFAULT_CLIP_PICTURES, clip_pretrain.DEFAULT_CLIP_STEPS,
        clip_pretrain.DEFAULT_CLIP_BATCH_SIZE, clip_pretrain.DEFAULT_CLIP_LR, 0, "captions",
        clip_pretrain.DEFAULT_CLIP_TOWER_STEPS)
    # the features are rich (an aligned text side gets nearly every class) and the shipped text
    # side leaves room below them
    assert report["tower_held_out_accuracy"] > report["held_out_accuracy"] + 20
    bundle = load_model("tiny-clip")
    samples = [generate_sample("synth-cls", "test", i, 0) for i in range(192)]
    with torch.no_grad():
        logits = bundle.class_logits(samples, list(CLS_CLASSES))
    right = (logits.argmax(-1) == torch.tensor([s["label"] for s in samples])).float().mean()
    assert right > 0.25


def test_cli_pretrains_tiny_clip_alone(tmp_path, capsys):
    from drake.cli import main

    argv = ["models", "pretrain", "--model", "tiny-clip", "--clip-steps", "3",
            "--clip-tower-steps", "2", "--clip-pictures", "32", "--cache-dir", str(tmp_path)]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "tiny-clip: 2 tower + 3 text steps" in out and "a fully aligned text side" in out
    assert "differs from the shipped weights" in out
    assert "(captions objective)" in out
    assert (tmp_path / "tiny-clip" / "model.safetensors").is_file()
    assert main([*argv, "--clip-objective", "classes"]) == 0, capsys.readouterr().err
    assert "(classes objective)" in capsys.readouterr().out
    report = json.loads((tmp_path / "tiny-clip" / "pretrain_report.json").read_text())
    assert report["objective"] == "classes"


def test_caption_loss_by_hand():
    # distinct labels: CLIP's loss. Rows: log(1+e^-2) and log 2; columns: log(1+e^-1) twice.
    logits = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    rows = (math.log(1 + math.exp(-2)) + math.log(2)) / 2
    cols = math.log(1 + math.exp(-1))
    assert float(clip_pretrain.caption_loss(logits, torch.tensor([0, 1]))) == pytest.approx(
        (rows + cols) / 2, abs=1e-6)
    # pictures 0 and 1 share a class: each row's target is half on each of their captions.
    # With L = log(e + 2), rows 0 and 1 give L - 1/2, row 2 gives L - 1 (both directions alike)
    big_l = math.log(math.e + 2)
    want = (2 * (big_l - 0.5) + (big_l - 1)) / 3
    got = clip_pretrain.caption_loss(torch.eye(3), torch.tensor([0, 0, 1]))
    assert float(got) == pytest.approx(want, abs=1e-6)


def test_captions_name_the_class_words_and_never_the_class_prompt():
    from drake.synth.extra import CLS_CLASSES, CLS_TRIPLES

    rng = np.random.default_rng(0)
    labels = np.arange(len(CLS_CLASSES)).repeat(4)
    caps = clip_pretrain.captions(rng, labels, ["noise"] * len(labels))
    prompts = {CLASS_TEMPLATE.format(c) for c in CLS_CLASSES}
    assert not prompts & set(caps)
    assert len({c.split(" ")[0] for c in caps}) > 3  # several templates drawn
    for cap, y in zip(caps, labels):
        colour, fill, shape = CLS_TRIPLES[y]
        words = set(cap.split())
        assert shape in words and len(words & {colour, fill, shape}) >= 2


def test_the_captions_objective_is_the_default_deterministic_and_its_own(tmp_path):
    one = pretrain_clip(out_dir=tmp_path / "a", **SMALL)
    two = pretrain_clip(out_dir=tmp_path / "b", objective="captions", **SMALL)
    classes = pretrain_clip(out_dir=tmp_path / "c", objective="classes", **SMALL)
    data = [(f / "model.safetensors").read_bytes() for f in (one, two, classes)]
    assert data[0] == data[1] != data[2]
    assert json.loads((one / "pretrain_report.json").read_text())["objective"] == "captions"
    with pytest.raises(ValueError, match="objective must be one of classes, captions"):
        pretrain_clip(out_dir=tmp_path / "d", objective="prompts", **SMALL)


@pytest.mark.parametrize("first", [0, 2, 3, 4])
def test_the_tower_from_cached_states_is_the_swin_pooler(first):
    """Stage 1 computes the stages before ``first`` once and runs the rest with gradients; the
    two halves together are the Swin tower's own pooled output."""
    bundle = load_model("tiny-clip")
    vision = bundle._core().vision
    pixels = torch.rand(3, 3, 48, 48)
    states, dims = clip_pretrain.tower_inputs(vision, pixels, first)
    with torch.no_grad():
        got = clip_pretrain.tower_pooled(vision, states, dims, first)
        want = vision(pixel_values=pixels).pooler_output
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_stage_one_trains_the_last_swin_stage_only_and_zero_keeps_the_tower(tmp_path):
    from drake.models.loading import _load_tiny_clip
    from drake.models.zoo import get_info

    shipped = _load_tiny_clip(get_info("tiny-clip"), None, True, 0, None, text=False)._core()
    before = shipped.vision.state_dict()
    trained = load_model("tiny-clip", cache_dir=pretrain_clip(out_dir=tmp_path / "a", **SMALL
                                                              ).parent)._core()
    after = trained.vision.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(k.startswith(("encoder.layers.3.", "layernorm.")) for k in moved)
    kept = pretrain_clip(out_dir=tmp_path / "b", **{**SMALL, "tower_steps": 0})
    report = json.loads((kept / "pretrain_report.json").read_text())
    assert report["tower_stages"] == 0 and report["tower_held_out_accuracy"] is None
    tower = load_model("tiny-clip", cache_dir=kept.parent)._core().vision.state_dict()
    assert all(torch.equal(before[k], tower[k]) for k in before)
    with pytest.raises(ValueError, match="tower_steps must be an integer >= 0"):
        pretrain_clip(out_dir=tmp_path / "c", **{**SMALL, "tower_steps": -1})
