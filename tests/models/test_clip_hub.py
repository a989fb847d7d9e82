"""OpenAI's CLIP from the Hub cache as the CLIP kind: a tiny ``CLIPModel`` and a CLIP BPE
tokenizer stand in for ``openai/clip-vit-base-patch16`` in an offline Hub cache."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from tokenizers import pre_tokenizers
from transformers import AutoTokenizer, CLIPConfig, CLIPModel

from drake.errors import NetworkUnavailable
from drake.models import add_lora, clip_pixels, load_model
from drake.models.clip import ClipBundle, HubClip
from drake.models.zoo import CLIP_BOTH_LORA_REGEX, CLIP_LORA_REGEX

HF_ID = "openai/clip-vit-base-patch16"
#: BPE merges of the test tokenizer: enough to make multi-character tokens of the prompts
MERGES = (("o", "f</w>"), ("r", "e"), ("re", "d</w>"), ("b", "l"), ("bl", "ue</w>"),
          ("u", "e</w>"))
TEXT_POSITIONS = 24  # shorter than OpenAI's 77: truncation must follow the config


def _clip_vocab() -> dict[str, int]:
    """A vocabulary in CLIP's format: every byte-level character alone and ending a word
    (``</w>``), the merged tokens, then the start and end tokens (end = highest id, which CLIP's
    text tower pools at)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = alphabet + [c + "</w>" for c in alphabet] + [a + b for a, b in MERGES]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab


def _write_clip_tokenizer(folder: Path) -> dict[str, int]:
    """``vocab.json`` and ``merges.txt`` of :func:`_clip_vocab`, as OpenAI's repos hold them."""
    vocab = _clip_vocab()
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n"
                                                                   for a, b in MERGES))
    return vocab


