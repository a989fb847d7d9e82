"""Multiple-choice scoring: map a generated answer to one of the offered options.

DRAKE's multiple-choice tasks phrase their options in several styles (a ``Choice list:[...]``,
lettered options, ``Image A`` ... ``Image D``, answer ids ``1``-``5``, ordinal image names,
Positive/Negative, yes/no), and generative models answer them in free text. :func:`match_choice`
turns such an answer into an option index with a fixed, documented list of rules, so that every
method is scored by the same rules; :func:`parse_choices` recovers the options from a prompt.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from types import MappingProxyType

from evaluators._validate import check_same_length, check_sequence
from evaluators.errors import MetricInputError

__all__ = ["match_choice", "mc_correctness", "accuracy_mc", "parse_choices"]

_OUTER = " \t\r\n\"'`.,;:!?()[]{}<>*"
_SPACES = re.compile(r"\s+")
_PREFIX = re.compile(
    r"^(?:(?:so|thus|therefore|hence)\s*,?\s+)?"
    r"(?:(?:the|my|your|final|correct|best|right)\s+)*"
    r"(?:answer|option|choice)\b(?:\s+(?:is|would\s+be|should\s+be))?\s*(?::|-|=|is)?\s*",
    re.IGNORECASE,
)
_LONE_LABEL = re.compile(
    r"^(?:(?:option|choice|answer|image|picture|id|number|no\.?)\s*)?"
    r"\(?\s*([a-z]|\d{1,2})\s*\)?$"
)
_LEADING_LETTER = re.compile(r"^\(?([A-Z])(?:\)|\.|:)\s*\S")
_LEADING_NUMBER = re.compile(r"^\(?(\d{1,2})(?:\)|\.|:)\s*\D")
_ORDINALS = MappingProxyType(
    {
        "first": 0,
        "second": 1,
        "third": 2,
        "fourth": 3,
        "fifth": 4,
        "sixth": 5,
        "seventh": 6,
        "eighth": 7,
        "1st": 0,
        "2nd": 1,
        "3rd": 2,
        "4th": 3,
        "5th": 4,
        "6th": 5,
        "7th": 6,
        "8th": 7,
    }
)
_LONE_ORDINAL = re.compile(
    r"^(?:the\s+)?(" + "|".join(_ORDINALS) + r")(?:\s+(?:one|image|picture|option|choice))?$"
)
_POSITIVE = frozenset({"yes", "true", "positive", "correct", "right"})
_NEGATIVE = frozenset({"no", "false", "negative", "incorrect", "wrong"})
_FIRST_WORD = re.compile(r"^([a-z]+)\b")


def _canon(text: str) -> str:
    """Lowercase, NFKC, collapse whitespace, strip outer punctuation and brackets."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACES.sub(" ", text).strip(_OUTER)


def _strip_prefix(canon_text: str) -> str:
    return _canon(_PREFIX.sub("", canon_text, count=1))


def _unique(indices: list[int]) -> int | None:
    distinct = sorted(set(indices))
    return distinct[0] if len(distinct) == 1 else None


def _polarity(word: str) -> int | None:
    if word in _POSITIVE:
        return 1
    if word in _NEGATIVE:
        return 0
    return None


def _contained(needle: str, haystack: str) -> list[int]:
    """Start offsets of ``needle`` in ``haystack`` at word boundaries."""
    pattern = r"(?<!\w)" + re.escape(needle) + r"(?!\w)"
    return [m.start() for m in re.finditer(pattern, haystack)]


