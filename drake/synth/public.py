"""drake-synth's public split: the generic questions the tiny models are pretrained on.

The public split plays the part of LLaVA's instruction data: it teaches the primitives every
client task composes (reading an object's colour, shape, fill, size and state, finding the object
a question names, counting, placing objects on the grid and relative to each other, telling the
background and the photo quality, reading bar charts and number tags, and doing all of this
across several pictures) and the answer formats the client tasks use, and never a client task's
question.

Three tasks:

* ``synth-public-open``: one picture, one of :data:`SINGLE_FAMILIES`, asked "Tell me ..." with a
  short open answer (a word, a number, a picture number);
* ``synth-public-multi``: two to four pictures, one of :data:`MULTI_FAMILIES`, likewise;
* ``synth-public-formats``: the same families (but ``describe``) worded as questions ("Which
  colour does the star have?") in one of the client tasks' answer formats (:data:`FORMATS`:
  choice list, lettered options, answer ids, a proposed answer to judge True/False, Yes/No or
  Positive/Negative, or a single word), with pictures labelled as the client tasks label them
  ("Image B", "Second image") and picture answers given as those labels. Without it the models
  never produce the client tasks' answer words, and a LoRA spends its budget on the format.

The family is drawn uniformly. Scenes that a question looks objects up in hold pairwise distinct
shapes and colours, so "the triangle" or "the red shape" names exactly one object. The ``objects``
knob caps every family's object count (``multi_count`` caps the other shapes and adds the
counted one on top), which is how pretraining draws an easier early pool.
Each sample's ``meta`` records the family (and the format) and the scenes (``meta["scenes"]``),
which is all the vision tower's pretraining targets are made of (:mod:`drake.models.vision`).
No public question repeats a client or unseen task's question template
(``tests/synth/test_synth_samples.py`` checks this with colours, shapes and numbers masked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

import numpy as np

from drake.synth.common import Ctx, Draft, random_objects
from drake.synth.relation import DEMON_CHOOSE
from drake.synth.scene import (
    COLOURS,
    DOMAINS,
    FILLS,
    POSITIONS,
    RADIUS,
    SHAPES,
    SIZES,
    Obj,
    Scene,
    arrange,
)
from drake.synth.text import (
    IMAGE,
    LETTERS,
    TRUE_FALSE,
    YES_NO,
    choice_list,
    coin,
    letter_options,
    pick,
    plural,
    sample,
    shuffled,
)

QUALITY_WORDS = MappingProxyType({
    "": "clean", "blur": "blurry", "noise": "grainy", "dark": "dim", "bright": "washed",
    "pixelate": "blocky", "covered": "covered",
})
"""Answer of the quality family for each degradation (``covered``: a grey box hides a part)."""
DEGRADATION_STRENGTHS = MappingProxyType({
    "blur": (1.0, 2.5), "noise": (20.0, 50.0), "dark": (0.4, 0.75), "bright": (0.4, 0.75),
    "pixelate": (3.0, 4.99)})
"""Strength range of each degradation a public picture may show (besides a covering box)."""
STATE_WORDS = MappingProxyType({"": "whole", "broken": "cracked", "faded": "pale"})
SIDE_WORDS = ("left", "right", "over", "under")

_T = MappingProxyType({
    "describe": "Tell me everything you see.",
    "describe_item": "{size} {colour} {fill} {shape} at the {position}",
    "colour": "Tell me the colour of the {shape}.",
    "shape": "Tell me the shape that is {colour}.",
    "where": "Tell me where the {colour} {shape} sits.",
    "what_at": "Tell me what sits at the {position}.",
    "nothing": "nothing",
    "fill": "Tell me how the {colour} {shape} is drawn.",
    "size": "Tell me the size of the {colour} {shape}.",
    "state": "Tell me the condition of the {colour} {shape}.",
    "count_all": "Tell me the number of shapes.",
    "count_colour": "Tell me the number of {colour} shapes.",
    "count_shape": "Tell me the number of {shapes}.",
    "exists": "Tell me if a {colour} {shape} is present.",
    "relation": "Tell me the side of the {b} where the {a} is.",
    "background": "Tell me the kind of background.",
    "quality": "Tell me how the photo looks.",
    "bar_height": "Tell me the height of the {colour} bar.",
    "bar_top": "Tell me the colour of the highest bar.",
    "tag_of": "Tell me the tag of the {colour} {shape}.",
    "tag_shape": "Tell me the shape with tag {tag}.",
    "multi_which": "Tell me the number of the picture with the {colour} {shape}.",
    "multi_count": "Tell me in how many pictures a {shape} appears.",
    "multi_colour": "Tell me the colour of the {shape} in picture {k}.",
    "multi_number": "Tell me the number of shapes in picture {k}.",
    "multi_more": "Tell me which picture holds more shapes.",
    "equal": "equal",
    "multi_same": "Tell me if the two pictures match.",
    "picture": "Picture {k}: {image}",
    "photo": "Photo {k}: {image}",
    "yes": "yes",
    "no": "no",
})


_Q = MappingProxyType({**_T, **{
    "colour": "Which colour does the {shape} have?",
    "shape": "Which shape is {colour}?",
    "where": "In which part of the image is the {colour} {shape}?",
    "what_at": "What is at the {position}?",
    "fill": "How is the {colour} {shape} drawn?",
    "size": "How big is the {colour} {shape}?",
    "state": "What condition is the {colour} {shape} in?",
    "count_all": "How many shapes does the image show?",
    "count_colour": "How many {colour} shapes does the image show?",
    "count_shape": "How many {shapes} does the image show?",
    "exists": "Does the image show a {colour} {shape}?",
    "relation": "On which side of the {b} is the {a}?",
    "background": "What kind of background does the image have?",
    "quality": "How does the photo look?",
    "bar_height": "How high is the {colour} bar?",
    "bar_top": "Which colour has the highest bar?",
    "tag_of": "Which tag does the {colour} {shape} carry?",
    "tag_shape": "Which shape carries tag {tag}?",
    "multi_which": "Which image holds the {colour} {shape}?",
    "multi_count": "In how many images does a {shape} appear?",
    "multi_colour": "Which colour does the {shape} in image {k} have?",
    "multi_number": "How many shapes does image {k} show?",
    "multi_more": "Which image holds more shapes?",
    "multi_same": "Do the two images match?",
}})
"""The same public questions asked as questions (``synth-public-formats``)."""


# ---------------------------------------------------------------------------------------------
# scenes


def distinct_objects(ctx: Ctx, low: int, high: int) -> list[Obj]:
    """Between ``low`` and ``high`` objects (capped by the ``objects`` knob), pairwise distinct
    in shape and in colour, placed in random grid cells."""
    rng = ctx.rng
    n = min(ctx.n_objects(low, high), len(SHAPES))
    shapes, colours = sample(rng, SHAPES, n), sample(rng, COLOURS, n)
    objs = [Obj(s, c, pick(rng, SIZES), pick(rng, FILLS)) for s, c in zip(shapes, colours)]
    if n and coin(rng, 0.2):
        return scattered(ctx, objs)
    return list(arrange(rng, objs))


def scattered(ctx: Ctx, objs: Sequence[Obj]) -> list[Obj]:
    """``objs`` at free (off-grid) positions without overlaps; objects that find no room after
    a few tries are dropped, so at least the first one always stays."""
    rng = ctx.rng
    placed: list[Obj] = []
    for obj in objs:
        r = RADIUS[obj.size] * float(rng.uniform(0.85, 1.25))
        for _ in range(12):
            x, y = (float(v) for v in rng.uniform(r + 0.02, 1.0 - r - 0.02, size=2))
            if all((x - p.x) ** 2 + (y - p.y) ** 2 > (r + p.r + 0.02) ** 2 for p in placed):
                placed.append(replace(obj, x=x, y=y, r=r))
                break
    return placed


def _degraded(ctx: Ctx, p: float) -> tuple[str, tuple[tuple[str, float], ...], tuple]:
    """With probability ``p`` one degradation or a covering box: (kind, effects, occluders)."""
    rng = ctx.rng
    if not coin(rng, p):
        return "", (), ()
    kind = pick(rng, ("blur", "noise", "dark", "bright", "pixelate", "covered"))
    if kind == "covered":
        x0, y0 = (float(v) for v in rng.uniform(0.05, 0.55, size=2))
        return kind, (), ((x0, y0, x0 + 0.4, y0 + 0.4),)
    return kind, degradation_effect(rng, kind), ()


def degradation_effect(rng: np.random.Generator, kind: str) -> tuple[tuple[str, float], ...]:
    """One ``kind`` of :data:`DEGRADATION_STRENGTHS` at a strength drawn from its range (a
    whole factor for ``pixelate``), as a :class:`~drake.synth.scene.Scene`'s ``effects``."""
    value = float(rng.uniform(*DEGRADATION_STRENGTHS[kind]))
    return ((kind, float(int(value)) if kind == "pixelate" else value),)