def _tiny_clip_model(vocab: dict[str, int], seed: int = 0) -> CLIPModel:
    """A CLIPModel with OpenAI's layout at toy size: 32-px images in 8-px patches, width 32,
    two layers per tower, a 16-dimensional shared space. ``eos_token_id`` 2 is the legacy value
    of OpenAI's configs (the text tower then pools at the highest id, the end token)."""
    config = CLIPConfig(
        text_config={"vocab_size": len(vocab), "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 2,
                     "max_position_embeddings": TEXT_POSITIONS, "bos_token_id": 0,
                     "eos_token_id": 2, "pad_token_id": 1},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    torch.manual_seed(seed)
    return CLIPModel(config)


@pytest.fixture()
def cached_clip(offline_hub, hub_snapshot) -> Path:
    """The tiny CLIP saved as ``openai/clip-vit-base-patch16`` in an offline Hub cache."""
    snapshot = hub_snapshot(offline_hub, HF_ID)
    vocab = _write_clip_tokenizer(snapshot)
    _tiny_clip_model(vocab).save_pretrained(snapshot)  # safetensors, transformers' default
    assert (snapshot / "model.safetensors").is_file()
    return snapshot


def _samples(size: int = 40) -> list[dict]:
    colours = [(200, 0, 0), (0, 0, 200), (0, 150, 0)]
    return [{"id": f"s{i}", "images": [Image.new("RGB", (size, size * 3 // 4), c)],
             "answer": name, "choices": []}
            for i, (c, name) in enumerate(zip(colours, ["red", "blue", "green"]))]


def _features(out) -> torch.Tensor:
    """``get_*_features``' projected embedding (a tensor before transformers 5, an output with
    ``pooler_output`` from 5 on)."""
    return out if isinstance(out, torch.Tensor) else out.pooler_output


def test_loads_by_short_name_and_hub_id(cached_clip):
    for name in ("clip-vit-b16", HF_ID, HF_ID.upper()):
        bundle = load_model(name)
        assert isinstance(bundle, ClipBundle) and bundle.kind == "clip"
        assert bundle.name == "clip-vit-b16" and bundle.info.hf_id == HF_ID
        assert isinstance(bundle._core(), HubClip) and bundle.hidden_size == 16
        assert next(bundle.model.parameters()).dtype == torch.float32
        assert not any(p.requires_grad for p in bundle.model.parameters())
    half = load_model("clip-vit-b16", dtype=torch.bfloat16)  # a GPU's default dtype
    with torch.no_grad():
        logits = half.class_logits(_samples(), ["red", "blue"])
        full = bundle.class_logits(_samples(), ["red", "blue"])
    assert logits.dtype == torch.float32 and torch.allclose(logits, full, atol=0.5)


def test_class_logits_equal_clip_by_hand(cached_clip):
    bundle = load_model("clip-vit-b16")
    samples, classes = _samples(), ["red", "blue", "green", "yellow"]
    with torch.no_grad():
        logits = bundle.class_logits(samples, classes)
    assert logits.shape == (3, 4)
    reference = CLIPModel.from_pretrained(str(cached_clip), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(cached_clip), local_files_only=True)
    size = reference.config.vision_config.image_size
    pixels = clip_pixels([s["images"][0] for s in samples], size, center_crop=True)
    text = tokenizer([f"a photo of a {c}." for c in classes], padding=True, return_tensors="pt")
    with torch.no_grad():
        image = _features(reference.get_image_features(pixel_values=pixels))
        words = _features(reference.get_text_features(**text))
    image = image / image.norm(dim=-1, keepdim=True)
    words = words / words.norm(dim=-1, keepdim=True)
    expected = reference.logit_scale.exp() * image @ words.T
    assert torch.allclose(logits, expected, atol=1e-5)
    assert bundle._pixels(samples).shape == (3, 3, size, size)
    with torch.no_grad():  # the wrapper's forward is the same computation
        direct = bundle._core()(bundle._pixels(samples), **bundle._texts(classes))
    assert torch.allclose(direct, logits, atol=1e-6)
    lls = bundle.choice_logliks([{**samples[0], "choices": classes[:2]}])[0]
    assert math.exp(lls[0]) + math.exp(lls[1]) == pytest.approx(1.0)


def test_prompts_use_the_clip_tokenizer_and_the_configs_positions(cached_clip):
    bundle = load_model("clip-vit-b16")
    tok = bundle.tokenizer
    enc = bundle._texts(["red", "an extraordinarily long class name of many words"])
    ids, mask = enc["input_ids"].tolist(), enc["attention_mask"].tolist()
    assert len(ids[1]) == TEXT_POSITIONS and all(mask[1])
    assert ids[0][0] == ids[1][0] == tok.bos_token_id and ids[1][-1] == tok.eos_token_id
    assert ids[0][sum(mask[0]) - 1] == tok.eos_token_id
    assert tok.convert_ids_to_tokens(ids[0][1:sum(mask[0]) - 1])[-2:] == ["red</w>", ".</w>"]


def test_text_lora_with_the_zoo_defaults_trains_on_the_loss(cached_clip):
    bundle = load_model("clip-vit-b16")
    lora = bundle.info.lora_defaults
    assert (lora["r"], lora["dropout"], lora["target_regex"]) == (2, 0.25, CLIP_LORA_REGEX)
    bundle.model = add_lora(bundle.model, "client", r=lora["r"], alpha=lora["alpha"],
                            dropout=lora["dropout"], target_regex=lora["target_regex"], seed=1)
    assert not bundle._tower_adapted()
    trainable = [p for p in bundle.model.parameters() if p.requires_grad]
    assert trainable
    samples, classes = _samples(), ["red", "blue", "green"]
    bundle.classes = classes
    with torch.no_grad():
        before = bundle.class_logits(samples, classes)
    optimiser = torch.optim.SGD(trainable, lr=1.0)
    loss = bundle.loss(bundle.collate(samples))
    loss.backward()
    optimiser.step()
    with torch.no_grad():
        after = bundle.class_logits(samples, classes)
    assert not torch.allclose(before, after)
    assert loss.item() == pytest.approx(F.cross_entropy(before, torch.tensor([0, 1, 2])).item(),
                                        abs=1e-5)


@pytest.mark.parametrize(("regex", "towers"), [(CLIP_LORA_REGEX, {"text"}),
                                               (CLIP_BOTH_LORA_REGEX, {"text", "vision"})],
                         ids=["text", "both"])
def test_lora_regexes_hit_query_and_value_of_both_model_kinds(regex, towers):
    """peft on tiny-clip (Swin ``query``/``value``, text ``q_proj``/``v_proj``) and on a Hub
    CLIPModel, bare or wrapped (``q_proj``/``v_proj`` in both towers): two maps per attention
    layer of each targeted tower, nothing else."""
    from drake.models import lora_module_names

    tiny = load_model("tiny-clip", pretrained=False, seed=0).model
    swin_layers = sum(tiny.vision.config.depths)
    text_layers = tiny.text.config.num_hidden_layers
    wrapped = HubClip(_tiny_clip_model(_clip_vocab()))  # clip.text_model.…
    bare = _tiny_clip_model(_clip_vocab())  # text_model.…, as transformers names it
    for model, per_tower in ((tiny, {"text": 2 * text_layers, "vision": 2 * swin_layers}),
                             (wrapped, {"text": 4, "vision": 4}), (bare, {"text": 4, "vision": 4})):
        names = lora_module_names(add_lora(model, "client", r=2, alpha=2, target_regex=regex),
                                  "client")
        assert len(names) == sum(per_tower[t] for t in towers)
        leaves = {n.rsplit(".", 1)[1] for n in names}
        assert leaves <= {"q_proj", "v_proj", "query", "value"}
        hit = {"vision" if re.search(r"(^|\.)vision(_model)?\.", n) else "text" for n in names}
        assert hit == towers


def test_uncached_clip_fails_fast_offline_naming_tiny_clip(offline_hub):
    start = time.perf_counter()
    with pytest.raises(NetworkUnavailable) as info:
        load_model("clip-vit-b32")
    message = str(info.value)
    assert "openai/clip-vit-base-patch32" in message and "HF_HUB_OFFLINE" in message
    assert "tiny-clip" in message and "tiny-llava" not in message
    assert time.perf_counter() - start < 30  # generous: it makes no request at all


def test_drake_eval_runs_a_hub_clip_on_base_to_novel(cached_clip, tmp_path, capsys):
    """`drake eval --model clip-vit-b16`: every client on the Hub CLIP (here the tiny stand-in
    in the offline cache), scored under base/novel, and the leaderboard accepts the results."""
    from drake.build import build
    from drake.cli import main
    from drake.registry import get_benchmark

    data = tmp_path / "data"
    build(get_benchmark("synth-cls", size="tiny"), data, seed=0)
    out = tmp_path / "run"
    argv = ["eval", "--method", "fedavg", "--model", "clip-vit-b16", "--data", str(data),
            "--benchmark", "synth-cls", "--scenario", "base2novel", "--rounds", "1",
            "--local-steps", "1", "--eval-per-task", "2", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert set(results["models_per_client"]) == {"clip-vit-b16"}
    assert results["protocol"] == "base_novel" and set(results["metrics"]) == {
        "local", "base", "novel", "hm"}
    assert main(["leaderboard", "validate", str(out / "results.json"), "--data",
                 str(data)]) == 0, capsys.readouterr().err
    both = argv + ["--model-mix", "default"]
    both[both.index(str(out))] = str(tmp_path / "other")
    assert main(both) == 2
    assert "not both" in capsys.readouterr().err
