"""Prompt formats, small drawing-free helpers shared by the generators, and the word tokenizer.

The answer formats follow the real DRAKE tasks' wording, so that a model and an option matcher
meet on drake-synth exactly what they will meet on real data:

* choice list (DEMON style): ``"Choice list:[True, False]. Your answer is:"``, gold = option text;
* letters (SEED-Bench style): ``"A. ...\\nB. ...\\nAnswer with the option's letter from the
  given choices directly."``, gold = the letter;
* answer ids (WCVQA style): ``"1. ...\\n...\\nPrint only the answer with a single answer id
  (1,2,3,4,5)."``, gold = the id;
* labelled images: ``"Image A:<image> Image B:<image>"``.

Words are what :func:`tokenize` returns: ``<image>``, runs of ASCII letters, runs of digits, and
every other non-space character on its own (punctuation).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")

IMAGE = "<image>"
TRUE_FALSE = ("True", "False")
YES_NO = ("Yes", "No")
LETTERS = ("A", "B", "C", "D", "E", "F", "G", "H")
ANSWER_IDS = ("1", "2", "3", "4", "5")
LETTER_SUFFIX = "Answer with the option's letter from the given choices directly."
ANSWER_ID_SUFFIX = "Print only the answer with a single answer id (1,2,3,4,5)."
CHOICE_PREFIX = "Choice list:["
CHOICE_SUFFIX = "]. Your answer is:"

_TOKEN = re.compile(r"<image>|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into words: ``<image>``, letter runs, digit runs, single punctuation marks."""
    return _TOKEN.findall(text)


def literal_words(template: str) -> set[str]:
    """Words of the literal parts of a ``str.format`` template (the fields are left out)."""
    words: set[str] = set()
    for literal, _field, _spec, _conv in string.Formatter().parse(template):
        words.update(tokenize(literal))
    return words


# ---------------------------------------------------------------------------------------------
# answer formats


def choice_list(options: Sequence[str]) -> str:
    """``"Choice list:[a, b]. Your answer is:"``."""
    return CHOICE_PREFIX + ", ".join(options) + CHOICE_SUFFIX


def letter_options(options: Sequence[str]) -> str:
    """Lettered options, one a line, then the letter instruction."""
    lines = [f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options)]
    return "\n".join([*lines, LETTER_SUFFIX])


def id_options(options: Sequence[str]) -> str:
    """Five numbered options, one a line, then the answer-id instruction."""
    if len(options) != len(ANSWER_IDS):
        raise ValueError(f"answer-id questions need 5 options, got {len(options)}")
    lines = [f"{ANSWER_IDS[i]}. {opt}" for i, opt in enumerate(options)]
    return "\n".join([*lines, ANSWER_ID_SUFFIX])


def labelled_images(labels: Sequence[str], sep: str = " ") -> str:
    """``"Image A:<image> Image B:<image>"`` for ``labels`` ("Image A", "Image B")."""
    return sep.join(f"{lab}:{IMAGE}" for lab in labels)


def image_names(n: int, style: str = "letter") -> tuple[str, ...]:
    """Image names ``Image A, Image B, ...`` (``"letter"``) or ``Image 1, ...`` (``"number"``)."""
    if style == "letter":
        return tuple(f"Image {LETTERS[i]}" for i in range(n))
    return tuple(f"Image {i + 1}" for i in range(n))


ORDINAL_IMAGES = ("First image", "Second image", "Third image")

FORMAT_TEXTS = (
    CHOICE_PREFIX,
    CHOICE_SUFFIX,
    LETTER_SUFFIX,
    ANSWER_ID_SUFFIX,
    ", ",
    ". ",
    *TRUE_FALSE,
    *YES_NO,
    *ORDINAL_IMAGES,
    "Image",
)
"""The fixed wording of the answer formats (part of :func:`drake.synth.vocabulary`)."""


# ---------------------------------------------------------------------------------------------
# words


def plural(shape: str) -> str:
    """``"cross"`` -> ``"crosses"``, else add ``s``."""
    return shape + "es" if shape.endswith("s") else shape + "s"


def article(phrase: str) -> str:
    """``"an"`` before a vowel sound, else ``"a"``."""
    return "an" if phrase[:1] in "aeiou" else "a"


def with_article(phrase: str) -> str:
    """``"a red star"``, ``"an orange circle"``."""
    return f"{article(phrase)} {phrase}"


def join_and(parts: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def capitalise(text: str) -> str:
    """Upper-case the first character only."""
    return text[:1].upper() + text[1:]


# ---------------------------------------------------------------------------------------------
# random helpers (every draw from the passed generator)


def coin(rng: np.random.Generator, p: float = 0.5) -> bool:
    """True with probability ``p``."""
    return bool(rng.random() < p)


def pick(rng: np.random.Generator, seq: Sequence[T]) -> T:
    """One element of ``seq``, uniformly."""
    return seq[int(rng.integers(len(seq)))]


def sample(rng: np.random.Generator, seq: Sequence[T], k: int) -> list[T]:
    """``k`` distinct elements of ``seq`` in random order."""
    if k > len(seq):
        raise ValueError(f"cannot draw {k} distinct items from {len(seq)}")
    return [seq[int(i)] for i in rng.choice(len(seq), size=k, replace=False)]


def shuffled(rng: np.random.Generator, seq: Iterable[T]) -> list[T]:
    """A random permutation of ``seq`` as a list."""
    items = list(seq)
    return [items[int(i)] for i in rng.permutation(len(items))]


def insert_gold(rng: np.random.Generator, gold: T, others: Sequence[T]) -> tuple[list[T], int]:
    """``others`` shuffled with ``gold`` inserted at a uniform position; returns (options, pos)."""
    opts = shuffled(rng, others)
    pos = int(rng.integers(len(opts) + 1))
    opts.insert(pos, gold)
    return opts, pos


def options_first(
    rng: np.random.Generator,
    pool: Sequence[T],
    k: int,
    near_groups: Sequence[Sequence[T]] = (),
) -> tuple[list[T], int]:
    """Draw the option set *before* the gold answer, then the gold uniformly from it.

    With ``near_groups`` (groups of mutually close items, e.g. opposite motions or neighbouring
    hues) the options are the union of random whole groups, topped up from ``pool``; without,
    ``k`` random items of ``pool``. Because the set never depends on the gold, the options
    alone cannot reveal it (no text-only shortcut). Returns (shuffled options, gold position).
    """
    items: list[T] = []
    for group in shuffled(rng, near_groups):
        if len(items) + len(group) <= k:
            items += [x for x in group if x not in items]
        if len(items) == k:
            break
    items += sample(rng, [x for x in pool if x not in items], k - len(items))
    return shuffled(rng, items), int(rng.integers(k))


def window_options(
    rng: np.random.Generator, lo: int, hi: int, k: int
) -> tuple[list[str], int, int]:
    """Number options drawn before the gold: ``k`` consecutive integers starting uniformly in
    ``[lo, hi - k + 1]`` (at ``lo`` if the range is shorter than ``k``), the gold uniform among
    them. Returns (options as strings, gold position, gold value)."""
    start = lo if hi - lo + 1 < k else int(rng.integers(lo, hi - k + 2))
    pos = int(rng.integers(k))
    return [str(v) for v in range(start, start + k)], pos, start + pos
