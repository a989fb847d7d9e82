"""BLEU, Google-BLEU, ROUGE and CIDEr-D: against their reference libraries and by hand."""

from __future__ import annotations

import logging
import math

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.gleu_score import corpus_gleu
from rouge_score.rouge_scorer import RougeScorer
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from evaluators import ROUGE_TYPES, MetricInputError, bleu, cider, google_bleu, rouge

WORDS = st.lists(st.sampled_from(["a", "b", "c", "d", "cat", "dog", "the"]), max_size=8).map(
    " ".join
)


# ---------------------------------------------------------------- BLEU (sacrebleu)


def test_bleu_matches_sacrebleu_with_variable_reference_counts(predictions, references):
    r = references
    streams = [
        [r[0], r[1], r[2][0], r[3][0], r[4][0], r[5], r[6], r[7][0]],
        [None, None, r[2][1], r[3][1], r[4][1], None, None, None],
        [None, None, None, None, r[4][2], None, None, None],
    ]
    expected = sacrebleu.corpus_bleu(predictions, streams).score
    assert bleu(predictions, references) == pytest.approx(expected, abs=1e-6)


def test_bleu_single_reference_and_options_match_sacrebleu(predictions, reference_lists):
    refs = [rs[0] for rs in reference_lists]
    assert bleu(predictions, refs) == pytest.approx(
        sacrebleu.corpus_bleu(predictions, [refs]).score, abs=1e-6
    )
    expected = sacrebleu.BLEU(lowercase=True, max_ngram_order=2).corpus_score(predictions, [refs])
    assert bleu(predictions, refs, lowercase=True, max_order=2) == pytest.approx(
        expected.score, abs=1e-6
    )


def test_bleu_identity_and_disjoint():
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100.0)
    assert bleu(["x y z w"], ["a b c d"]) == 0.0


# ---------------------------------------------------------------- Google-BLEU (GLEU)


def test_google_bleu_hand_computed():
    # n-grams of "a b c": a b c ab bc abc; of "a b d": a b d ab bd abd; shared: a b ab
    assert google_bleu(["a b c"], ["a b d"]) == pytest.approx(50.0)
    # recall-limited: 1 shared of max(1, 3) n-grams
    assert google_bleu(["a"], ["a b"]) == pytest.approx(100 / 3)
    # corpus sums: sample 1 keeps its exact reference (10/10), sample 2 has 1 of max(3, 1)
    assert google_bleu(["a b c d", "a a"], [["a b c d", "x"], "a"]) == pytest.approx(100 * 11 / 13)
    # 13a splits punctuation: "Hello , world !" has 10 n-grams, 2 shared
    assert google_bleu(["Hello, world!"], ["Hello world"]) == pytest.approx(20.0)
    # case is kept
    assert google_bleu(["Cat"], ["cat"]) == 0.0
    # nothing to count at all
    assert google_bleu([""], [""]) == 0.0


def test_google_bleu_matches_nltk_corpus_gleu(predictions, references, reference_lists):
    tok = Tokenizer13a()
    hyps = [tok(p).split() for p in predictions]
    refs = [[tok(r).split() for r in rs] for rs in reference_lists]
    expected = 100 * corpus_gleu(refs, hyps)
    assert google_bleu(predictions, references) == pytest.approx(expected, abs=1e-6)
    expected_12 = 100 * corpus_gleu(refs, hyps, min_len=1, max_len=2)
    assert google_bleu(predictions, references, max_len=2) == pytest.approx(expected_12, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(WORDS, st.lists(WORDS, min_size=1, max_size=3)), min_size=1, max_size=5))
def test_google_bleu_equals_nltk_and_is_bounded(pairs):
    preds = [p for p, _ in pairs]
    refs = [r for _, r in pairs]
    value = google_bleu(preds, refs)
    expected = 100 * corpus_gleu(
        [[r.split() for r in rs] for rs in refs], [p.split() for p in preds]
    )
    assert value == pytest.approx(expected, abs=1e-6)
    assert 0.0 <= value <= 100.0


def test_google_bleu_rejects_bad_orders():
    with pytest.raises(MetricInputError, match="min_len"):
        google_bleu(["a"], ["a"], min_len=3, max_len=2)


# ---------------------------------------------------------------- ROUGE (rouge-score)


def test_rouge_matches_rouge_score(predictions, references, reference_lists):
    scorer = RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    sums = dict.fromkeys(ROUGE_TYPES, 0.0)
    for pred, refs in zip(predictions, reference_lists):
        scores = scorer.score_multi(refs, pred)
        for k in ROUGE_TYPES:
            sums[k] += scores[k].fmeasure
    result = rouge(predictions, references)
    assert set(result) == set(ROUGE_TYPES)
    for k in ROUGE_TYPES:
        assert result[k] == pytest.approx(100 * sums[k] / len(predictions), abs=1e-6)