def match_choice(output: str | None, choices: Sequence[str]) -> int | None:
    """Map a generated answer to the index of one option, or ``None`` if it cannot be mapped.

    Both the output and the options are compared in a canonical form: Unicode NFKC, case-folded,
    whitespace collapsed, and leading/trailing spaces, quotes, brackets and punctuation
    (``. , ; : ! ? ( ) [ ] { } < > *``) stripped. The rules are applied in this order, and the
    first one that picks exactly one option decides:

    1. **Exact option.** The output equals an option (``"true."`` -> ``True``).
    2. **Answer prefix.** A leading ``answer:`` / ``the answer is`` / ``my final answer is`` /
       ``option`` (optionally after ``so,``) is removed; the rest equals an option.
    3. **Lone label.** The rest is a single letter or a number, optionally in brackets or after
       ``option`` / ``choice`` / ``image`` / ``id``: letter ``A`` is option 0, ``B`` option 1, ...;
       a number ``k`` is option ``k - 1`` (answer ids are 1-based). Options whose text is itself
       a number are caught by rule 1 first, so with options ``["2", "3", "4"]`` the output ``"3"``
       means the option ``"3"``, not the third option.
    4. **Leading label.** The output starts with an upper-case letter or a number followed by
       ``.``, ``)`` or ``:`` and more text (``"B. blue"``, ``"(2) Pad Thai"``): the label decides,
       even if the text after it disagrees.
    5. **Yes/no polarity.** The first word is one of yes/true/positive/correct/right (or
       no/false/negative/incorrect/wrong), exactly one option's canonical text is a word of the
       same polarity, and no option of the other polarity occurs in the output:
       ``"Yes, it is."`` -> ``True``; ``"no"`` -> ``Negative``. If an option of the other
       polarity is named as well (``"True or False"``, ``"No, it is not true"``) the output is
       ambiguous and gives ``None``.
    6. **Contained option.** Options occurring in the output as whole words; matches lying inside
       a longer matched option are dropped (``"dark red"`` beats ``"red"``). Exactly one
       remaining option wins (``"Image B, because ..."``); two or more different options are
       ambiguous and give ``None``, so an output that lists several options gets no credit.
    7. **Partial option.** The output is a whole-word part of exactly one option
       (``"second"`` -> ``"Second image"``).
    8. **Ordinal.** The output is an ordinal word, optionally followed by one/image/option
       (``"the third one"``) and within range: that position.

    Anything else, including an empty output and ``None``, gives ``None``: the answer counts as
    wrong.

    Parameters
    ----------
    output : str or None
        The model's generated answer.
    choices : list of str
        The offered options in prompt order (see :func:`parse_choices`).

    Returns
    -------
    int or None
        Index into ``choices``, or ``None`` when no rule picks a single option.

    Raises
    ------
    MetricInputError
        If ``choices`` is empty or holds a non-string.

    Examples
    --------
    >>> match_choice("The answer is B.", ["red", "blue", "green"])
    1
    >>> match_choice("Yes, the caption is right", ["True", "False"])
    0
    >>> match_choice("image a", ["Image A", "Image B"])
    0
    >>> match_choice("True or False", ["True", "False"]) is None
    True
    """
    check_sequence("choices", choices)
    opts: list[str] = []
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise MetricInputError(f"choices[{i}] must be a str, got {type(c).__name__}")
        opts.append(_canon(c))
    if output is None or not isinstance(output, str):
        return None
    n = len(opts)
    raw = _canon(output)
    if not raw:
        return None

    # 1. exact option
    hit = _unique([i for i, o in enumerate(opts) if o and o == raw])
    if hit is not None:
        return hit
    # 2. answer prefix
    text = _strip_prefix(raw)
    if not text:
        return None
    hit = _unique([i for i, o in enumerate(opts) if o and o == text])
    if hit is not None:
        return hit
    # 3. lone label
    m = _LONE_LABEL.match(text)
    if m:
        label = m.group(1)
        idx = int(label) - 1 if label.isdigit() else ord(label) - ord("a")
        if 0 <= idx < n:
            return idx
    # 4. leading label, read on the original case so that "A cat ..." is not the letter A
    cased = _strip_prefix_keep_case(output)
    m = _LEADING_LETTER.match(cased) or _LEADING_NUMBER.match(cased)
    if m:
        label = m.group(1)
        idx = int(label) - 1 if label.isdigit() else ord(label) - ord("A")
        if 0 <= idx < n:
            return idx
    # 5. yes/no polarity, unless an option of the other polarity is named too
    fw = _FIRST_WORD.match(text)
    if fw:
        pol = _polarity(fw.group(1))
        if pol is not None:
            same = [i for i, o in enumerate(opts) if _polarity(o) == pol]
            other = [i for i, o in enumerate(opts) if _polarity(o) not in (None, pol)]
            hit = _unique(same)
            if hit is not None:
                if any(_contained(opts[i], text) for i in other):
                    return None  # "No, it is not true": both polarities named
                return hit
    # 6. contained option
    spans: list[tuple[int, int, int]] = []
    for i, o in enumerate(opts):
        if o:
            spans.extend((s, s + len(o), i) for s in _contained(o, text))
    if spans:
        kept = [
            sp
            for sp in spans
            if not any(
                (o_s <= sp[0] and sp[1] <= o_e) and (o_e - o_s) > (sp[1] - sp[0])
                for o_s, o_e, _ in spans
            )
        ]
        hit = _unique([i for _, _, i in kept])
        if hit is not None:
            return hit
        return None
    # 7. partial option
    hit = _unique([i for i, o in enumerate(opts) if o and _contained(text, o)])
    if hit is not None:
        return hit
    # 8. ordinal
    m = _LONE_ORDINAL.match(text)
    if m:
        idx = _ORDINALS[m.group(1)]
        if idx < n:
            return idx
    return None