def _one(ctx: Ctx, objs: Sequence[Obj], question: str, answer: str, family: str, *,
         effects: tuple = (), occluders: tuple = (), bars: tuple = ()) -> Draft:
    scene = Scene(tuple(objs), ctx.domain(), effects, occluders, bars)
    return Draft([scene], f"{IMAGE}\n{question}", answer, (), meta={"family": family})


def _named(o: Obj) -> dict[str, str]:
    return {"colour": o.colour, "shape": o.shape}


# ---------------------------------------------------------------------------------------------
# single-picture families


def describe(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = distinct_objects(ctx, 1, 5)
    items = [t["describe_item"].format(size=o.size, colour=o.colour, fill=o.fill, shape=o.shape,
                                        position=POSITIONS[o.cell()])
             for o in sorted(objs, key=lambda o: (o.cell(), o.x))]
    return _one(ctx, objs, t["describe"], ", ".join(items) + ".", "describe")


def colour(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = distinct_objects(ctx, 1, 4)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, t["colour"].format(shape=o.shape), o.colour, "colour")


def shape(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = distinct_objects(ctx, 1, 4)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, t["shape"].format(colour=o.colour), o.shape, "shape")


def where(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = distinct_objects(ctx, 1, 5)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, t["where"].format(**_named(o)), POSITIONS[o.cell()], "where")


def what_at(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = list(arrange(ctx.rng, random_objects(ctx.rng, ctx.n_objects(1, 5))))
    cell = int(ctx.rng.integers(len(POSITIONS)))
    there = [o for o in objs if o.cell() == cell]
    answer = f"{there[0].colour} {there[0].shape}" if there else t["nothing"]
    return _one(ctx, objs, t["what_at"].format(position=POSITIONS[cell]), answer, "what_at")


def fill(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = distinct_objects(ctx, 1, 3)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, t["fill"].format(**_named(o)), o.fill, "fill")


def size(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = distinct_objects(ctx, 1, 3)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, t["size"].format(**_named(o)), o.size, "size")


def state(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    objs = [replace(o, state=pick(rng, ("", "broken", "faded"))) for o in distinct_objects(ctx, 1, 3)]
    o = pick(rng, objs)
    return _one(ctx, objs, t["state"].format(**_named(o)), STATE_WORDS[o.state], "state")


def count(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    kind = pick(rng, ("all", "colour", "shape"))
    if kind == "all":
        objs = list(arrange(rng, random_objects(rng, ctx.n_objects(0, 9))))
        return _one(ctx, objs, t["count_all"], str(len(objs)), "count")
    n = ctx.n_objects(0, 5)
    rest = ctx.n_objects(0, 9 - n)
    if kind == "colour":
        c = pick(rng, COLOURS)
        objs = [Obj(pick(rng, SHAPES), c, pick(rng, SIZES), pick(rng, FILLS)) for _ in range(n)]
        objs += random_objects(rng, rest, colours=[x for x in COLOURS if x != c])
        question = t["count_colour"].format(colour=c)
    else:
        s = pick(rng, SHAPES)
        objs = [Obj(s, pick(rng, COLOURS), pick(rng, SIZES), pick(rng, FILLS)) for _ in range(n)]
        objs += random_objects(rng, rest, shapes=[x for x in SHAPES if x != s])
        question = t["count_shape"].format(shapes=plural(s))
    return _one(ctx, list(arrange(rng, shuffled(rng, objs))), question, str(n), "count")


def exists(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    objs = distinct_objects(ctx, 1, 5)
    o = pick(rng, objs)
    if coin(rng):
        return _one(ctx, objs, t["exists"].format(**_named(o)), t["yes"], "exists")
    present = {x.key() for x in objs}
    options = [(s, c) for s in SHAPES for c in COLOURS if (s, c) not in present
               and (s == o.shape or c == o.colour)]
    s, c = pick(rng, options)
    return _one(ctx, objs, t["exists"].format(colour=c, shape=s), t["no"], "exists")


def relation(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    """Where one object is relative to another in the same grid row or column."""
    rng = ctx.rng
    objs = list(arrange(rng, distinct_objects(ctx, 2, 5)))
    pairs = [(a, b) for a in objs for b in objs if a is not b
             and (a.cell() // 3 == b.cell() // 3 or a.cell() % 3 == b.cell() % 3)]
    if not pairs:  # one object only (the knob's cap): fall back to placing it
        return where(ctx, t)
    a, b = pick(rng, pairs)
    if a.cell() // 3 == b.cell() // 3:
        side = SIDE_WORDS[0] if a.cell() % 3 < b.cell() % 3 else SIDE_WORDS[1]
    else:
        side = SIDE_WORDS[2] if a.cell() // 3 < b.cell() // 3 else SIDE_WORDS[3]
    question = t["relation"].format(a=f"{a.colour} {a.shape}", b=f"{b.colour} {b.shape}")
    return _one(ctx, objs, question, side, "relation")


def background(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    scene = Scene(tuple(arrange(ctx.rng, random_objects(ctx.rng, ctx.n_objects(0, 3)))),
                  ctx.domain())
    return Draft([scene], f"{IMAGE}\n{t['background']}", scene.domain, (),
                 meta={"family": "background"})


def quality(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    objs = list(arrange(ctx.rng, random_objects(ctx.rng, ctx.n_objects(1, 4))))
    kind, effects, occluders = _degraded(ctx, 6 / 7)
    return _one(ctx, objs, t["quality"], QUALITY_WORDS[kind], "quality", effects=effects,
                occluders=occluders)


def bars(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    colours = sample(rng, COLOURS, int(rng.integers(2, 6)))
    values = [int(v) for v in rng.choice(10, size=len(colours), replace=False) + 1]
    chart = tuple(zip(colours, values))
    if coin(rng):
        c, v = pick(rng, chart)
        question, answer = t["bar_height"].format(colour=c), str(v)
    else:
        question, answer = t["bar_top"], colours[values.index(max(values))]
    return _one(ctx, (), question, answer, "bars", bars=chart)


def tags(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    objs = distinct_objects(ctx, 2, 4)
    objs = [replace(o, size="large", r=RADIUS["large"], label=str(t))
            for o, t in zip(arrange(rng, objs), sample(rng, range(1, 10), len(objs)))]
    o = pick(rng, objs)
    if coin(rng):
        question, answer = t["tag_of"].format(**_named(o)), o.label
    else:
        question, answer = t["tag_shape"].format(tag=o.label), o.shape
    return _one(ctx, objs, question, answer, "tags")


# ---------------------------------------------------------------------------------------------
# several pictures


def _pictures(ctx: Ctx, scenes: Sequence[Scene], question: str, answer: str, family: str
              ) -> Draft:
    style = pick(ctx.rng, ("picture", "photo", "plain"))
    lines = [IMAGE if style == "plain" else _T[style].format(k=k + 1, image=IMAGE)
             for k in range(len(scenes))]
    return Draft(list(scenes), "\n".join([*lines, question]), answer, (), meta={"family": family})


def _picture_count(ctx: Ctx) -> int:
    return int(ctx.rng.integers(2, 5))


def multi_which(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    n = _picture_count(ctx)
    target = random_objects(rng, 1)[0]
    k = int(rng.integers(n))
    scenes = []
    for i in range(n):
        objs = random_objects(rng, ctx.n_objects(1, 3), taken=[target.key()])
        if i == k:
            objs[-1] = target
        scenes.append(Scene(arrange(rng, objs), ctx.domain()))
    return _pictures(ctx, scenes, t["multi_which"].format(**_named(target)), str(k + 1),
                     "multi_which")


def multi_count(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    s = pick(rng, SHAPES)
    has = [coin(rng) for _ in range(_picture_count(ctx))]
    scenes = []
    for h in has:
        objs = random_objects(rng, ctx.n_objects(0, 2), shapes=[x for x in SHAPES if x != s])
        if h:
            objs.append(Obj(s, pick(rng, COLOURS), pick(rng, SIZES), pick(rng, FILLS)))
        scenes.append(Scene(arrange(rng, shuffled(rng, objs)), ctx.domain()))
    return _pictures(ctx, scenes, t["multi_count"].format(shape=s), str(sum(has)),
                     "multi_count")


def multi_attr(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    scenes = [Scene(tuple(distinct_objects(ctx, 1, 3)), ctx.domain())
              for _ in range(_picture_count(ctx))]
    k = int(rng.integers(len(scenes)))
    if coin(rng):
        o = pick(rng, scenes[k].objects)
        question, answer = t["multi_colour"].format(shape=o.shape, k=k + 1), o.colour
    else:
        question, answer = t["multi_number"].format(k=k + 1), str(len(scenes[k].objects))
    return _pictures(ctx, scenes, question, answer, "multi_attr")


def multi_more(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    counts = [ctx.n_objects(0, 8) for _ in range(2)]
    scenes = [Scene(arrange(rng, random_objects(rng, m)), ctx.domain()) for m in counts]
    answer = "1" if counts[0] > counts[1] else "2" if counts[1] > counts[0] else t["equal"]
    return _pictures(ctx, scenes, t["multi_more"], answer, "multi_more")


def multi_same(ctx: Ctx, t: Mapping[str, str] = _T) -> Draft:
    rng = ctx.rng
    objs = distinct_objects(ctx, 1, 3)
    domain = ctx.domain()
    other = list(objs)
    same = coin(rng)
    if not same:
        i = int(rng.integers(len(objs)))
        kind = pick(rng, ("colour", "shape", "fill", "drop"))
        if kind == "drop":
            other.pop(i)
        else:
            pool = {"colour": COLOURS, "shape": SHAPES, "fill": FILLS}[kind]
            other[i] = replace(objs[i], **{kind: pick(rng, [v for v in pool
                                                             if v != getattr(objs[i], kind)])})
    scenes = [Scene(tuple(objs), domain), Scene(tuple(other), domain)]
    return _pictures(ctx, scenes, t["multi_same"], t["yes"] if same else t["no"], "multi_same")


SINGLE_FAMILIES: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType({
    f.__name__: f for f in (describe, colour, shape, where, what_at, fill, size, state, count,
                            exists, relation, background, quality, bars, tags)})
MULTI_FAMILIES: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType({
    f.__name__: f for f in (multi_which, multi_count, multi_attr, multi_more, multi_same)})
FORMAT_FAMILIES: Mapping[str, Callable[..., Draft]] = MappingProxyType({
    name: f for name, f in {**SINGLE_FAMILIES, **MULTI_FAMILIES}.items() if name != "describe"})


# ---------------------------------------------------------------------------------------------
# the same questions in the answer formats of the client tasks

FORMATS = ("choice", "letter", "id", "verdict", "open")
"""Answer formats of ``synth-public-formats``: a choice list (gold: the option), lettered
options (gold: the letter), numbered options (gold: the id), a proposed answer to judge (gold:
a verdict word), or a single word or number."""
VERDICTS = (TRUE_FALSE, YES_NO, ("Positive", "Negative"))
PICTURE_LABELS = ("number", "letter", "ordinal", "plain")
ORDINALS = ("first", "second", "third", "fourth")
#: Families whose answer is a picture number (besides "equal").
PICTURE_ANSWERS = ("multi_which", "multi_more")
#: Extra drafts of the same family read for distractor answers.
DISTRACTOR_DRAWS = 8

_F = MappingProxyType({
    "question": "Question: {question}",
    "choose": DEMON_CHOOSE,
    "id_suffix": "Print only the answer with a single answer id ({ids}).",
    "proposed": "Proposed answer: {answer}.",
    "judge": "Is the proposed answer right?",
    "statement": "Statement: the answer is {answer}.",
    "decide": "Decide whether the statement is true.",
    "judge_positive": "Answer Positive if it is right and Negative if it is not.",
    "open": "Answer the question using a single word or number.",
    "number": "Image {k}:{image}",
    "letter": "Image {k}:{image}",
    "ordinal": "The {k} image: {image}",
})


def _picture_label(style: str, k: int) -> tuple[str, str]:
    """(prompt line, answer text) of picture ``k`` (0-based) under a labelling ``style``."""
    if style == "number":
        return _F["number"].format(k=k + 1, image=IMAGE), f"Image {k + 1}"
    if style == "letter":
        return _F["letter"].format(k=LETTERS[k], image=IMAGE), f"Image {LETTERS[k]}"
    if style == "ordinal":
        return (_F["ordinal"].format(k=ORDINALS[k], image=IMAGE),
                f"{ORDINALS[k].capitalize()} image")
    return IMAGE, str(k + 1)


def _options(ctx: Ctx, family: Callable[..., Draft], draft: Draft, answer: str,
             labels: Sequence[str]) -> list[str]:
    """The gold answer and up to four distractors, in display order.

    Picture-number answers choose among the pictures' labels; every other family borrows the
    answers of a few more drafts of itself that are numbers exactly when the gold answer is (so
    a distractor is an answer the same question could get)."""
    rng, name = ctx.rng, draft.meta["family"]
    if name in PICTURE_ANSWERS:
        pool = [*labels, *([_T["equal"]] if name == "multi_more" else [])]
    else:
        pool = [answer]
        for _ in range(DISTRACTOR_DRAWS):
            other = family(ctx, _Q)
            if (other.meta["family"] == name and other.answer not in pool
                    and other.answer.isdigit() == answer.isdigit()):
                pool.append(other.answer)
    others = [a for a in pool if a != answer]
    keep = min(len(others), int(rng.integers(1, 5)))
    options = [answer, *sample(rng, others, keep)]
    if all(o.isdigit() for o in options):
        return sorted(options, key=int)
    return shuffled(rng, options)


def public_formats(ctx: Ctx) -> Draft:
    """synth-public-formats: a public question of any family but ``describe``, on one to four
    pictures, in one of :data:`FORMATS`; several pictures are labelled by number, letter,
    ordinal or not at all, and a picture answer is that label."""
    rng = ctx.rng
    family = pick(rng, tuple(FORMAT_FAMILIES.values()))
    draft = family(ctx, _Q)
    name = draft.meta["family"]
    question = draft.prompt.rsplit("\n", 1)[-1]
    n = len(draft.scenes)
    style = ("plain" if n == 1 else
             pick(rng, ("number", "plain") if name == "multi_attr" else PICTURE_LABELS))
    lines, labels = zip(*(_picture_label(style, k) for k in range(n)))
    answer = draft.answer
    if name in PICTURE_ANSWERS and answer.isdigit():
        answer = labels[int(answer) - 1]
    options = _options(ctx, family, draft, answer, labels)
    fmt = pick(rng, FORMATS) if len(options) > 1 else "open"  # no distractor: ask it open
    asked = _F["question"].format(question=question)
    if fmt == "open":
        text, gold = f"{asked}\n{_F['open']}", answer
    else:
        if fmt == "choice":
            text, gold = f"{asked} {_F['choose']}\n{choice_list(options)}", answer
        elif fmt == "letter":
            text, gold = f"{asked}\n{letter_options(options)}", LETTERS[options.index(answer)]
        elif fmt == "id":
            ids = [str(i + 1) for i in range(len(options))]
            numbered = [f"{i}. {o}" for i, o in zip(ids, options)]
            text = "\n".join([asked, *numbered, _F["id_suffix"].format(ids=",".join(ids))])
            gold = ids[options.index(answer)]
        else:
            proposed = answer if coin(rng) else pick(rng, [o for o in options if o != answer])
            verdict = pick(rng, VERDICTS)
            claim, judge = pick(rng, (("proposed", "judge"), ("statement", "decide")))
            if verdict[0] == "Positive":
                judge = "judge_positive"
            text = "\n".join([asked, _F[claim].format(answer=proposed),
                              f"{_F[judge]}\n{choice_list(verdict)}"])
            gold = verdict[0] if proposed == answer else verdict[1]
    meta = {"family": name, "format": fmt}
    return Draft(list(draft.scenes), "\n".join([*lines, text]), gold, (), meta=meta)


def public_open(ctx: Ctx) -> Draft:
    """synth-public-open: one picture, a question of a uniformly drawn single-picture family."""
    return pick(ctx.rng, tuple(SINGLE_FAMILIES.values()))(ctx)


def public_multi(ctx: Ctx) -> Draft:
    """synth-public-multi: two to four pictures, a question of a uniformly drawn family."""
    return pick(ctx.rng, tuple(MULTI_FAMILIES.values()))(ctx)


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType({
    "synth-public-open": public_open,
    "synth-public-multi": public_multi,
    "synth-public-formats": public_formats,
})

TEXTS: tuple[str, ...] = (*_T.values(), *_Q.values(), *_F.values(), *QUALITY_WORDS.values(),
                          *STATE_WORDS.values(), *SIDE_WORDS, *DOMAINS, *ORDINALS,
                          *(o.capitalize() for o in ORDINALS), *VERDICTS[2])
"""Every literal word of the public split (part of :func:`drake.synth.vocabulary`)."""


# ---------------------------------------------------------------------------------------------
# Picture questions: which picture is which (pretraining's picture stage)

PICTURE_FAMILIES = ("which_background", "background_at", "which_look", "look_at")
"""The picture questions' families: a picture found by its background or look, or a picture's
background or look given its number."""
COMPARE_FAMILIES = ("same_background", "same_look")
"""Picture questions that compare two numbered pictures' backgrounds or looks (yes / no); drawn
only when asked for (``picture_question(..., families=...)``)."""
_P = MappingProxyType({
    "which_background": "Tell me the number of the picture with the {background} background.",
    "background_at": "Tell me the kind of background in picture {k}.",
    "which_look": "Tell me the number of the picture that looks {look}.",
    "look_at": "Tell me how picture {k} looks.",
    "same_background": "Tell me if picture {a} and picture {b} have one kind of background.",
    "same_look": "Tell me if picture {a} and picture {b} look alike.",
})
_PICTURE_LINES = ("Picture {k}: {image}", "Photo {k}: {image}", "{image}")
#: Image tokens per picture of the tiny towers (a 3 x 3 grid).
PICTURE_TOKENS = 9


def picture_question(rng: np.random.Generator, sample_id: str, task: str = "picture",
                     families: Sequence[str] = PICTURE_FAMILIES) -> tuple[dict, list[int]]:
    """A picture question, drawn from ``rng``: two to four pictures (labelled "Picture 2:",
    "Photo 2:" or not at all), one question about one picture's background or look, found by
    its number ("Tell me the kind of background in picture 2.") or by what it shows ("Tell me
    the number of the picture that looks grainy."), with an open answer.

    Returns the sample (``id`` ``sample_id``; ``meta``: the family, the asked picture's index
    ``picture`` and the scenes) and the asked picture's positions among the sample's image
    tokens (:data:`PICTURE_TOKENS` per picture), which pretraining's pointer attends to; a
    family of :data:`COMPARE_FAMILIES` (among ``families``) asks whether two numbered pictures
    share a background or a look, and its positions are both pictures'. These
    questions are not a task of the public split: pretraining draws them
    (:mod:`drake.models.picture_pretrain`), and none repeats a client task's question.
    """
    import json

    from drake.synth.scene import render

    n = int(rng.integers(2, 5))
    k = int(rng.integers(n))
    asked = [k]  # the pictures the question is about
    family = families[int(rng.integers(len(families)))]
    backgrounds = [DOMAINS[int(rng.integers(len(DOMAINS)))] for _ in range(n)]
    looks = [""] * n
    kinds = tuple(DEGRADATION_STRENGTHS)
    if family == "which_background":  # the asked background is on picture k alone
        backgrounds[k] = DOMAINS[int(rng.integers(len(DOMAINS)))]
        others = [d for d in DOMAINS if d != backgrounds[k]]
        for i in range(n):
            if i != k:
                backgrounds[i] = others[int(rng.integers(len(others)))]
        question = _P[family].format(background=backgrounds[k])
        answer = str(k + 1)
    elif family == "which_look":  # picture k alone is degraded
        looks[k] = kinds[int(rng.integers(len(kinds)))]
        question = _P[family].format(look=QUALITY_WORDS[looks[k]])
        answer = str(k + 1)
    elif family == "background_at":
        question = _P[family].format(k=k + 1)
        answer = backgrounds[k]
    elif family in COMPARE_FAMILIES:  # picture k against picture b, alike half of the time
        b = (k + 1 + int(rng.integers(n - 1))) % n
        alike = bool(rng.random() < 0.5)
        if family == "same_background":
            others = [d for d in DOMAINS if d != backgrounds[k]]
            backgrounds[b] = backgrounds[k] if alike else others[int(rng.integers(len(others)))]
        else:
            options = ("", *kinds)
            looks = [options[int(rng.integers(len(options)))] for _ in range(n)]
            others = [x for x in options if x != looks[k]]
            looks[b] = looks[k] if alike else others[int(rng.integers(len(others)))]
        asked = sorted((k, b))
        question = _P[family].format(a=asked[0] + 1, b=asked[1] + 1)
        answer = _T["yes"] if alike else _T["no"]
    else:
        looks = [kinds[int(rng.integers(len(kinds)))] if rng.random() < 0.6 else ""
                 for _ in range(n)]
        question = _P[family].format(k=k + 1)
        answer = QUALITY_WORDS[looks[k]]
    scenes = [Scene(tuple(arrange(rng, random_objects(rng, int(rng.integers(0, 4))))),
                    backgrounds[i], degradation_effect(rng, looks[i]) if looks[i] else ())
              for i in range(n)]
    label = _PICTURE_LINES[int(rng.integers(len(_PICTURE_LINES)))]
    lines = [label.format(k=i + 1, image=IMAGE) for i in range(n)]
    sample = {"id": sample_id, "task": task,
              "images": [render(s, 64, rng) for s in scenes],
              "prompt": "\n".join([*lines, question]), "answer": answer, "choices": [],
              "answer_type": "open",
              "meta": json.dumps({"family": family, "picture": k,
                                  "scenes": [s.summary() for s in scenes]})}
    return sample, [i * PICTURE_TOKENS + c for i in asked for c in range(PICTURE_TOKENS)]
