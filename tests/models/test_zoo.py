"""The zoo table: names, Hub ids, families, size ranks, LoRA defaults and the cache folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from drake.errors import UnknownNameError
from drake.models import LLM_LINEAR_REGEX, TINY_MODELS, ZOO, cache_dir, get_info
from drake.models.zoo import CLIP_LORA_REGEX, CLIP_ZOO

EXPECTED_IDS = {
    "llama3.2-1b-vl": "thkim0305/llama3.2_1B_vl",
    "llama3.2-3b-vl": "thkim0305/llama3.2_3B_vl",
    "llama3.1-8b-vl": "thkim0305/llama3.1_8B_vl",
    "qwen2.5-0.5b-vl": "thkim0305/qwen2.5_0.5B_vl",
    "qwen2.5-1.5b-vl": "thkim0305/qwen2.5_1.5B_vl",
    "qwen2.5-3b-vl": "thkim0305/qwen2.5_3B_vl",
    "llava-1.5-7b": "llava-hf/llava-1.5-7b-hf",
}


def test_real_backbones_map_to_their_hub_ids():
    for name, hf_id in EXPECTED_IDS.items():
        info = ZOO[name]
        assert info.hf_id == hf_id and not info.offline
        assert get_info(hf_id) is info
        assert get_info(hf_id.upper()) is info


def test_tiny_families_are_offline_and_smallest():
    assert TINY_MODELS == ("tiny-llava-llama", "tiny-llava-qwen")
    ranks = sorted(ZOO.values(), key=lambda i: i.size_rank)
    assert [i.name for i in ranks[:2]] == list(TINY_MODELS)
    assert ZOO["tiny-llava-llama"].size_rank < ZOO["tiny-llava-qwen"].size_rank
    assert all(ZOO[n].offline and ZOO[n].hf_id is None for n in TINY_MODELS)
    assert len({i.size_rank for i in ZOO.values()}) == len(ZOO)


def test_size_ranks_follow_parameter_counts():
    order = [n for n, _ in sorted(ZOO.items(), key=lambda kv: kv[1].size_rank)]
    assert order.index("qwen2.5-0.5b-vl") < order.index("llama3.2-1b-vl")
    assert order.index("llama3.2-1b-vl") < order.index("qwen2.5-1.5b-vl")
    assert order.index("llama3.2-3b-vl") < order.index("llava-1.5-7b")
    assert order.index("llava-1.5-7b") < order.index("llama3.1-8b-vl")


def test_families():
    assert {ZOO[n].family for n in EXPECTED_IDS if n.startswith("qwen")} == {"qwen"}
    assert {ZOO[n].family for n in EXPECTED_IDS if not n.startswith("qwen")} == {"llama"}
    assert ZOO["tiny-llava-qwen"].family == "qwen" and ZOO["tiny-llava-llama"].family == "llama"


def test_lora_defaults_follow_fedmosaic():
    for name in EXPECTED_IDS:
        lora = ZOO[name].lora_defaults
        assert (lora["r"], lora["alpha"], lora["dropout"]) == (128, 256, 0.05)
        assert lora["target_regex"] == LLM_LINEAR_REGEX
    for name in TINY_MODELS:
        assert (ZOO[name].lora_defaults["r"], ZOO[name].lora_defaults["alpha"]) == (8, 16)


def test_clip_models_by_name_and_hub_id():
    assert list(CLIP_ZOO) == ["tiny-clip", "clip-vit-b16", "clip-vit-b32"]
    for name, hf_id in (("clip-vit-b16", "openai/clip-vit-base-patch16"),
                        ("clip-vit-b32", "openai/clip-vit-base-patch32")):
        info = CLIP_ZOO[name]
        assert (info.kind, info.hf_id, info.offline) == ("clip", hf_id, False)
        assert get_info(name) is get_info(hf_id) is get_info(hf_id.upper()) is info
        assert get_info(hf_id, any_hub_id=True) is info  # not an ad-hoc LLaVA entry
        assert info.size_rank > CLIP_ZOO["tiny-clip"].size_rank
        lora = info.lora_defaults  # CLIP-LoRA: r 2, alpha/sqrt(r) = alpha'/r, dropout 0.25
        assert (lora["r"], lora["dropout"], lora["target_regex"]) == (2, 0.25, CLIP_LORA_REGEX)
        assert lora["alpha"] / lora["r"] == pytest.approx(1 / 2 ** 0.5)
    assert len({i.size_rank for i in CLIP_ZOO.values()}) == len(CLIP_ZOO)


def test_unknown_name_names_the_fix():
    with pytest.raises(UnknownNameError, match="drake models list"):
        get_info("gpt-5-vl")
    with pytest.raises(UnknownNameError):
        get_info("someone/some-llava")  # not a zoo id unless any_hub_id=True
    info = get_info("someone/qwen-llava", any_hub_id=True)
    assert info.hf_id == "someone/qwen-llava" and info.family == "qwen" and not info.offline
    assert info.size_rank > max(i.size_rank for i in ZOO.values())
    assert info.kind == "llava"


def test_an_unknown_clip_hub_id_is_the_clip_kind():
    info = get_info("openai/clip-vit-large-patch14", any_hub_id=True)
    assert (info.kind, info.family, info.hf_id, info.offline) == (
        "clip", "clip", "openai/clip-vit-large-patch14", False)
    assert info.lora_defaults is CLIP_ZOO["clip-vit-b16"].lora_defaults
    assert info.size_rank > max(i.size_rank for i in CLIP_ZOO.values())


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("DRAKE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == Path.home() / ".cache" / "drake" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "drake" / "models"
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "dc"))
    assert cache_dir() == tmp_path / "dc" / "models"


@pytest.mark.parametrize("name", TINY_MODELS)
def test_tiny_parameter_counts_are_what_the_zoo_lists(name):
    from drake.models import load_model

    model = load_model(name, pretrained=False, seed=0).model
    count = sum(p.numel() for p in model.parameters())
    assert ZOO[name].params == f"{count / 1e6:.1f}M"
