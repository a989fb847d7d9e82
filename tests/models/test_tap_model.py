"""TAP's multi-task, multi-modal model (drake.models.tap): shapes, what trains, the paths, and
that ``task_modules`` names exactly the part of the model a task's loss reaches."""

from __future__ import annotations

import pytest
import torch

from drake.models.lora import adapter_state, load_adapter_state
from drake.models.tap import (
    PATHS,
    SHARED,
    VILT_RANKS,
    TapLayout,
    TapModel,
    TapTask,
    add_tap_lora,
    tiny_flava,
    tiny_vilt,
)

VOCAB = 40
TASKS = (TapTask("pics", "image_classification", ("image",), 10),
         TapTask("news", "text_classification", ("text",), 4),
         TapTask("recon", "image_generation", ("image",)),
         TapTask("vqa", "text_generation", ("image", "text")),
         TapTask("gen", "text_generation", ("text",)))


@pytest.fixture(scope="module")
def model() -> TapModel:
    return TapModel.from_flava(tiny_flava(VOCAB, hidden=32, image_side=16, layers=1),
                               TapLayout(tasks=TASKS, max_answer_tokens=8))


def _batch(n: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(n, 6, dtype=torch.long)
    mask[0, 4:] = 0  # a padded prompt
    return {"pixel_values": torch.randn(n, 3, 64, 64, generator=g),
            "input_ids": torch.randint(5, VOCAB, (n, 6), generator=g), "attention_mask": mask,
            "decoder_input_ids": torch.randint(5, VOCAB, (n, 5), generator=g),
            "labels": torch.randint(0, 4, (n, 5), generator=g)}


def test_outputs_per_task_kind(model):
    batch = _batch()
    assert model("pics", batch).shape == (2, 10)
    assert model("news", batch).shape == (2, 4)
    assert model("recon", batch).shape == (2, 3, 64, 64)  # Tab. 19: 3x64x64
    assert model("vqa", batch).shape == (2, 5, VOCAB)
    # the stacks: MoTE per modality + shared with an expert per kind + shared; MoME per kind
    assert set(model.mote) == {"image", "text", SHARED}
    assert set(model.mote["image"].layers[0].experts) == {
        "image_classification", "text_classification", "image_generation", "text_generation",
        SHARED}
    assert set(model.mome) == {"image_classification", "text_classification",
                               "image_generation", "text_generation", SHARED}
    assert set(model.mome[SHARED].layers[0].experts) == {"image", "text", SHARED}
    # one head per classification task, one per generation kind
    assert set(model.heads) == {"pics", "news", "image_generation", "text_generation"}


def test_feature_is_the_mean_of_four_paths_per_modality(model):
    batch = _batch()
    paths = model.features("vqa", batch)
    assert paths.shape == (2, 2 * len(PATHS), 32)
    # the private path by hand: MoTE[image] with the text_generation expert, then
    # MoME[text_generation] with the image expert, mean-pooled
    x, mask = model.encoders["image"](batch)
    add = torch.zeros(2, 1, 1, x.shape[1])
    h = model.mote["image"](x, add, "text_generation")
    h = model.mome["text_generation"](h, add, "image")
    torch.testing.assert_close(paths[:, 0], h.mean(1))
    # the shared path starts from shared_proj(x)
    h = model.mome[SHARED](model.mote[SHARED](model.shared_proj(x), add, SHARED), add, SHARED)
    torch.testing.assert_close(paths[:, 3], h.mean(1))


def test_padding_is_masked_out(model):
    model.eval()  # the classification head's dropout
    batch = _batch()
    out = model("news", batch)
    changed = dict(batch, input_ids=batch["input_ids"].clone())
    changed["input_ids"][0, 4:] = 7  # only padded positions change
    torch.testing.assert_close(model("news", changed)[0], out[0])


def test_text_head_is_teacher_forced_and_conditioned(model):
    model.eval()
    batch = _batch()
    logits = model("gen", batch)
    later = dict(batch, decoder_input_ids=batch["decoder_input_ids"].clone())
    later["decoder_input_ids"][:, 3:] = 9  # tokens from position 3 on
    torch.testing.assert_close(model("gen", later)[:, :3], logits[:, :3])  # causal
    other = dict(batch, input_ids=batch["input_ids"].flip(0), attention_mask=torch.ones(2, 6,
                                                                                        dtype=torch.long))
    assert not torch.allclose(model("gen", other), logits)  # the prompt reaches the answer


def test_base_is_frozen_and_only_tap_parts_train(model):
    trained = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trained == {"encoders", "shared_proj", "heads"}
    for name, p in model.named_parameters():
        if p.requires_grad and name.startswith("encoders"):
            assert ".neck." in name or ".adaptor." in name, name
    assert not any(p.requires_grad for p in model.mote.parameters())


def test_losses(model):
    model.eval()
    batch = _batch()
    out = model("recon", batch)
    torch.testing.assert_close(model.loss("recon", batch),
                               ((out - batch["pixel_values"]) ** 2).mean())
    labels = dict(batch, labels=torch.tensor([1, 3]))
    logits = model("news", labels)
    torch.testing.assert_close(model.loss("news", labels),
                               torch.nn.functional.cross_entropy(logits, torch.tensor([1, 3])))
    masked = dict(batch, labels=torch.full((2, 5), -100))
    masked["labels"][1, 2] = 4
    logits = model("gen", masked)
    torch.testing.assert_close(model.loss("gen", masked),
                               -torch.log_softmax(logits[1, 2], -1)[4])


def _vilt() -> TapModel:
    return TapModel.from_vilt(tiny_vilt(VOCAB, hidden=32, image_side=16, layers=4),
                              TapLayout(tasks=TASKS, max_answer_tokens=8, stack_depth=2))


@pytest.mark.parametrize("backbone", ["flava", "vilt"])
@pytest.mark.parametrize("task", [t.name for t in TASKS])
def test_task_modules_are_exactly_what_the_loss_reaches(task, backbone):
    if backbone == "vilt":
        tap, ranks = _vilt(), VILT_RANKS
    else:
        tap = TapModel.from_flava(tiny_flava(VOCAB, hidden=32, image_side=16, layers=1),
                                  TapLayout(tasks=TASKS, max_answer_tokens=8))
        ranks = None
    peft = add_tap_lora(tap, "x", seed=0, **({"ranks": ranks} if ranks else {}))
    with torch.no_grad():  # non-zero B, so every LoRA matrix gets a gradient
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    batch = _batch()
    if task in ("pics", "news"):
        batch["labels"] = torch.tensor([0, 3])
    peft.base_model.model.loss(task, batch).backward()
    reached = {n for n, p in peft.named_parameters() if p.grad is not None and p.grad.abs().sum()}
    owned = set()
    for name, p in peft.named_parameters():
        if p.requires_grad:
            plain = name.removeprefix("base_model.model.")
            if any(plain.startswith(m + ".") for m in tap.task_modules(task)):
                owned.add(name)
    assert reached and reached == owned


def test_adapter_state_covers_lora_and_trained_modules_and_round_trips():
    tap = TapModel.from_flava(tiny_flava(VOCAB, hidden=32, image_side=16, layers=1),
                              TapLayout(tasks=TASKS[:2], max_answer_tokens=8))
    peft = add_tap_lora(add_tap_lora(tap, "one", seed=0), "two", seed=1)
    state = adapter_state(peft, "one")
    assert any("heads.pics.modules_to_save.net.3.weight" == k for k in state)
    assert any(k.endswith("lora_A.weight") and ".experts." in k for k in state)
    assert any("encoders.text.neck.modules_to_save" in k for k in state)
    ranks = {k: v.shape[0] for k, v in state.items() if k.endswith("lora_A.weight")}
    assert {r for k, r in ranks.items() if ".experts." in k} == {4}
    assert {r for k, r in ranks.items() if k.startswith(("mote", "mome"))
            and ".attention." in k} == {16}
    assert {r for k, r in ranks.items() if k.startswith("encoders")} == {8}
    load_adapter_state(peft, "two", state)
    torch.testing.assert_close(adapter_state(peft, "two"), state)


def test_layout_errors_name_the_problem():
    with pytest.raises(ValueError, match="kind 'video'"):
        TapTask("x", "video", ("image",))
    with pytest.raises(ValueError, match="classes >= 2"):
        TapTask("x", "image_classification", ("image",))
    with pytest.raises(ValueError, match="distinct names"):
        TapLayout(tasks=(TASKS[0], TASKS[0]))
    with pytest.raises(ValueError, match="needs 4 multimodal layers"):
        TapModel.from_flava(tiny_flava(VOCAB, hidden=32, image_side=16, layers=1),
                            TapLayout(tasks=TASKS, stack_depth=2))


def test_vilt_keeps_only_its_patch_projection_and_text_embeddings_as_encoders():
    tap = _vilt()
    batch = _batch()
    assert tap("pics", batch).shape == (2, 10) and tap("vqa", batch).shape == (2, 5, VOCAB)
    x, mask = tap.encoders["image"](batch)
    assert x.shape[1] == 1 + (16 // 8) ** 2  # the class token and 2 x 2 patches
    names = {n for n, _ in tap.encoders.named_parameters()}
    assert not any(".encoder.layer" in n for n in names)  # ViLT's layers went to the stacks
    trained = {n for n, p in tap.named_parameters() if p.requires_grad}
    assert "encoders.image.backbone.tokens.cls_token" in trained  # trained, as TAP's release
    assert "encoders.image.backbone.projection.weight" not in trained  # LoRA on it instead
    assert len(tap.mote["image"].layers) == 2 and len(tap.mome[SHARED].layers) == 2
    peft = add_tap_lora(tap, "x", ranks=VILT_RANKS, seed=0)
    ranks = {n.split(".lora_A")[0]: p.shape[0] for n, p in peft.named_parameters()
             if "lora_A.x" in n}
    assert ranks["base_model.model.encoders.image.backbone.projection"] == 4
    assert {r for n, r in ranks.items() if ".experts." in n} == {8}
