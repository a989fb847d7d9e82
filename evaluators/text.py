"""Short-answer metrics: VQA-style normalisation, exact match and token F1.

These score open-ended short answers (DRAKE's iconqa fill-in-the-blank tasks, VQA answers). The
normalisation follows the VQA / EvalAI answer processing that FediLoRA also applies, so that
"Two dogs." and "2 dogs" count as the same answer.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from types import MappingProxyType

from evaluators._validate import as_reference_lists, check_references, check_texts

__all__ = ["normalise", "exact_match", "token_f1"]

_NUMBER_WORDS = MappingProxyType(
    {
        "zero": "0",
        "one": "1",
        "two": "2",
        "three": "3",
        "four": "4",
        "five": "5",
        "six": "6",
        "seven": "7",
        "eight": "8",
        "nine": "9",
        "ten": "10",
        "eleven": "11",
        "twelve": "12",
        "thirteen": "13",
        "fourteen": "14",
        "fifteen": "15",
        "sixteen": "16",
        "seventeen": "17",
        "eighteen": "18",
        "nineteen": "19",
        "twenty": "20",
    }
)
_ARTICLES = frozenset({"a", "an", "the"})
_APOSTROPHES = re.compile(r"['\u2019\u2018`]")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d)")
# Any character that is not a letter, digit or whitespace (and "_", which \w lets through),
# except a period between two digits (a decimal point).
_PUNCT = re.compile(r"(?!(?<=\d)\.(?=\d))[^\w\s]|_")


def normalise(text: str) -> str:
    """Normalise a short answer the way VQA evaluation does.

    Steps, in order:

    1. lowercase;
    2. delete apostrophes (``don't`` -> ``dont``, ``dog's`` -> ``dogs``) and commas between
       digits (``1,000`` -> ``1000``);
    3. replace every other character that is not a letter, digit or whitespace with a space,
       keeping a period between two digits (``3.5`` stays ``3.5``);
    4. split on whitespace, map number words ``zero`` ... ``twenty`` to digits and drop the
       articles ``a``, ``an``, ``the``;
    5. join the tokens with single spaces.

    Parameters
    ----------
    text : str
        The answer to normalise.

    Returns
    -------
    str
        The normalised answer; ``""`` when nothing is left.

    Examples
    --------
    >>> normalise("The Two dogs, aren't they?")
    '2 dogs arent they'
    >>> normalise("1,000.5 m")
    '1000.5 m'
    """
    text = text.lower()
    text = _APOSTROPHES.sub("", text)
    text = _THOUSANDS_COMMA.sub("", text)
    text = _PUNCT.sub(" ", text)
    tokens = [_NUMBER_WORDS.get(t, t) for t in text.split() if t not in _ARTICLES]
    return " ".join(tokens)


def _f1(pred_tokens: list[str], ref_tokens: list[str]) -> float:
    if not pred_tokens or not ref_tokens:
        return 1.0 if pred_tokens == ref_tokens else 0.0
    common = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(predictions: Sequence[str], references: Sequence[str | Sequence[str]]) -> float:
    """Percentage of predictions equal to a reference after :func:`normalise`.

    A sample scores 1 when its normalised prediction equals the normalised form of any of its
    references, else 0. The result is the mean over samples times 100.

    Parameters
    ----------
    predictions : list of str
        One model output per sample.
    references : list of str or list of list of str
        One reference, or a non-empty list of accepted references, per sample.

    Returns
    -------
    float
        Exact match on a 0-100 scale.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch or ``None`` entries.

    Examples
    --------
    >>> exact_match(["Two.", "a cat"], ["2", ["dog", "cat"]])
    100.0
    """
    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    refs = as_reference_lists(references, single)
    hits = 0
    for p, rs in zip(predictions, refs):
        np_ = normalise(p)
        hits += any(np_ == normalise(r) for r in rs)
    return 100.0 * hits / len(predictions)


def token_f1(predictions: Sequence[str], references: Sequence[str | Sequence[str]]) -> float:
    """Mean token-level F1 between prediction and reference, SQuAD style.

    For one pair, with tokens from :func:`normalise` split on spaces and ``common`` the size of
    the multiset intersection: precision = common / |pred|, recall = common / |ref|,
    F1 = 2PR / (P + R), and F1 = 0 when ``common`` is 0. If either side has no tokens, F1 is 1
    when both are empty and 0 otherwise. With several references a sample takes its best F1.
    The result is the mean over samples times 100. FedMosaic scores DRAKE's open-ended iconqa
    tasks with this token F1.

    Parameters
    ----------
    predictions : list of str
        One model output per sample.
    references : list of str or list of list of str
        One reference, or a non-empty list of references, per sample.

    Returns
    -------
    float
        Token F1 on a 0-100 scale.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch or ``None`` entries.

    Examples
    --------
    >>> round(token_f1(["the red big ball"], ["red ball"]), 4)
    80.0
    """
    predictions = check_texts("predictions", predictions)
    references, single = check_references("references", references, len(predictions))
    refs = as_reference_lists(references, single)
    total = 0.0
    for p, rs in zip(predictions, refs):
        pt = normalise(p).split()
        total += max(_f1(pt, normalise(r).split()) for r in rs)
    return 100.0 * total / len(predictions)
