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
    # HFLB Abstract: a str() list inside literal brackets; GQA: the plural label, str() list
    ("<image>Question: Is it?\nChoice list:[['no', 'yes']].\n Your answer is:", "choice-list",
     ("no", "yes"), ()),
    ("<image>\n Question: Which?\n Choice lists: ['a, b', \"it's\"].\n Your answer is:",
     "choice-list", ("a, b", "it's"), ()),
    # COMICS_Dialogue: lettered options between pipes, texts with commas and trailing spaces
    ("<image>\nChoice list:[A: ow , my foot ! | B: keep it up , boy ! ]. Your answer is:",
     "choice-list", ("ow , my foot !", "keep it up , boy !"), ("A", "B")),
    # IRFL-3: phrases joined by a bare comma, a phrase holding ", "
    ("<image>\nChoice list:[easy come, easy go,red tape,over the moon]. Your answer is:",
     "choice-list", ("easy come, easy go", "red tape", "over the moon"), ()),
    # iconqa-like numbers: thousands separators stay inside their options
    ("<image>\nChoice list:[1,000, 2,500, 30]. Your answer is:", "choice-list",
     ("1,000", "2,500", "30"), ()),
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


def test_the_gold_answer_joins_the_pieces_of_an_option_that_holds_a_comma():
    prompt = "Choice list:[soup, box of pasta, penne, unanswerable]. Your answer is: "
    assert parse_choices(prompt).options == ("soup", "box of pasta", "penne", "unanswerable")
    found = parse_choices(prompt, "box of pasta, penne")
    assert found.options == ("soup", "box of pasta, penne", "unanswerable")
    assert choices_for_answer(found, "box of pasta, penne") == list(found.options)
    # an answer the pieces do not spell changes nothing
    assert parse_choices(prompt, "rice, beans").options == parse_choices(prompt).options


def test_comics_letter_answers_pick_the_labels():
    found = parse_choices("Choice list:[A: yes , sir| B: no| C: maybe ]. Your answer is:")
    assert choices_for_answer(found, "C") == ["A", "B", "C"]
    assert choices_for_answer(found, "no") == ["yes , sir", "no", "maybe"]


@pytest.mark.parametrize("body", ["[[[['a']]]]", "['a', len('b')]", "[True, False", "'" * 3])
def test_a_body_that_is_no_list_of_strings_falls_back_to_splitting(body):
    found = parse_choices(f"Choice list:[{body}, b]. Your answer is:")
    assert found is None or all(isinstance(o, str) for o in found.options)
