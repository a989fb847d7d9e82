"""Stage 4 of `drake models pretrain`: the label step, supervised on attention and head outputs."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from drake.models.bundle import IGNORE_INDEX, _Encoded
from drake.models.label_pretrain import (
    LABEL_FORMATS,
    LABEL_HEADS,
    LABEL_STAGE,
    head_logits,
    label_losses,
    label_sample,
    option_lines,
    pretrain_label,
    value_loss,
)
from drake.models.lookup_pretrain import LOOKUP_STAGE, POINTER_HEADS, named_cells
from drake.models.pretrain import (
    LOOKUP_FAMILIES,
    _meta,
    public_samples,
    train_family,
)

LABEL = {"steps": 3, "batch_size": 4, "eval_size": 4, "seed": 1}

# a lettered question's tail, as the zoo's tokenizer spells it
TOKENS = ["Question", ":", "▁Which", "\n", "A", ".", "▁red", "\n", "B", ".", "▁dark", "▁blue",
          "\n", "Answer", "▁ASSISTANT", ":", "▁B", "</s>"]
ANSWER = 16  # "▁B": the answer position is 15


def test_option_lines_are_label_label_position_and_text_positions():
    assert option_lines(TOKENS) == [("A", 4, [6]), ("B", 8, [10, 11])]
    numbered = ["\n", "1", ".", "▁Image", "▁B", "\n", "2", ".", "▁equal", "\n", "Print"]
    assert option_lines(numbered) == [("1", 1, [3, 4]), ("2", 6, [8])]
    # not option lines: a lower-case label, no dot, a 0, an empty option, no line end
    for tokens in (["\n", "a", ".", "▁x", "\n"], ["\n", "A", ":", "▁x", "\n"],
                   ["\n", "0", ".", "▁x", "\n"], ["\n", "A", ".", "\n"], ["\n", "A", ".", "▁x"]):
        assert option_lines(tokens) == [], tokens


@pytest.fixture(scope="module")
def qwen():
    from drake.models.loading import load_model

    return load_model("tiny-llava-qwen")


def _item(bundle, tokens=TOKENS):
    ids = bundle.tokenizer.convert_tokens_to_ids(tokens)
    assert bundle.tokenizer.unk_token_id not in ids
    labels = [IGNORE_INDEX] * ANSWER + ids[ANSWER:]
    return _Encoded(ids, labels, [])


def test_label_losses_by_hand(qwen):
    """With zero head inputs a head's logits are all 0, so both read-outs cost log(vocab); the
    pointer and binding terms are -log of the attention put where they point."""
    (ll, lh), (bl, bh) = LABEL_HEADS["tiny-llava-qwen"]
    assert (ll, lh, bl, bh) == (2, 0, 0, 0)
    n = len(TOKENS)
    verdict = _item(qwen, [":" if t == "." else t for t in TOKENS])  # no option lines
    items = [_item(qwen), verdict]
    attentions = [torch.zeros(2, 5, n, n) for _ in range(3)]
    attentions[ll][0, lh, ANSWER - 1, 10] = 0.3  # the gold option "dark blue": 0.3 + 0.2
    attentions[ll][0, lh, ANSWER - 1, 11] = 0.2
    attentions[ll][0, lh, ANSWER - 1, 6] = 0.5  # the other option: not counted
    attentions[bl][0, bh, 6, 4] = 0.25  # "red" -> "A"
    attentions[bl][0, bh, 10, 8] = 0.5  # "dark" -> "B"
    attentions[bl][0, bh, 11, 8] = 1.0  # "blue" -> "B"
    inputs = {layer: torch.zeros(2, n, 160) for layer in (ll, bl)}
    loss = label_losses(qwen, items, attentions, inputs, LABEL_HEADS["tiny-llava-qwen"])
    vocab = qwen.model.get_output_embeddings().weight.shape[0]
    pointer = -math.log(0.5 + 1e-6)
    binding = -(math.log(0.25 + 1e-6) + math.log(0.5 + 1e-6) + math.log(1 + 1e-6)) / 3
    assert float(loss) == pytest.approx(pointer + binding + 2 * math.log(vocab), rel=1e-5)
    # an item without option lines (the second row) adds nothing
    assert label_losses(qwen, [verdict], [a[1:] for a in attentions],
                        {k: v[1:] for k, v in inputs.items()},
                        LABEL_HEADS["tiny-llava-qwen"]) is None


def test_value_loss_by_hand(qwen, monkeypatch):
    """The first look-up head's output at the answer position must name the gold option's
    first word ("dark" of "dark blue", not the label "B"): a head input that puts all of the
    read-out on that word's logit, against a uniform read-out."""
    layer, head = POINTER_HEADS["tiny-llava-qwen"][0]
    n = len(TOKENS)
    verdict = _item(qwen, [":" if t == "." else t for t in TOKENS])
    items = [_item(qwen), verdict]
    inputs = {layer: torch.zeros(2, n, 160)}
    vocab = qwen.model.get_output_embeddings().weight.shape[0]
    assert float(value_loss(qwen, items, inputs, (layer, head))) == pytest.approx(
        math.log(vocab), rel=1e-5)  # zero input: every logit is 0
    assert value_loss(qwen, [verdict], {layer: inputs[layer][1:]}, (layer, head)) is None
    # a read-out of logits 0 but 4 at "▁dark": the loss is log(vocab - 1 + e^4) - 4
    dark = qwen.tokenizer.convert_tokens_to_ids("▁dark")
    with torch.no_grad():
        logits = head_logits(qwen, torch.zeros(160), layer, head)
        assert torch.count_nonzero(logits) == 0
    calls = []

    def fake(bundle, x, at_layer, at_head):  # the read-out, recorded and replaced
        calls.append((tuple(x.shape), at_layer, at_head))
        out = torch.zeros(vocab)
        out[dark] = 4.0
        return out

    monkeypatch.setattr("drake.models.label_pretrain.head_logits", fake)
    loss = value_loss(qwen, items, inputs, (layer, head))
    assert calls == [((160,), layer, head)]  # one item with option lines, at one position
    assert float(loss) == pytest.approx(math.log(vocab - 1 + math.exp(4.0)) - 4.0, rel=1e-5)


