"""VQA-style normalisation, exact match and token F1."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluators import MetricInputError, exact_match, normalise, token_f1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Two dogs, aren't they?", "2 dogs arent they"),
        ("An apple", "apple"),
        ("1,000.5 m", "1000.5 m"),
        ("three", "3"),
        ("Twenty-one", "20 1"),
        ("end.", "end"),
        ("left/right", "left right"),
        ("Café  ÜBER", "café über"),
        ("under_score", "under score"),
        ("", ""),
        ("the a an", ""),
    ],
)
def test_normalise(text, expected):
    assert normalise(text) == expected


def test_exact_match_hand_computed():
    preds = ["Two.", "a cat", "dog", ""]
    refs = ["2", ["dog", "cat"], "cat", ""]
    assert exact_match(preds, refs) == pytest.approx(75.0)


def test_token_f1_hand_computed():
    # "red big ball" vs "red ball": P = 2/3, R = 1 -> F1 = 0.8
    assert token_f1(["the red big ball"], ["red ball"]) == pytest.approx(80.0)
    # multiset intersection: "a a b" -> tokens [b] after articles go; use numbers instead
    # "1 1 2" vs "1 2 2": common {1, 2} = 2 -> P = R = 2/3
    assert token_f1(["one one two"], ["1 2 2"]) == pytest.approx(200 / 3)
    # best of several references; empty vs empty is a match, empty vs text is not
    assert token_f1(["blue car", "", ""], [["red car", "blue car"], "", "x"]) == pytest.approx(
        100 * (1 + 1 + 0) / 3
    )


TEXT = st.text(alphabet=st.sampled_from(list("ab c1,.'-")), max_size=12)


@given(st.lists(TEXT, min_size=1, max_size=6))
def test_identical_texts_score_100(texts):
    assert exact_match(texts, texts) == 100.0
    assert token_f1(texts, texts) == pytest.approx(100.0)


@given(st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=6))
def test_bounds_and_em_below_f1(pairs):
    preds = [p for p, _ in pairs]
    refs = [r for _, r in pairs]
    em = exact_match(preds, refs)
    f1 = token_f1(preds, refs)
    assert 0.0 <= em <= f1 + 1e-9 <= 100.0 + 1e-9


@pytest.mark.parametrize("metric", [exact_match, token_f1])
def test_bad_input(metric):
    with pytest.raises(MetricInputError, match="length mismatch"):
        metric(["a"], ["a", "b"])
    with pytest.raises(MetricInputError, match=r"predictions\[1\] is None"):
        metric(["a", None], ["a", "b"])
    with pytest.raises(MetricInputError, match="predictions is empty"):
        metric([], [])
