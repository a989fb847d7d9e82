"""TAP's real backbones from an offline Hub cache: small ``FlavaModel`` / ``ViltForMaskedLM``
checkpoints with BERT tokenizers stand in for ``facebook/flava-full`` and
``dandelin/vilt-b32-mlm``; the loader truncates them as TAP does and the TAP model runs on them."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import BertTokenizerFast, FlavaConfig, FlavaModel, ViltConfig, ViltForMaskedLM

from drake.build import build
from drake.cli import main
from drake.errors import NetworkUnavailable
from drake.models import load_model
from drake.models.tap_bundle import TapBundle, layout_for
from drake.registry import get_benchmark

WORDS = ["what", "colour", "is", "the", "red", "blue", "answer", ":", "a", "circle"]


def _tokenizer(folder) -> None:
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)


def _common(hidden=32):
    return {"hidden_size": hidden, "num_attention_heads": 2, "intermediate_size": 2 * hidden,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


@pytest.fixture()
def cached_flava(offline_hub, hub_snapshot):
    """A small FLAVA (four multimodal layers, of which TAP keeps two) as facebook/flava-full."""
    snapshot = hub_snapshot(offline_hub, "facebook/flava-full")
    _tokenizer(snapshot)
    config = FlavaConfig(
        image_config={**_common(), "num_hidden_layers": 1, "image_size": 32, "patch_size": 8},
        text_config={**_common(), "num_hidden_layers": 1, "vocab_size": 5 + len(WORDS),
                     "max_position_embeddings": 40},
        multimodal_config={**_common(), "num_hidden_layers": 4}, hidden_size=32,
        projection_dim=32)
    torch.manual_seed(0)
    FlavaModel(config).save_pretrained(snapshot)
    return snapshot


@pytest.fixture()
def cached_vilt(offline_hub, hub_snapshot):
    """A small ViLT masked-LM checkpoint (ten layers, of which TAP keeps eight) as
    dandelin/vilt-b32-mlm."""
    snapshot = hub_snapshot(offline_hub, "dandelin/vilt-b32-mlm")
    _tokenizer(snapshot)
    config = ViltConfig(**_common(), num_hidden_layers=10, image_size=32, patch_size=8,
                        vocab_size=5 + len(WORDS), max_position_embeddings=40)
    torch.manual_seed(0)
    ViltForMaskedLM(config).save_pretrained(snapshot)
    return snapshot


def _samples(tasks):
    from drake.synth import generate_sample

    return [generate_sample(t, "train", i, seed=0) for i in range(2) for t in tasks]


@pytest.mark.parametrize("name,kept", [("flava-full", 2), ("vilt-b32", 8)])
def test_real_backbones_load_truncated_and_train(name, kept, request):
    request.getfixturevalue("cached_flava" if name == "flava-full" else "cached_vilt")
    bundle = load_model(name)
    assert isinstance(bundle, TapBundle) and bundle.tokenizer.cls_token == "[CLS]"
    base = bundle.base
    layers = base.encoder.layer if name == "vilt-b32" else base.multimodal_model.encoder.layer
    assert len(layers) == kept and bundle.max_text_tokens == 40
    assert bundle.stack_depth == kept // 2
    tasks = ["tap-synth-topic", "tap-synth-item", "tap-synth-vqa"]
    specs = [t.to_dict() for t in get_benchmark("tap-synth", size="tiny").tasks if t.id in tasks]
    bundle.bind(layout_for(specs, {"tap-synth-topic": 4}))
    bundle.model = bundle.add_adapter(bundle.model, "w", seed=0)
    bundle.adapter_control(bundle.model, ["w"]).activate(["w"], trainable=["w"])
    bundle.model.train()
    loss = bundle.loss(bundle.collate(_samples(tasks)))
    loss.backward()
    assert torch.isfinite(loss)
    frozen = [p for n, p in bundle.base.named_parameters() if "lora_" not in n]
    assert frozen and all(p.grad is None for p in frozen)  # the backbone's own weights stay
    preds = bundle.predict(_samples(tasks)[:3])
    assert len(preds) == 3


def test_uncached_real_backbone_fails_fast_offline_naming_the_tiny_ones(offline_hub):
    with pytest.raises(NetworkUnavailable, match="tiny-tap") as err:
        load_model("vilt-b32")
    assert "dandelin/vilt-b32-mlm" in str(err.value) and "HF_HUB_OFFLINE" in str(err.value)


def test_drake_eval_runs_tap_on_the_hub_flava(cached_flava, tmp_path, capsys):
    data = build(get_benchmark("tap-synth", size="tiny"), tmp_path / "data", seed=0)
    argv = ["eval", "--method", "tap-fedavg", "--data", str(data), "--scenario", "flava-30",
            "--model", "flava-full", "--rounds", "1", "--local-steps", "1", "--eval-per-task",
            "1", "--frac", "0.07", "--out", str(tmp_path / "run")]
    assert main(argv) == 0, capsys.readouterr().err
    result = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(result["models_per_client"]) == {"flava-full"} and result["metrics"]
