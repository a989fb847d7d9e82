"""match_choice, accuracy_mc and parse_choices on the answer styles of the DRAKE prompts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluators import MetricInputError, accuracy_mc, match_choice, mc_correctness, parse_choices

TF = ["True", "False"]
LETTERS = ["red", "blue", "green", "yellow"]  # shown as "A. red\nB. blue ..."
IMAGES = ["Image A", "Image B", "Image C", "Image D"]
IDS = ["1", "2", "3", "4", "5"]
DISHES = ["Pad Thai", "Pho", "Ramen", "Bibimbap", "Sushi"]  # answered by id 1-5
ORD2 = ["First image", "Second image"]
ORD3 = ["First image", "Second image", "Third image"]
PN = ["Positive", "Negative"]
YN = ["yes", "no"]
COUNTS = ["2", "3", "4", "5"]
COMICS = ["Hi there", "Go away", "Nope"]

CASES = [
    # Choice list:[True, False]
    ("True", TF, 0),
    ("false", TF, 1),
    ("False.", TF, 1),
    ("  TRUE  ", TF, 0),
    ("Ｔｒｕｅ", TF, 0),  # full-width, NFKC
    ("Answer: True", TF, 0),
    ("The answer is False.", TF, 1),
    ("Yes, the caption matches.", TF, 0),
    ("No", TF, 1),
    ("True or False", TF, None),  # names both options
    ("No, it is not true", TF, None),  # names both options
    ("Yes, that is true", TF, 0),
    ("", TF, None),
    (None, TF, None),
    # letters A-D ("Answer with the option's letter")
    ("B", LETTERS, 1),
    ("(C)", LETTERS, 2),
    ("D.", LETTERS, 3),
    ("a", LETTERS, 0),
    ("A. red", LETTERS, 0),
    ("B. red", LETTERS, 1),  # the leading label decides
    ("The answer is B", LETTERS, 1),
    ("Answer: (B) blue", LETTERS, 1),
    ("Option C", LETTERS, 2),
    ("green", LETTERS, 2),
    ("It is yellow.", LETTERS, 3),
    ("E", LETTERS, None),  # out of range
    ("red and blue", LETTERS, None),  # ambiguous
    ("It looks dark red", ["red", "dark red"], 1),  # nested options: the longer one
    ("I cannot tell", LETTERS, None),
    ("A cat", ["cat", "dog"], 0),  # the article "A" is not a letter label
    ("A", ["cat", "dog"], 0),
    # Image A:<image> Image B:<image> ...
    ("Image A", IMAGES, 0),
    ("image c", IMAGES, 2),
    ("The answer is Image D.", IMAGES, 3),
    ("B", IMAGES, 1),
    ("Image B, because the others match", IMAGES, 1),
    ("Image A is more similar than Image B", IMAGES, None),
    ("the second one", IMAGES, 1),
    # answer ids (1,2,3,4,5)
    ("3", IDS, 2),
    ("Answer: 5", IDS, 4),
    ("2", DISHES, 1),
    ("(4)", DISHES, 3),
    ("3. Ramen", DISHES, 2),
    ("pho", DISHES, 1),
    ("6", DISHES, None),
    # digit options are matched as text, not as positions
    ("3", COUNTS, 1),
    ("4", COUNTS, 2),
    ("There are 5 clothes.", COUNTS, 3),
    # [First image, Second image]
    ("First image", ORD2, 0),
    ("The second image.", ORD2, 1),
    ("second", ORD3, 1),
    ("the third one", ORD3, 2),
    # Positive / Negative
    ("Positive", PN, 0),
    ("negative.", PN, 1),
    ("yes", PN, 0),
    ("The query image is negative.", PN, 1),
    # yes / no
    ("Yes", YN, 0),
    ("No, it is blurry.", YN, 1),
    ("true", YN, 0),
    # COMICS "A: ...| B: ..." with a letter answer
    ("B", COMICS, 1),
    ("go away", COMICS, 1),
]


@pytest.mark.parametrize(("output", "choices", "expected"), CASES)
def test_match_choice_table(output, choices, expected):
    assert match_choice(output, choices) == expected


def test_table_is_large_enough():
    assert len(CASES) >= 30


@given(
    st.lists(
        st.from_regex(r"[a-z]{1,7}( [a-z]{1,7}){0,2}", fullmatch=True),
        min_size=2,
        max_size=6,
        unique=True,
    ),
    st.data(),
)
def test_any_option_text_maps_to_itself(options, data):
    i = data.draw(st.integers(0, len(options) - 1))
    assert match_choice(options[i], options) == i
    assert match_choice(options[i].upper() + ".", options) == i
    assert match_choice(f"Answer: {options[i]}", options) == i


def test_match_choice_rejects_bad_choices():
    with pytest.raises(MetricInputError, match="choices is empty"):
        match_choice("A", [])
    with pytest.raises(MetricInputError, match=r"choices\[1\]"):
        match_choice("A", ["x", None])


def test_accuracy_mc_with_index_and_text_answers():
    outputs = ["B", "True", "Image C", "no idea", "2"]
    choices = [LETTERS, TF, IMAGES, TF, DISHES]
    answers = [1, "False", "C", "True", "Pho"]
    assert mc_correctness(outputs, choices, answers) == [True, False, True, False, True]
    assert accuracy_mc(outputs, choices, answers) == pytest.approx(60.0)


def test_accuracy_mc_bad_input():
    with pytest.raises(MetricInputError, match="length mismatch"):
        accuracy_mc(["A", "B"], [TF], [0])
    with pytest.raises(MetricInputError, match="empty"):
        accuracy_mc([], [], [])
    with pytest.raises(MetricInputError, match=r"answers\[0\] = 5 is out of range"):
        accuracy_mc(["A"], [TF], [5])
    with pytest.raises(MetricInputError, match=r"answers\[0\] = 'maybe' matches none"):
        accuracy_mc(["A"], [TF], ["maybe"])
    with pytest.raises(MetricInputError, match=r"answers\[1\] is None"):
        accuracy_mc(["A", "B"], [TF, TF], [0, None])
    with pytest.raises(MetricInputError, match=r"choices_list\[0\]"):
        accuracy_mc(["A"], [[]], [0])


PROMPTS = [
    (
        "For a given image and caption, decide.\n<image>\nCaption: the cat is left of the dog."
        "\nChoice list:[True, False]. Your answer is:",
        ["True", "False"],
    ),
    ("Which edit?\nChoice list:[Image A, Image B, Image C, Image D]. Your answer is:", IMAGES),
    ("Quote it.\nChoice list:['a, b', 'c']. Your answer is:", ["a, b", "c"]),
    (
        "What colour is the star?\nA. red\nB. blue\nC. green\nD. yellow\n"
        "Answer with the option's letter from the given choices directly.",
        LETTERS,
    ),
    ("Which one?\n(A) cat\n(B) dog\nAnswer:", ["cat", "dog"]),
    (
        "Question: what is shown? Options: A. cat B. dog C. bird D. fish",
        ["cat", "dog", "bird", "fish"],
    ),
    (
        "Panels: <image><image><image> What does the next panel say? "
        "A: Hi there| B: Go away| C: Nope\nYour answer is:",
        COMICS,
    ),
    (
        "Which dish is this?\n1. Pad Thai\n2. Pho\n3. Ramen\n4. Bibimbap\n5. Sushi\n"
        "Print only the answer with a single answer id (1,2,3,4,5).",
        DISHES,
    ),
    ("Image A:<image> Image B:<image> Which is sharper? [First image, Second image]", ORD2),
    (
        "Reference:<image> Image A:<image> Image B:<image> Which is more similar?",
        ["Image A", "Image B"],
    ),
    ("Describe the image in one sentence.", []),
]


@pytest.mark.parametrize(("prompt", "expected"), PROMPTS)
def test_parse_choices(prompt, expected):
    assert parse_choices(prompt) == expected


def test_parse_then_match_round_trip():
    prompt = "What colour?\nA. red\nB. blue\nC. green\nAnswer with the option's letter."
    choices = parse_choices(prompt)
    assert accuracy_mc(["C", "blue", "A. red"], [choices] * 3, ["C", "B", 0]) == 100.0


def test_parse_choices_rejects_non_string():
    with pytest.raises(MetricInputError, match="prompt must be a str"):
        parse_choices(None)