def test_head_logits_read_one_head_through_the_output_projection(qwen):
    """Inputs that are zero outside one head's slice: that head's logits are the logits of the
    whole output projection."""
    lm = qwen.model.model.language_model
    torch.manual_seed(0)
    x = torch.zeros(3, 160)
    x[:, 64:96] = torch.randn(3, 32)  # head 2 of 5, 32 wide
    with torch.no_grad():
        whole = qwen.model.get_output_embeddings()(lm.norm(lm.layers[1].self_attn.o_proj(x)))
        assert torch.allclose(head_logits(qwen, x, 1, 2), whole, atol=1e-5)
        assert not torch.allclose(head_logits(qwen, x, 1, 1), whole, atol=1e-3)


def test_label_questions_are_the_first_kept_of_their_block():
    from drake.models.label_pretrain import _LABEL_BLOCK, _LABEL_START

    seen = set()
    for index in (0, 1, 7):
        sample = label_sample(1, index)
        meta = _meta(sample)
        assert meta["format"] in LABEL_FORMATS and meta["family"] in LOOKUP_FAMILIES
        assert named_cells(sample, formats=True)
        block = public_samples("synth-public-formats", "public", _LABEL_BLOCK, 1,
                               start=_LABEL_START + index * _LABEL_BLOCK)
        first = next(s for s in block if _meta(s).get("format") in LABEL_FORMATS
                     and _meta(s).get("family") in LOOKUP_FAMILIES
                     and named_cells(s, formats=True))
        assert (sample["id"], sample["prompt"]) == (first["id"], first["prompt"])
        seen.add(sample["id"])
    assert len(seen) == 3


