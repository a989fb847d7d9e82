"""ModelBundle: batching, label masking, image tokens, loss, generation, scoring, features."""

from __future__ import annotations

import pytest
import torch

from drake.errors import SchemaError
from drake.models import clip_pixels
from drake.models.bundle import IGNORE_INDEX, _base_llava


def _answer_ids(bundle, answer):
    return bundle.tokenizer(" " + answer, add_special_tokens=False)["input_ids"] + [
        bundle.eos_token_id]


def test_two_tiny_families_differ_in_width_and_depth(llama_bundle, qwen_bundle):
    assert (llama_bundle.hidden_size, llama_bundle.num_layers) == (128, 4)
    assert (qwen_bundle.hidden_size, qwen_bundle.num_layers) == (160, 3)
    assert llama_bundle.model.config.text_config.model_type == "llama"
    assert qwen_bundle.model.config.text_config.model_type == "qwen2"
    # 48 x 48 images, a Swin tower whose last stage is the scene's 3 x 3 grid
    assert llama_bundle.image_seq_length == qwen_bundle.image_seq_length == 9
    assert llama_bundle.model.config.vision_config.model_type == "swin"
    assert llama_bundle.image_size == qwen_bundle.image_size == 48


def test_train_collate_labels_only_the_answer_and_eos(llama_bundle, samples):
    batch = llama_bundle.collate(samples, train=True)
    assert set(batch) == {"input_ids", "attention_mask", "labels", "pixel_values"}
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    for row, sample in enumerate(samples):
        labels = batch["labels"][row]
        kept = labels != IGNORE_INDEX
        want = _answer_ids(llama_bundle, sample["answer"])
        assert labels[kept].tolist() == want
        # the labelled tokens are the last real tokens of the (right-padded) row
        length = int(batch["attention_mask"][row].sum())
        assert batch["attention_mask"][row, :length].all()
        assert kept.nonzero().flatten().tolist() == list(range(length - len(want), length))
        assert batch["input_ids"][row, kept].tolist() == want
        assert batch["input_ids"][row, 0].item() == llama_bundle.tokenizer.bos_token_id
        decoded = llama_bundle.tokenizer.decode(batch["input_ids"][row, 1:length - len(want)])
        assert decoded.startswith("USER: ") and decoded.endswith(" ASSISTANT:")


def test_each_image_placeholder_becomes_image_seq_length_tokens(llama_bundle, samples):
    for train in (True, False):
        batch = llama_bundle.collate(samples, train=train)
        counts = (batch["input_ids"] == llama_bundle.image_token_id).sum(dim=1).tolist()
        assert counts == [9 * len(s["images"]) for s in samples]
        if not train:
            assert "labels" not in batch


def test_pixel_values_stack_all_images_in_order(llama_bundle, samples):
    batch = llama_bundle.collate(samples, train=True)
    images = [im for s in samples for im in s["images"]]
    assert batch["pixel_values"].shape == (3, 3, 48, 48)
    torch.testing.assert_close(batch["pixel_values"], clip_pixels(images, 48))


def test_zero_image_batch_is_text_only(llama_bundle, samples):
    batch = llama_bundle.collate([samples[2]], train=True)
    assert "pixel_values" not in batch
    assert torch.isfinite(llama_bundle.loss(batch))
    assert len(llama_bundle.generate([samples[2]], max_new_tokens=2)) == 1


def test_eval_collate_is_left_padded(llama_bundle, samples):
    batch = llama_bundle.collate(samples, train=False)
    mask = batch["attention_mask"]
    assert mask[:, -1].all()
    shortest = int(mask.sum(dim=1).argmin())
    assert mask[shortest, 0] == 0
    assert (batch["input_ids"][mask == 0] == llama_bundle.pad_token_id).all()


def test_placeholder_count_must_match_images(llama_bundle, samples):
    bad = dict(samples[0], prompt="no placeholder here")
    with pytest.raises(SchemaError, match="placeholder"):
        llama_bundle.collate([bad], train=True)


def test_loss_is_mean_cross_entropy_of_labelled_tokens(llama_bundle, samples):
    batch = llama_bundle.collate(samples, train=True)
    with torch.no_grad():
        ours = llama_bundle.loss(batch)
        hf = llama_bundle.model(**batch, use_cache=False).loss
    torch.testing.assert_close(ours, hf, rtol=1e-5, atol=1e-5)


def test_choice_logliks_golden_sum_of_token_logprobs(llama_bundle, samples):
    scores = llama_bundle.choice_logliks(samples)
    assert [len(s) for s in scores] == [3, 2, 2]
    sample, choice = samples[1], "Image B"
    scored = dict(sample, answer=choice)
    batch = llama_bundle.collate([scored], train=True)
    with torch.no_grad():
        logp = torch.log_softmax(llama_bundle.model(**batch, use_cache=False).logits[0], -1)
    ids = batch["input_ids"][0].tolist()
    n_answer = len(_answer_ids(llama_bundle, choice)) - 1  # no eos
    end = len(ids) - 1  # position of eos
    want = sum(logp[t - 1, ids[t]].item() for t in range(end - n_answer, end))
    assert scores[1][1] == pytest.approx(want, abs=1e-4)
    assert llama_bundle.choice_logliks([dict(samples[0], choices=[])]) == [[]]