def _strip_prefix_keep_case(output: str) -> str:
    """Remove an answer prefix from the original text without changing its case."""
    text = unicodedata.normalize("NFKC", output).strip().strip("\"'`*")
    m = _PREFIX.match(text)
    return text[m.end() :].strip() if m else text


def mc_correctness(
    outputs: Sequence[str | None],
    choices_list: Sequence[Sequence[str]],
    answers: Sequence[int | str],
) -> list[bool]:
    """Per-sample correctness of multiple-choice outputs under :func:`match_choice`.

    Parameters
    ----------
    outputs : list of str or None
        Generated answers; ``None`` or unparseable outputs are wrong.
    choices_list : list of list of str
        The options of each sample.
    answers : list of int or str
        The gold option of each sample: an index into its options, or the gold answer text
        (``"B"``, ``"True"``, ``"Image A"``), which is mapped to an index with
        :func:`match_choice`.

    Returns
    -------
    list of bool
        ``True`` where the output maps to the gold option.

    Raises
    ------
    MetricInputError
        On empty inputs, a length mismatch, an out-of-range gold index, or a gold answer text
        that maps to no option (a data error, reported with its index).
    """
    check_sequence("outputs", outputs)
    check_sequence("choices_list", choices_list)
    check_sequence("answers", answers)
    check_same_length("outputs", outputs, "choices_list", choices_list)
    check_same_length("outputs", outputs, "answers", answers)
    correct: list[bool] = []
    for i, (out, choices, ans) in enumerate(zip(outputs, choices_list, answers)):
        if choices is None or isinstance(choices, str) or len(choices) == 0:
            raise MetricInputError(
                f"choices_list[{i}] must be a non-empty list of options, got {choices!r}"
            )
        if isinstance(ans, bool) or ans is None:
            raise MetricInputError(f"answers[{i}] is {ans!r}; pass an option index or text")
        if isinstance(ans, int):
            gold = ans
            if not 0 <= gold < len(choices):
                raise MetricInputError(
                    f"answers[{i}] = {gold} is out of range for {len(choices)} options"
                )
        else:
            gold_hit = match_choice(ans, choices)
            if gold_hit is None:
                raise MetricInputError(
                    f"answers[{i}] = {ans!r} matches none of choices_list[{i}] = {list(choices)!r}"
                )
            gold = gold_hit
        correct.append(match_choice(out, choices) == gold)
    return correct


def accuracy_mc(
    outputs: Sequence[str | None],
    choices_list: Sequence[Sequence[str]],
    answers: Sequence[int | str],
) -> float:
    """Multiple-choice accuracy (0-100): the share of outputs that map to the gold option.

    Outputs are mapped with :func:`match_choice`; unparseable or ambiguous outputs count as wrong.
    See :func:`mc_correctness` for the arguments.

    Examples
    --------
    >>> round(accuracy_mc(["A", "false", "I am not sure"], [["x", "y"]] * 3, [0, "y", "x"]), 2)
    33.33
    """
    correct = mc_correctness(outputs, choices_list, answers)
    return 100.0 * sum(correct) / len(correct)


_CHOICE_LIST = re.compile(r"choice\s*list\s*:?\s*\[(.*?)\]", re.IGNORECASE | re.DOTALL)
_LETTER_LINE = re.compile(r"^\s*\(?([A-Z])(?:\.|\)|:)\s*(.+?)\s*$", re.MULTILINE)
_NUMBER_LINE = re.compile(r"^\s*\(?(\d{1,2})(?:\.|\)|:)\s*(.+?)\s*$", re.MULTILINE)
_PIPE_ITEM = re.compile(r"^\s*\(?([A-Z])\)?\s*:\s*(.*?)\s*$", re.DOTALL)
_INLINE_LETTER = re.compile(r"(?:^|(?<=\s))\(?([A-H])(?:\.|\))\s+")
_BRACKET_LIST = re.compile(r"\[([^\[\]]+)\]")
_IMAGE_LABEL = re.compile(r"\b(Image\s+(?:[A-Z]|\d{1,2}))\s*:", re.IGNORECASE)