def test_named_cells_of_a_formats_question_read_its_question_line_only():
    scene = {"domain": "plain", "objects": ["large blue striped hexagon@0.18,0.51",
                                            "small red solid circle@0.51,0.16"]}
    meta = json.dumps({"family": "colour", "format": "letter", "scenes": [scene]})
    sample = {"id": "synth-public-formats-public-000003", "meta": meta, "images": [None],
              "prompt": "<image>\nQuestion: What colour is the hexagon?\nA. red\nB. blue\n"
                        "Answer with the option's letter from the given choices directly."}
    assert named_cells(sample, formats=True) == (3,)
    assert named_cells(sample) == ()  # stage 3 reads synth-public-open only
    no_line = {**sample, "prompt": "<image>\nWhat colour is the hexagon?\nA. red"}
    assert named_cells(no_line, formats=True) == ()


def test_the_stage_is_seeded_reported_and_needs_stage_three(stage3_root, tmp_path):
    before = json.loads((stage3_root / "tiny-llava-llama" / "pretrain_report.json").read_text())
    a = pretrain_label("tiny-llava-llama", out_dir=shutil.copytree(stage3_root, tmp_path / "a"),
                       **LABEL)
    b = pretrain_label("tiny-llava-llama", out_dir=shutil.copytree(stage3_root, tmp_path / "b"),
                       **LABEL)
    weights = (a / "model.safetensors").read_bytes()
    assert weights == (b / "model.safetensors").read_bytes()
    assert weights != (stage3_root / "tiny-llava-llama" / "model.safetensors").read_bytes()
    report = json.loads((a / "pretrain_report.json").read_text())
    stage = report.pop(LABEL_STAGE)
    assert report.pop("weights_sha256") != before.pop("weights_sha256")
    assert report == before  # stages 2 and 3's records stay as they were
    assert stage["steps"] == 3 and stage["train_samples"] == 12 and stage["label_share"] == 0.5
    assert stage["label_head"] == [3, 0] and stage["binding_head"] == [0, 0]
    assert stage["lr"] == 1e-3 and stage["label_formats"] == list(LABEL_FORMATS)
    assert set(stage["accuracy_after"]) > {"mean"} and len(stage["loss_curve"]) == 3
    with pytest.raises(ValueError, match="already went through the label stage"):
        pretrain_label("tiny-llava-llama", out_dir=tmp_path / "a", **LABEL)
    stage2 = stage3_root.parent / (stage3_root.name + "-stage2")
    with pytest.raises(ValueError, match=f"lacks '{LOOKUP_STAGE}'.*--lookup-only"):
        pretrain_label("tiny-llava-llama", out_dir=stage2, **LABEL)
    with pytest.raises(ValueError, match="share must be in"):
        pretrain_label("tiny-llava-llama", out_dir=stage3_root, **{**LABEL, "share": 1.5})
    for bad in (-0.5, float("nan")):
        with pytest.raises(ValueError, match="value_weight must be a finite number >= 0"):
            pretrain_label("tiny-llava-llama", out_dir=stage3_root, value_weight=bad, **LABEL)
    assert stage["value_weight"] == 1.0  # the default: the value read-out is on