def test_generate_is_deterministic_strings(llama_bundle, samples):
    first = llama_bundle.generate(samples, max_new_tokens=4)
    second = llama_bundle.generate(samples, max_new_tokens=4)
    assert first == second and len(first) == 3
    assert all(isinstance(t, str) and t == t.strip() for t in first)
    for text in first:
        assert len(llama_bundle.tokenizer(text, add_special_tokens=False)["input_ids"]) <= 4
    assert llama_bundle.generate(samples, max_new_tokens=4, batch_size=1) == first
    assert not llama_bundle.model.training


def test_last_hidden_is_last_prompt_token_state(llama_bundle, samples):
    feats = llama_bundle.last_hidden(samples)
    assert feats.shape == (3, 128) and feats.dtype == torch.float32
    alone = llama_bundle.last_hidden([samples[2]])
    torch.testing.assert_close(feats[2:], alone, rtol=1e-4, atol=1e-4)


def test_overfitting_ranks_gold_first(fresh_llama, samples):
    bundle = fresh_llama
    model = bundle.model
    model.requires_grad_(True)
    model.train()
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = bundle.collate(samples, train=True)
    for _ in range(40):
        loss = bundle.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1
    scores = bundle.choice_logliks(samples)
    for sample, row in zip(samples, scores):
        assert row.index(max(row)) == sample["choices"].index(sample["answer"])
    assert bundle.generate(samples, max_new_tokens=4) == [s["answer"] for s in samples]


def test_instruction_first_reads_the_question_before_the_pictures():
    from drake.models.bundle import ChatFormat

    plain, first = ChatFormat(), ChatFormat(instruction_first=True)
    prompt = "Picture 1: <image>\nPicture 2: <image>\nWhich picture has a star?"
    assert plain.render(prompt) == "USER: " + prompt + " ASSISTANT:"
    assert first.render(prompt) == ("USER: Picture 1: Picture 2: Which picture has a star?\n"
                                    + prompt + " ASSISTANT:")
    # nothing to read first without a picture
    assert first.render("Is it true?") == plain.render("Is it true?")


@pytest.mark.parametrize("family", ["llama_bundle", "qwen_bundle"])
def test_choice_logliks_reuse_picture_features_and_match_the_plain_forward(family, samples,
                                                                          request):
    """Each prompt and picture is read once for all options (a key/value cache, left-padded
    prompts batched); the scores equal those of a forward pass per option that carries the
    pictures with it."""
    import torch.nn.functional as F

    bundle = request.getfixturevalue(family)
    got = bundle.choice_logliks(samples, batch_size=3)  # one sample a pass
    together = bundle.choice_logliks(samples)  # left-padded prompts in one pass
    for row, alone in zip(together, got):
        assert row == pytest.approx(alone, abs=1e-4)
    for sample, scores in zip(samples, got):
        assert len(scores) == len(sample["choices"])
        for choice, score in zip(sample["choices"], scores):
            batch = bundle._pad([bundle._encode(sample, answer=choice, eos=False)],
                                      left=False, with_labels=True)
            with torch.no_grad():
                logits = bundle.model(**{k: v for k, v in batch.items()
                                               if k != "labels"}).logits[0, :-1]
            labels = batch["labels"][0, 1:]
            keep = labels != -100
            want = F.log_softmax(logits[keep].float(), -1).gather(-1, labels[keep][:, None]).sum()
            assert abs(score - float(want)) < 1e-4, (sample["id"], choice)


def test_picture_features_are_reused_until_the_tower_or_projector_changes(fresh_llama, samples):
    bundle = fresh_llama
    inner = _base_llava(bundle.model).model
    calls = []
    original = inner.get_image_features

    def counted(*args, **kwargs):
        calls.append(kwargs["pixel_values"].shape[0])
        return original(*args, **kwargs)

    inner.get_image_features = counted
    first = bundle.choice_logliks(samples)
    assert calls == [3]  # three pictures in all
    assert bundle.choice_logliks(samples) == first and calls == [3]  # read from the cache
    with torch.no_grad():  # an in-place update of the projector empties it
        next(inner.multi_modal_projector.parameters()).mul_(1.5)
    changed = bundle.choice_logliks(samples)
    assert calls == [3, 3] and changed != first
    # samples without an id are never cached
    anonymous = [{k: v for k, v in s.items() if k != "id"} for s in samples]
    bundle.choice_logliks(anonymous)
    bundle.choice_logliks(anonymous)
    assert calls == [3, 3, 3, 3]


@pytest.mark.parametrize("old", ["4.57.6", "5.17.0", "5.23.0"])
def test_a_transformers_that_would_score_without_pictures_is_refused(old, llama_bundle,
                                                                      monkeypatch):
    from drake.models import bundle as bundle_module

    # 5.17 ignores mm_encoder_outputs, 5.18-5.23 return past_key_values instead of cache: both
    # score options as if the picture were not there, without an error
    with pytest.raises(RuntimeError, match=rf"transformers {old} .*>= 5\.24.*pip install -U"):
        bundle_module.check_transformers(old)
    monkeypatch.setattr(bundle_module.transformers, "__version__", old)
    with pytest.raises(RuntimeError, match=rf"transformers {old} "):
        bundle_module.ModelBundle(
            "x", llama_bundle.info, llama_bundle.model, llama_bundle.tokenizer,
            image_size=llama_bundle.image_size, image_seq_length=llama_bundle.image_seq_length,
            image_token_id=llama_bundle.image_token_id, pixel_fn=llama_bundle._pixel_fn)


def test_the_installed_transformers_passes_the_check():
    from drake.models.bundle import MIN_TRANSFORMERS, check_transformers

    check_transformers()
    check_transformers(MIN_TRANSFORMERS)
    check_transformers("5.100.0")  # compared as versions, not as strings
