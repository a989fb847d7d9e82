"""benchmarks/option_indirection.py: the answers and positions its auxiliary losses target, and
the losses against a hand-computed forward pass."""

from __future__ import annotations

import importlib
import json

import pytest
import torch
import torch.nn.functional as F

from drake.models.bundle import IGNORE_INDEX
from evaluators.choice import parse_choices

pretrain = importlib.import_module("drake.models.pretrain")


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("option_indirection")


@pytest.fixture(scope="module")
def samples():
    return pretrain.public_samples("synth-public-formats", "public", 200, seed=0)


def _format(sample: dict) -> str:
    return json.loads(sample["meta"])["format"]


def test_content_answer_is_the_gold_option_behind_its_label(bench, samples) -> None:
    checked = set()
    for s in samples:
        fmt, word = _format(s), bench.content_answer(s)
        if fmt == "verdict":
            assert word is None
        elif fmt in ("letter", "id"):
            label = s["answer"].strip()
            line = next(line for line in s["prompt"].splitlines() if line.startswith(label + ". "))
            assert word == line[len(label) + 2:]
        else:
            assert word == s["answer"]
        checked.add(fmt)
    assert checked == {"open", "choice", "letter", "id", "verdict"}


def test_option_positions_hold_each_option_word_after_its_label(bench, bundle, samples) -> None:
    closed = [s for s in samples if _format(s) in ("letter", "id")]
    assert len(closed) > 30
    for s in closed:
        ids = bundle._encode(s, answer=None, eos=False).ids
        tokens = [t.lstrip("\u2581") for t in bundle.tokenizer.convert_ids_to_tokens(ids)]
        where = bench.option_positions(bundle, s, ids)
        image = max(i for i, t in enumerate(ids) if t == bundle.image_token_id)
        labels = bench.options(s)
        words = [w.split()[0] for w in parse_choices(s["prompt"])]
        for k, pos in enumerate(where):
            assert pos > image  # the option lines after the picture, not the preview before it
            assert tokens[pos - 2:pos + 1] == [labels[k], ".", words[k]]
        assert where == sorted(where)


def test_a_missing_option_line_is_named(bench, bundle, samples) -> None:
    s = next(s for s in samples if _format(s) == "letter")
    ids = bundle._encode({**s, "prompt": s["prompt"].replace("A. ", "A: ")}, answer=None,
                         eos=False).ids
    with pytest.raises(ValueError, match=s["id"]):
        bench.option_positions(bundle, s, ids)


def test_losses_match_a_hand_computed_forward_pass(bench, bundle, samples) -> None:
    pool = [s for s in samples if _format(s) in ("letter", "open")][:6]
    built = bench._pool(bundle, pool)
    rows = list(range(len(pool)))
    feats, words = built.features.rows(rows)
    items = built.encoded
    with torch.no_grad():
        parts = bench.losses(bundle, items, feats, words, built.early, built.gold, 1)
        batch, embeds, grounding = pretrain.multimodal_inputs(bundle, items, feats, words)
        lm = bundle.model.model.language_model
        out = lm(inputs_embeds=embeds, attention_mask=batch["attention_mask"],
                 output_hidden_states=True, output_attentions=True)
    head = bundle.model.get_output_embeddings()
    early, attend = [], []
    for i, s in enumerate(pool):
        first = batch["labels"][i].ne(IGNORE_INDEX).nonzero()[0].item() - 1
        # the early answer is the token the model answers with, the one the gold option line
        # holds (not the bare word's token, which lacks the word-start marker)
        target = int(built.early[i])
        if _format(s) == "letter":
            assert target == items[i].ids[built.gold[i]]
        else:
            assert target == batch["labels"][i, first + 1]
        logits = head(lm.norm(out.hidden_states[1][i, first]))
        early.append(F.cross_entropy(logits[None], torch.tensor([target])))
        if _format(s) == "letter":
            gold = built.gold[i].item()
            assert gold >= 0
            attend.append(-torch.log(out.attentions[-1][i, 0, first, gold] + 1e-6))
        else:
            assert built.gold[i] == -1
    assert attend, "the sample list needs a lettered question"
    torch.testing.assert_close(parts["early"], torch.stack(early).mean())
    torch.testing.assert_close(parts["attend"], torch.stack(attend).mean())
    torch.testing.assert_close(parts["stage2"], pretrain._language_loss(bundle, items, feats, words))


def test_the_early_answer_at_the_last_layer_is_the_answer_loss_of_its_first_token(
        bench, bundle, samples) -> None:
    # transformers returns the last layer's state already normed: the lens must not norm twice
    pool = [s for s in samples if _format(s) in ("open", "choice")][:6]
    built = bench._pool(bundle, pool)
    feats, words = built.features.rows(list(range(len(pool))))
    with torch.no_grad():
        parts = bench.losses(bundle, built.encoded, feats, words, built.early, built.gold,
                             bundle.num_layers)
        batch, embeds, _ = pretrain.multimodal_inputs(bundle, built.encoded, feats, words)
        logits = bundle.model(inputs_embeds=embeds,
                              attention_mask=batch["attention_mask"]).logits
    first = (batch["labels"][:, 1:] != IGNORE_INDEX).float().argmax(1)
    rows = torch.arange(len(pool))
    target = batch["labels"][rows, first + 1]
    torch.testing.assert_close(parts["early"], F.cross_entropy(logits[rows, first], target))


def test_attention_report_counts_every_lettered_question(bench, bundle, samples) -> None:
    lettered = [s for s in samples if _format(s) == "letter"][:8]
    report = bench.attention_report(bundle, lettered)
    assert report["n"] == len(lettered)
    for key in ("gold_share", "gold_most", "letter", "agree", "chance"):
        assert 0.0 <= report[key] <= 100.0
    assert report["chance"] == pytest.approx(
        100.0 * sum(1 / len(bench.options(s)) for s in lettered) / len(lettered), abs=0.05)