def test_the_value_read_out_changes_the_step_only_when_weighed(stage3_root, tmp_path):
    """``value_weight`` > 0 adds the value read-out: other bytes, recorded in the report; the
    step's loss is the unweighed one plus the weight times :func:`value_loss`."""
    from drake.models.label_pretrain import _step_loss
    from drake.models.loading import load_model

    bundle = load_model("tiny-llava-llama", cache_dir=stage3_root)
    bundle.model.set_attn_implementation("eager")
    samples = [label_sample(1, k) for k in range(3)]
    with torch.no_grad():
        plain = float(_step_loss(bundle, samples))
        weighed = float(_step_loss(bundle, samples, value_weight=0.5))
        seen = {}

        def record(bundle, items, attentions, head_inputs, heads):
            seen["value"] = value_loss(bundle, items, head_inputs,
                                       POINTER_HEADS["tiny-llava-llama"][0])
            return label_losses(bundle, items, attentions, head_inputs, heads)

        again = float(_step_loss(bundle, samples, losses=record, value_weight=0.5))
    assert seen["value"] is not None and float(seen["value"]) > 0
    assert weighed == pytest.approx(plain + 0.5 * float(seen["value"]), rel=1e-5)
    assert again == pytest.approx(weighed, rel=1e-6)
    a = pretrain_label("tiny-llava-llama", out_dir=shutil.copytree(stage3_root, tmp_path / "a"),
                       value_weight=0.0, **LABEL)
    b = pretrain_label("tiny-llava-llama", out_dir=shutil.copytree(stage3_root, tmp_path / "b"),
                       **LABEL)
    assert (a / "model.safetensors").read_bytes() != (b / "model.safetensors").read_bytes()
    report = json.loads((a / "pretrain_report.json").read_text())[LABEL_STAGE]
    assert report["value_weight"] == 0.0


def test_a_stopped_stage_resumes_only_with_its_value_weight(stage3_root, tmp_path, crash_at):
    budget = {**LABEL, "steps": 4, "checkpoint_every": 2, "value_weight": 1.0}
    whole = pretrain_label("tiny-llava-llama",
                           out_dir=shutil.copytree(stage3_root, tmp_path / "w"), **budget)
    root = shutil.copytree(stage3_root, tmp_path / "r")


    with pytest.raises(crash_at.error):
        pretrain_label("tiny-llava-llama", out_dir=root, progress=crash_at(3), **budget)
    with pytest.raises(ValueError, match="value_weight 1.0 there, 0.5 now"):
        pretrain_label("tiny-llava-llama", out_dir=root, **{**budget, "value_weight": 0.5})
    again = pretrain_label("tiny-llava-llama", out_dir=root, **budget)
    assert (again / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()


def test_train_family_runs_stage_four_alone_or_after_stage_three(stage3_root, tmp_path):
    """``language=False, lookup_steps=0`` runs stage 4 alone, to the bytes of a direct call;
    stages 3 and 4 in one call give the bytes of the two calls."""
    alone = train_family("tiny-llava-llama", out_dir=shutil.copytree(stage3_root, tmp_path / "o"),
                         language=False, lookup_steps=0, label_steps=2, seed=1, batch_size=2,
                         eval_size=0)
    direct = pretrain_label("tiny-llava-llama",
                            out_dir=shutil.copytree(stage3_root, tmp_path / "d"), steps=2,
                            batch_size=2, eval_size=0, seed=1)
    assert (alone / "model.safetensors").read_bytes() == (direct / "model.safetensors").read_bytes()
    stage2 = stage3_root.parent / (stage3_root.name + "-stage2")
    seen = []
    both = train_family("tiny-llava-llama", out_dir=shutil.copytree(stage2, tmp_path / "b"),
                        language=False, lookup_steps=2, label_steps=2, seed=1, batch_size=2,
                        eval_size=0, progress=lambda s, t, v: seen.append((s, t)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # stage 4 counts on after stage 3, of 4
    assert (both / "model.safetensors").read_bytes() == (direct / "model.safetensors").read_bytes()


def test_stage_four_follows_stage_three_by_default():
    """Unnamed, stage 4 runs its default steps exactly when stage 3 runs in the same call, so
    ``lookup_steps=0`` still stops after stage 2; named steps always win."""
    from drake.models.pretrain import DEFAULT_LABEL_STEPS, label_steps_after

    assert DEFAULT_LABEL_STEPS == 2000
    assert label_steps_after(None, 1500) == 2000 and label_steps_after(None, 2) == 2000
    assert label_steps_after(None, 0) == 0
    assert label_steps_after(0, 1500) == 0 and label_steps_after(5, 0) == 5
