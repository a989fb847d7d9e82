"""Find the options a multiple-choice prompt offers, in the wordings the released data uses.

DRAKE and HFLB store a multiple-choice question as one LLaVA human turn; the options live in the
prompt text. The released FedMosaic evaluation reads them from the same places, and so does this
module (written from a description of the formats, not from that code):

``choice-list``
    ``Choice list:[True, False]``, also ``Choice list: [..]``, ``Choice List: [..]`` and
    ``Choice lists: [..]``; the list ends at its matching bracket. Its body is read as:

    * a Python list written with ``str()`` (``['red', 'blue']``, HFLB COCOQA, AQUA, GQA), also
      nested one level (``[['no', 'yes']]``, HFLB Abstract): the literal's strings;
    * lettered options separated by ``|`` (``A: text| B: text``, COMICS_Dialogue): the texts,
      labelled ``A``, ``B``, ...;
    * otherwise options separated by ``|`` when one is present, else by commas. Commas inside
      options are told apart from separators where the data lets them be: when only some
      commas are followed by a space, the others separate (IRFL-3 joins its phrases with ``,``
      and phrases hold ``, ``), unless they sit between digits (``1,000``); and when the gold
      answer is given and holds ``, ``, the pieces that spell it are joined back into one
      option (VizWiz-Original, Bongard-OpenWorld captions, TQA). Other options holding ``, ``
      stay split: nothing in the prompt tells them apart.

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

:func:`parse_choices` is pure: a prompt (and, at build time, the gold answer) in, a
:class:`ChoiceList` (or ``None``) out.
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

import ast
import re
from dataclasses import dataclass

_LIST_HEAD = re.compile(r"Choice\s?lists?\s*:\s*\[", re.IGNORECASE)
_LIST = re.compile(r"Choice\s?lists?\s*:\s*\[(.*?)\]", re.IGNORECASE | re.DOTALL)
_PIPE_LABEL = re.compile(r"^\s*([A-Z])\s*:\s*(.*?)\s*$", re.DOTALL)
_BARE_COMMA = re.compile(r",(?!\s)")
_DIGIT_COMMA = re.compile(r"\d,\d")
MAX_LITERAL = 20_000  # characters of a list body read as a Python literal
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


def _list_body(prompt: str) -> str | None:
    """The body of the first ``Choice list:[...]``, up to its matching bracket (so a nested
    Python list stays whole); the first ``]`` when the brackets never balance."""
    head = _LIST_HEAD.search(prompt)
    if head is None:
        return None
    depth = 1
    for at in range(head.end(), len(prompt)):
        depth += {"[": 1, "]": -1}.get(prompt[at], 0)
        if depth == 0:
            return prompt[head.end():at]
    match = _LIST.search(prompt, head.start())
    return match.group(1) if match else None


def _literal(body: str) -> list[str] | None:
    """The strings of a body written as a Python list (``'a', 'b'`` or ``['a', 'b']``)."""
    text = body.strip()
    if not text or text[0] not in "['\"" or len(text) > MAX_LITERAL:
        return None
    try:
        value = ast.literal_eval(f"[{text}]")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if len(value) == 1 and isinstance(value[0], (list, tuple)):
        value = list(value[0])
    if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return None
    return [str(v).strip() for v in value]


def _pipe_labelled(body: str) -> tuple[list[str], list[str]] | None:
    """``A: text| B: text| ...``: (texts, labels) when every part is lettered A, B, ... in order."""
    parts = [_PIPE_LABEL.match(p) for p in body.split("|")]
    if len(parts) < 2 or not all(parts):
        return None
    labels = [m.group(1) for m in parts]
    if labels != [chr(ord("A") + k) for k in range(len(labels))]:
        return None
    return [m.group(2) for m in parts], labels


def _comma_split(body: str, answer: str | None) -> list[str]:
    """Options separated by commas, commas inside options kept where the data tells them apart
    (see the module docstring)."""
    bare = _BARE_COMMA.findall(body)
    if bare and len(bare) < body.count(",") and not _DIGIT_COMMA.search(body):
        parts = _BARE_COMMA.split(body)  # ``a, b,c`` -> ``a, b`` and ``c``
    elif _DIGIT_COMMA.search(body) and ", " in body:
        parts = body.split(", ")  # thousands separators stay inside their numbers
    else:
        parts = body.split(",")
    parts = [p.strip() for p in parts]
    want = (answer or "").strip()
    if want and "," in want and want not in parts:
        pieces = [p.strip() for p in want.split(",")]
        for start in range(len(parts) - len(pieces) + 1):
            if parts[start:start + len(pieces)] == pieces:
                return parts[:start] + [want] + parts[start + len(pieces):]
    return parts


def _split_options(body: str, answer: str | None = None) -> tuple[list[str], list[str]]:
    """(options, labels) of a list body; labels only for ``A: text| B: text``."""
    labels: list[str] = []
    literal = _literal(body)
    if literal is not None:
        options = literal
    elif (lettered := _pipe_labelled(body)) is not None:
        options, labels = lettered
    elif "|" in body:
        options = [p.strip() for p in body.split("|")]
    else:
        options = _comma_split(body, answer)
    if options and all(len(o) >= 2 and o[0] == o[-1] and o[0] in "'\"" for o in options):
        options = [o[1:-1].strip() for o in options]
    heads = [_IMAGE_HEAD.match(o) for o in options]
    if options and all(heads):
        options = [h.group(1) for h in heads]
    if labels:
        return options, labels
    return [o for o in options if o], labels


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


def parse_choices(prompt: str, answer: str | None = None) -> ChoiceList | None:
    """The options ``prompt`` offers, or ``None`` when it offers none in a known wording.

    Wordings are tried in the order of the module docstring; the first that matches wins.
    ``answer`` (the gold answer, known at build time) only tells commas inside an option from
    separators in a comma-separated list.
    """
    body = _list_body(prompt)
    if body is not None:
        options, labels = _split_options(body, answer)
        if len(options) >= 2:
            return ChoiceList("choice-list", tuple(options), tuple(labels))
    match = _BARE.search(prompt)
    if match:
        options, _ = _split_options(match.group(1), answer)
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
