"""The pretrained tiny weights shipped in the package: pinned, checked at load, small."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch

from drake.models import ModelLoadError, load_model
from drake.models import shipped as shipped_module
from drake.models.shipped import SHIPPED_ROOT, SHIPPED_SHA256, shipped_folder
from drake.models.zoo import TINY_MODELS


def test_every_tiny_family_ships_pinned_weights():
    assert set(SHIPPED_SHA256) == {*TINY_MODELS, "tiny-clip", "tiny-tap", "tiny-tap-vilt"}
    total = 0
    for name in SHIPPED_SHA256:
        folder = shipped_folder(name)
        assert folder is not None, name
        weights = folder / "model.safetensors"
        assert hashlib.sha256(weights.read_bytes()).hexdigest() == SHIPPED_SHA256[name]
        report = json.loads((folder / "pretrain_report.json").read_text())
        # the report is the one pretraining wrote for exactly these bytes
        assert report["weights_sha256"] == SHIPPED_SHA256[name] and report["seed"] == 0
        total += sum(p.stat().st_size for p in folder.iterdir())
    assert total <= 50 * 2**20, f"shipped weights take {total / 2**20:.1f} MB, over 50 MB"


def test_load_model_uses_the_shipped_weights_when_the_cache_is_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty"))
    bundle = load_model("tiny-llava-llama")
    from safetensors.torch import load_file

    saved = load_file(str(SHIPPED_ROOT / "tiny-llava-llama" / "model.safetensors"))
    params = list(bundle.model.state_dict().values())
    for key, value in saved.items():
        assert any(p.shape == value.shape and torch.equal(p, value) for p in params), key


def test_a_tampered_shipped_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty"))
    root = tmp_path / "weights"
    shutil.copytree(SHIPPED_ROOT / "tiny-llava-qwen", root / "tiny-llava-qwen")
    weights = root / "tiny-llava-qwen" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    monkeypatch.setattr(shipped_module, "SHIPPED_ROOT", root)
    with pytest.raises(ModelLoadError, match="sha256") as err:
        load_model("tiny-llava-qwen")
    assert str(weights) in str(err.value) and "drake models pretrain" in str(err.value)


def test_an_explicit_cache_does_not_fall_back_to_the_shipped_weights(tmp_path):
    from drake.models import ModelNotPretrained

    with pytest.raises(ModelNotPretrained, match="drake models pretrain") as err:
        load_model("tiny-llava-llama", cache_dir=tmp_path)
    # the cache was chosen: the message names the shipped weights before two hours of training
    assert "cache_dir=None for the weights shipped with drake" in str(err.value)


def test_pretrained_missing_says_what_load_model_would_miss(tmp_path, monkeypatch):
    from drake.models.loading import pretrained_missing

    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "empty"))
    assert pretrained_missing("tiny-llava-llama") == []  # the shipped weights
    assert pretrained_missing("tiny-llava-llama", tmp_path) == [
        "model.safetensors", "config.json", "tokenizer.json"]
    assert pretrained_missing("llama3.2-1b-vl", tmp_path) == []  # real backbones: the HF cache


def test_shipped_weights_are_what_pretrain_writes_with_its_defaults():
    """`drake models pretrain` (defaults, seed 0) reproduces them; their reports say so."""
    import importlib

    stage = importlib.import_module("drake.models.pretrain")
    lookup_stage = importlib.import_module("drake.models.lookup_pretrain")
    label_stage = importlib.import_module("drake.models.label_pretrain")

    for name in TINY_MODELS:
        report = json.loads((SHIPPED_ROOT / name / "pretrain_report.json").read_text())
        assert (report["steps"], report["batch_size"], report["lr"], report["seed"]) == (
            stage.DEFAULT_STEPS, stage.DEFAULT_BATCH_SIZE, stage.DEFAULT_LR, 0)
        assert report["train_samples"] == stage.DEFAULT_TRAIN_SIZE
        assert report["eval_samples"] == stage.DEFAULT_EVAL_SIZE
        assert report["grounding_weight"] == stage.GROUNDING_WEIGHT
        lookup = report.get("lookup_stage")  # stage 3, when the defaults run it
        if stage.DEFAULT_LOOKUP_STEPS:
            assert (lookup["steps"], lookup["batch_size"], lookup["lr"], lookup["seed"]) == (
                stage.DEFAULT_LOOKUP_STEPS, stage.DEFAULT_BATCH_SIZE, stage.DEFAULT_LR, 0)
            assert lookup["lookup_share"] == lookup_stage.DEFAULT_LOOKUP_SHARE
            assert lookup["pointer_weight"] == lookup_stage.POINTER_WEIGHT
            assert lookup["pointer_heads"] == [list(h) for h in lookup_stage.POINTER_HEADS[name]]
            assert lookup["eval_samples"] == stage.DEFAULT_EVAL_SIZE
        else:
            assert lookup is None
        label = report.get("label_stage")  # stage 4, which follows stage 3 by default
        if stage.label_steps_after(None, stage.DEFAULT_LOOKUP_STEPS):
            assert (label["steps"], label["batch_size"], label["lr"], label["seed"]) == (
                stage.DEFAULT_LABEL_STEPS, stage.DEFAULT_BATCH_SIZE,
                label_stage.DEFAULT_LABEL_LR, 0)
            assert label["label_share"] == label_stage.DEFAULT_LABEL_SHARE
            assert label["value_weight"] == label_stage.DEFAULT_VALUE_WEIGHT
            assert label["label_head"] == list(label_stage.LABEL_HEADS[name][0])
            assert label["eval_samples"] == stage.DEFAULT_EVAL_SIZE
        else:
            assert label is None
    reports = [json.loads((SHIPPED_ROOT / n / "pretrain_report.json").read_text())
               for n in TINY_MODELS]
    assert len({r["vision_sha256"] for r in reports}) == 1  # one tower for both families


def test_the_synth_vocabulary_is_the_shipped_tokenizers():
    """New drake-synth words would change the tiny models' embedding tables: the shipped weights
    would no longer load. Templates must reuse the words the shipped tokenizers know."""
    from drake.models.tiny import synth_vocabulary
    from drake.models.tokenizer import build_tokenizer

    built = build_tokenizer(synth_vocabulary()).get_vocab()
    for name in TINY_MODELS:
        shipped = json.loads((SHIPPED_ROOT / name / "tokenizer.json").read_text())
        extra = sorted(set(built) - set(shipped["model"]["vocab"]))
        assert built == shipped["model"]["vocab"], f"words the shipped {name} lacks: {extra[:20]}"
