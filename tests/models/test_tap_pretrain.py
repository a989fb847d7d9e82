"""Pretraining the tiny TAP backbones (drake.models.tap_pretrain): their own objectives on
drake-synth's public split, byte-identical for a seed, loadable from the cache it writes."""

from __future__ import annotations

import json

import pytest
import torch

from drake.models import load_model
from drake.models.pretrain import public_samples
from drake.models.tap_pretrain import MASK_RATE, _Batches, pretrain_tap


def test_every_answer_word_is_masked_and_question_words_at_the_rate():
    import numpy as np

    bundle = load_model("tiny-tap", pretrained=False)
    data = _Batches(bundle, public_samples("synth-public-open", "train", 64, 0), 32)
    assert data.pixels.shape == (64, 3, 32, 32)
    _, masked, mask, labels, full = data.take(list(range(64)), np.random.default_rng(0))
    assert torch.equal(full, data.ids)
    chosen = labels != -100
    assert torch.equal(chosen & data.answer, data.answer & mask.bool())  # every answer word
    assert not chosen[:, 0].any()  # the first (summary) token never
    question = mask.bool() & ~data.answer
    question[:, 0] = False
    rate = float(chosen[question].float().mean())
    assert abs(rate - MASK_RATE) < 0.06
    assert torch.equal(masked[chosen], torch.full_like(masked[chosen], data.unk))
    assert torch.equal(masked[~chosen], full[~chosen])


@pytest.mark.parametrize("name", ["tiny-tap", "tiny-tap-vilt"])
def test_same_seed_same_bytes_and_the_cache_loads_them(name, tmp_path):
    budget = {"steps": 3, "batch_size": 4, "train_size": 16, "eval_size": 8}
    first = pretrain_tap(name, out_dir=tmp_path / "a", **budget)
    second = pretrain_tap(name, out_dir=tmp_path / "b", **budget)
    one, two = (json.loads((f / "pretrain_report.json").read_text()) for f in (first, second))
    assert one["weights_sha256"] == two["weights_sha256"]
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    assert set(one["held_out_after"]) >= {"answer_accuracy"}
    assert one["machine"] == two["machine"] and one["machine"]["cpu"]
    untrained = load_model(name, pretrained=False).base.state_dict()
    loaded = load_model(name, cache_dir=tmp_path / "a").base.state_dict()
    assert any(not torch.equal(untrained[k], loaded[k]) for k in loaded)  # it trained
