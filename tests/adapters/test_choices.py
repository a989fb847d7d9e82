"""Option parsing from multiple-choice prompts, in every wording the released data uses."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drake.adapters.choices import ChoiceList, choices_for_answer, parse_choices

CASES = [
    # (prompt, style, options, labels)
    ("Caption: a cat left of a dog\nChoice list:[True, False]. Your answer is:",
     "choice-list", ("True", "False"), ()),
    ("Choice list: [Positive, Negative]. Your answer is:", "choice-list",
     ("Positive", "Negative"), ()),
    ("Find the action. Choice List: [hold cup, ride bike, eat pizza, push cart]", "choice-list",
     ("hold cup", "ride bike", "eat pizza", "push cart"), ()),
    ("Choice lists: [a | b, c | d]", "choice-list", ("a", "b, c", "d"), ()),
    ("Image A: <image>, Image B: <image>\nChoice list:[Image A: <image>, Image B: <image>]",
     "choice-list", ("Image A", "Image B"), ()),
    ("Pick.\nChoice list:['red', 'green']", "choice-list", ("red", "green"), ()),
    ("What is it?\n [yes, no]\n", "bracket-list", ("yes", "no"), ()),
    ("<image>\nWhat is shown?\nA. a cat\nB. a dog\nC. a bird\nAnswer with the letter.",
     "lettered", ("a cat", "a dog", "a bird"), ("A", "B", "C")),
    ("<image> Which colour? (A) red (B) blue", "lettered", ("red", "blue"), ("A", "B")),
    ("Image A: <image> Image B: <image> Image C: <image> Which shows rain?", "image-options",
     ("Image A", "Image B", "Image C"), ("A", "B", "C")),
    ("<image>\nWhich dish is this?\n1. Pho\n2. Ramen\n3. Udon\nPrint only the answer with a "
     "single answer id.", "answer-id", ("1", "2", "3"), ("1", "2", "3")),
    ("<image>\nWhere is this dish from? Print only the answer with a single answer id.",
     "answer-id", ("1", "2", "3", "4", "5"), ("1", "2", "3", "4", "5")),
]


@pytest.mark.parametrize(("prompt", "style", "options", "labels"), CASES)
def test_each_wording_is_parsed(prompt, style, options, labels):
    assert parse_choices(prompt) == ChoiceList(style, options, labels)


@pytest.mark.parametrize("prompt", [
    "<image>\nWhat is the total? Answer with a number.",
    "<image>\nA. lone option only",
    "Grade A. student work, see image <image>",
])
def test_no_options_means_none(prompt):
    assert parse_choices(prompt) is None


def test_the_answer_picks_labels_texts_or_written_out_options():
    found = parse_choices("Q?\nA. cat\nB. dog")
    assert choices_for_answer(found, "B") == ["A", "B"]
    assert choices_for_answer(found, " dog ") == ["cat", "dog"]
    assert choices_for_answer(found, "B. dog") == ["A. cat", "B. dog"]
    assert choices_for_answer(found, "cow") is None
    assert choices_for_answer(None, "A") is None
    # a case-only difference still finds the list; the caller decides what to keep
    assert choices_for_answer(parse_choices("Choice list:[True, False]"), "true") == ["True",
                                                                                      "False"]


_option = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters=" -"),
                  min_size=1, max_size=12).map(str.strip).filter(bool)


@given(st.lists(_option, min_size=2, max_size=6, unique=True), st.data())
def test_any_rendered_choice_list_round_trips(options, data):
    prompt = f"<image>\nQuestion?\nChoice list:[{', '.join(options)}]. Your answer is:"
    found = parse_choices(prompt)
    assert found is not None and list(found.options) == options
    answer = data.draw(st.sampled_from(options))
    assert choices_for_answer(found, answer) == options