def _split_items(body: str) -> list[str]:
    body = body.strip()
    quoted = re.findall(r"'([^']*)'|\"([^\"]*)\"", body)
    if quoted and re.fullmatch(r"\s*(?:(?:'[^']*'|\"[^\"]*\")\s*,?\s*)+", body):
        return [a or b for a, b in quoted]
    return [item.strip() for item in body.split(",") if item.strip()]


def _consecutive(pairs: list[tuple[str, str]], first: str) -> list[str]:
    """Longest run of labelled items whose labels count up from ``first``."""
    best: list[str] = []
    run: list[str] = []
    expected = first
    for label, text in pairs:
        if label == first:
            run = [text]
            expected = _next_label(first)
        elif label == expected and run:
            run.append(text)
            expected = _next_label(expected)
        else:
            continue
        if len(run) > len(best):
            best = list(run)
    return best


def _next_label(label: str) -> str:
    return str(int(label) + 1) if label.isdigit() else chr(ord(label) + 1)


def parse_choices(prompt: str) -> list[str]:
    """Extract the offered options from a DRAKE-style prompt.

    Formats are tried in this order; the first that yields at least two options wins:

    1. ``Choice list:[opt1, opt2, ...]`` (the last such list in the prompt); items are split on
       commas unless every item is quoted;
    2. COMICS style ``A: text| B: text| C: text``;
    3. lettered lines ``A. text`` / ``A) text`` / ``(A) text`` / ``A: text``, a run counting up
       from ``A``;
    4. lettered options inline on one line, ``A. text B. text ...``;
    5. numbered lines ``1. text`` / ``(1) text``, a run counting up from ``1``;
    6. a bracketed list ``[First image, Second image]`` (the last one with two or more items);
    7. image labels ``Image A:<image> Image B:<image>`` -> ``["Image A", "Image B"]``.

    Parameters
    ----------
    prompt : str
        The prompt text.

    Returns
    -------
    list of str
        The options in prompt order; empty when the prompt offers none (an open-ended task).

    Examples
    --------
    >>> parse_choices("Is it left of the box?\\nChoice list:[True, False]. Your answer is:")
    ['True', 'False']
    >>> parse_choices("Which?\\nA. red\\nB. blue\\nAnswer with the option's letter.")
    ['red', 'blue']
    """
    if not isinstance(prompt, str):
        raise MetricInputError(f"prompt must be a str, got {type(prompt).__name__}")
    lists = _CHOICE_LIST.findall(prompt)
    if lists:
        items = _split_items(lists[-1])
        if len(items) >= 2:
            return items
    for line in prompt.splitlines():
        if "|" in line:
            run = _pipe_options(line)
            if len(run) >= 2:
                return run
    run = _consecutive(_LETTER_LINE.findall(prompt), "A")
    if len(run) >= 2:
        return run
    for line in prompt.splitlines():
        marks = list(_INLINE_LETTER.finditer(line))
        if len(marks) >= 2:
            pairs = [
                (m.group(1), line[m.end() : marks[k + 1].start() if k + 1 < len(marks) else None])
                for k, m in enumerate(marks)
            ]
            run = _consecutive([(lab, t.strip()) for lab, t in pairs], "A")
            if len(run) >= 2:
                return run
    run = _consecutive(_NUMBER_LINE.findall(prompt), "1")
    if len(run) >= 2:
        return run
    for body in reversed(_BRACKET_LIST.findall(prompt)):
        items = _split_items(body)
        if len(items) >= 2 and "<image>" not in body:
            return items
    labels: list[str] = []
    for m in _IMAGE_LABEL.finditer(prompt):
        label = _SPACES.sub(" ", m.group(1))
        label = label[0].upper() + label[1:]
        if label.lower() not in (x.lower() for x in labels):
            labels.append(label)
    return labels if len(labels) >= 2 else []


_PIPE_HEAD = re.compile(r"^.*(?:^|\s)\(?A\)?\s*:\s*(.*)$", re.DOTALL)


def _pipe_options(line: str) -> list[str]:
    """Options of a COMICS-style line ``... A: text| B: text| C: text``."""
    parts = line.split("|")
    head = _PIPE_HEAD.match(parts[0])
    if not head:
        return []
    pairs = [("A", head.group(1).strip())]
    for part in parts[1:]:
        m = _PIPE_ITEM.match(part)
        if not m:
            break
        pairs.append((m.group(1), m.group(2)))
    return _consecutive(pairs, "A")
