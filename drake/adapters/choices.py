"""Find the options a multiple-choice prompt offers, in the wordings the released data uses.

DRAKE and HFLB store a multiple-choice question as one LLaVA human turn; the options live in the
prompt text. The released FedMosaic evaluation reads them from the same places, and so does this
module (written from a description of the formats, not from that code):

``choice-list``
    ``Choice list:[True, False]``, also ``Choice list: [..]``, ``Choice List: [..]`` and
    ``Choice lists: [..]``. Options are separated by ``|`` when one is present, else by commas.
    Options written ``Image A: <image>`` are shortened to ``Image A``; options all wrapped in
    quotes lose the quotes.
``bracket-list``
    A bare ``[a, b, c]`` on a line of its own (``"\\n [a, b]\\n"``).
``lettered``
    ``A. cat`` / ``B. dog`` (or ``(A) cat``, ``A) cat``), one per line or inline; at least two
    options lettered A, B, ... in order. The sample's choices are the letters when the answer is
    a letter, otherwise the option texts.
``image-options``
    ``Image A: <image>, Image B: <image>``: the choices are ``Image A``, ``Image B``, ...
``answer-id``
    World Cuisines VQA: "Print only the answer with a single answer id"; the choices are the
    numbered option ids (``1``..``n``), or ``1``..``5`` when the options are not numbered lines.

:func:`parse_choices` is pure: a prompt in, a :class:`ChoiceList` (or ``None``) out.
:func:`choices_for_answer` then picks the representation (labels or texts) that holds the gold
answer, or returns ``None`` when the answer is not among the options.

Examples
--------
>>> parse_choices("Is it left?\\nChoice list:[True, False]. Your answer is:").options
('True', 'False')
>>> c = parse_choices("Which one?\\nA. a cat\\nB. a dog\\nAnswer with the letter.")
>>> choices_for_answer(c, "B")
['A', 'B']
>>> choices_for_answer(c, "a dog")
['a cat', 'a dog']
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LIST = re.compile(r"Choice\s?lists?\s*:\s*\[(.*?)\]", re.IGNORECASE | re.DOTALL)
_BARE = re.compile(r"\n ?\[([^\[\]\n]+)\]\s*(?:\n|$)")
_LETTER = re.compile(r"(?:(?<=\s)|^)\(?([A-H])[.)]\s+")
_IMAGE_OPT = re.compile(r"Image ([A-H])\s*:")
_IMAGE_HEAD = re.compile(r"^(Image [A-H0-9]+)\b")
_NUMBERED = re.compile(r"(?m)^\s*\(?([1-9][0-9]?)[.)]\s+\S")
_ANSWER_ID = "answer id"


@dataclass(frozen=True)
class ChoiceList:
    """Options found in a prompt.

    Parameters
    ----------
    style : str
        Which wording matched (see the module docstring).
    options : tuple of str
        The option texts, in prompt order.
    labels : tuple of str
        The option labels (``A``, ``B``, ... or ``1``, ``2``, ...) when the style letters or
        numbers them; empty otherwise.
    """

    style: str
    options: tuple[str, ...]
    labels: tuple[str, ...] = ()


def _split_options(body: str) -> list[str]:
    parts = body.split("|") if "|" in body else body.split(",")
    options = [p.strip() for p in parts]
    if options and all(len(o) >= 2 and o[0] == o[-1] and o[0] in "'\"" for o in options):
        options = [o[1:-1].strip() for o in options]
    heads = [_IMAGE_HEAD.match(o) for o in options]
    if options and all(heads):
        options = [h.group(1) for h in heads]
    return [o for o in options if o]


def _lettered(prompt: str) -> ChoiceList | None:
    marks = list(_LETTER.finditer(prompt))
    best: list[re.Match] = []
    for start, mark in enumerate(marks):
        if mark.group(1) != "A":
            continue
        run = [mark]
        for nxt in marks[start + 1:]:
            if ord(nxt.group(1)) == ord(run[-1].group(1)) + 1:
                run.append(nxt)
        if len(run) > len(best):
            best = run
    if len(best) < 2:
        return None
    texts = []
    for k, mark in enumerate(best):
        end = best[k + 1].start() if k + 1 < len(best) else len(prompt)
        text = prompt[mark.end():end]
        if k + 1 == len(best):
            text = text.split("\n", 1)[0]
        texts.append(text.strip().rstrip(",;").strip())
    return ChoiceList("lettered", tuple(texts), tuple(m.group(1) for m in best))


def parse_choices(prompt: str) -> ChoiceList | None:
    """The options ``prompt`` offers, or ``None`` when it offers none in a known wording.

    Wordings are tried in the order of the module docstring; the first that matches wins.
    """
    match = _LIST.search(prompt)
    if match:
        options = _split_options(match.group(1))
        if len(options) >= 2:
            return ChoiceList("choice-list", tuple(options))
    match = _BARE.search(prompt)
    if match:
        options = _split_options(match.group(1))
        if len(options) >= 2:
            return ChoiceList("bracket-list", tuple(options))
    if _ANSWER_ID in prompt.lower():
        ids = [m.group(1) for m in _NUMBERED.finditer(prompt)]
        if len(ids) < 2 or ids != [str(k) for k in range(1, len(ids) + 1)]:
            ids = [str(k) for k in range(1, 6)]
        return ChoiceList("answer-id", tuple(ids), tuple(ids))
    lettered = _lettered(prompt)
    if lettered is not None:
        return lettered
    letters = list(dict.fromkeys(m.group(1) for m in _IMAGE_OPT.finditer(prompt)))
    if len(letters) >= 2:
        options = tuple(f"Image {x}" for x in letters)
        return ChoiceList("image-options", options, tuple(letters))
    return None


def choices_for_answer(found: ChoiceList | None, answer: str) -> list[str] | None:
    """The choice list of a sample whose gold answer is ``answer``.

    Tries, in order: the option texts, the labels (``"B"``), and ``"B. text"`` written out.
    Matching is exact after stripping spaces; a match that differs only in letter case returns
    the list too (the caller decides whether to accept the case difference). ``None`` means the
    answer is not one of the options.
    """
    if found is None:
        return None
    answer = answer.strip()
    candidates = [list(found.options)]
    if found.labels:
        candidates.append(list(found.labels))
        candidates.append([f"{lab}. {opt}" for lab, opt in zip(found.labels, found.options)])
    for choices in candidates:
        if answer in choices:
            return choices
    folded = answer.casefold()
    for choices in candidates:
        if sum(c.casefold() == folded for c in choices) == 1:
            return choices
    return None