def test_rouge_hand_computed_with_stemming_and_newlines():
    # stems: [run, dog] vs [the, dog, run]: R1 P=1 R=2/3; LCS 1 -> P=1/2 R=1/3
    r = rouge(["running dogs"], ["the dog runs"])
    assert r["rouge1"] == pytest.approx(80.0)
    assert r["rougeL"] == pytest.approx(40.0)
    assert r["rouge2"] == 0.0
    # ROUGE-L over the whole text has LCS 2 of 4; ROUGE-Lsum matches sentence by sentence
    r = rouge(["a b\nc d"], ["c d\na b"])
    assert r["rougeL"] == pytest.approx(50.0)
    assert r["rougeLsum"] == pytest.approx(100.0)
    assert rouge(["x"], ["y"]) == dict.fromkeys(ROUGE_TYPES, 0.0)


# ---------------------------------------------------------------- CIDEr-D (from the formula)


def test_cider_hand_worked_corpus():
    # N = 2 samples. df over reference sets: a b c (a,b) (a,c) in sample 1; c d (c,d) in 2.
    # IDF weight log 2 - log df: c has df 2 -> weight 0; every other n-gram log 2.
    # Sample 1, "a b" vs "a b": cosine 1 (n = 1, 2); vs "a c": n=1 gives 1/sqrt(2), n=2 gives 0.
    #   -> 10 * (1 + 1/sqrt(2) + 1 + 0 + 0 + 0) / 4 / 2
    # Sample 2, "c d" vs "c d": n = 1 vector (0, log 2) -> 1; n = 2 -> 1. -> 10 * 2 / 4
    s1 = 10 * (2 + 1 / math.sqrt(2)) / 4 / 2
    s2 = 10 * 2 / 4
    assert cider(["a b", "c d"], [["a b", "a c"], "c d"]) == pytest.approx(
        100 * (s1 + s2) / 2, abs=1e-9
    )


def test_cider_clipping_and_length_penalty():
    # Sample 2 candidate "c d d": unigram d weighs 2 log 2, clipped to the reference's log 2:
    #   n=1: (log 2)^2 / (2 log 2 * log 2) = 1/2; n=2: (c,d) shared, (d,d) absent -> 1/sqrt(2)
    #   length 3 vs 2: penalty exp(-1 / (2 * 6^2))
    s1 = 10 * (2 + 1 / math.sqrt(2)) / 4 / 2
    s2 = 10 * math.exp(-1 / 72) * (0.5 + 1 / math.sqrt(2)) / 4
    assert cider(["a b", "c d d"], [["a b", "a c"], "c d"]) == pytest.approx(
        100 * (s1 + s2) / 2, abs=1e-9
    )


def test_cider_scale_and_tokenisation():
    # identical captions with corpus-unique n-grams: every cosine is 1 -> 10 -> 1000 here
    assert cider(["a b c d e", "f g h i j"], ["a b c d e", "f g h i j"]) == pytest.approx(1000.0)
    # lowercase and punctuation dropped before matching
    assert cider(["A b, c d e!", "f g h i j"], ["a b c d e", "f g h i j"]) == pytest.approx(1000.0)


def test_cider_single_sample_is_degenerate(caplog):
    with caplog.at_level(logging.WARNING, logger="evaluators.generation"):
        assert cider(["a cat"], ["a cat"]) == 0.0
    assert "single sample" in caplog.text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(WORDS, WORDS), min_size=2, max_size=6))
def test_cider_is_non_negative_and_bounded(pairs):
    value = cider([p for p, _ in pairs], [r for _, r in pairs])
    assert 0.0 <= value <= 1000.0 + 1e-9


# ---------------------------------------------------------------- shared input checks


METRICS = [bleu, google_bleu, rouge, cider]


@pytest.mark.parametrize("metric", METRICS)
def test_bad_input_raises_clear_errors(metric):
    with pytest.raises(MetricInputError, match="length mismatch: predictions has 2"):
        metric(["a", "b"], ["a"])
    with pytest.raises(MetricInputError, match=r"predictions\[1\] is None"):
        metric(["a", None], ["a", "b"])
    with pytest.raises(MetricInputError, match=r"references\[0\] is None"):
        metric(["a", "b"], [None, "b"])
    with pytest.raises(MetricInputError, match=r"references\[1\] is an empty list"):
        metric(["a", "b"], ["a", []])
    with pytest.raises(MetricInputError, match=r"references\[1\]\[0\] must be a str"):
        metric(["a", "b"], ["a", [3]])
    with pytest.raises(MetricInputError, match="predictions is empty"):
        metric([], [])
    with pytest.raises(MetricInputError, match="predictions must be a list"):
        metric("a", ["a"])
