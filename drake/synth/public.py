"""drake-synth's public split: the generic questions the tiny models are pretrained on.

The public split plays the part of LLaVA's instruction data: it teaches the primitives every
client task composes (reading an object's colour, shape, fill, size and state, finding the object
a question names, counting, placing objects on the grid and relative to each other, telling the
background and the photo quality, reading bar charts and number tags, and doing all of this
across several pictures), and never a client task's question. Its wording ("Tell me ...") and
its answers (short open answers: a word, a number, a picture number) are disjoint from every
client and unseen task, which ask for verdicts, options, letters or answer ids.

Two tasks:

* ``synth-public-open``: one picture, one of :data:`SINGLE_FAMILIES`;
* ``synth-public-multi``: two to four pictures, one of :data:`MULTI_FAMILIES`.

The family is drawn uniformly. Scenes that a question looks objects up in hold pairwise distinct
shapes and colours, so "the triangle" or "the red shape" names exactly one object. The ``objects``
knob caps every family's object count, which is how pretraining draws an easier early pool.
Each sample's ``meta`` records the family and the scenes (``meta["scenes"]``), which is all the
vision tower's pretraining targets are made of (:mod:`drake.models.vision`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from drake.synth.common import Ctx, Draft, random_objects
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
from drake.synth.text import IMAGE, coin, pick, plural, sample, shuffled

QUALITY_WORDS = MappingProxyType({
    "": "clean", "blur": "blurry", "noise": "grainy", "dark": "dim", "bright": "washed",
    "pixelate": "blocky", "covered": "covered",
})
"""Answer of the quality family for each degradation (``covered``: a grey box hides a part)."""
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
    strength = {"blur": (1.0, 2.5), "noise": (20.0, 50.0), "dark": (0.4, 0.75),
                "bright": (0.4, 0.75), "pixelate": (3.0, 4.99)}[kind]
    value = float(rng.uniform(*strength))
    return kind, ((kind, float(int(value)) if kind == "pixelate" else value),), ()


def _one(ctx: Ctx, objs: Sequence[Obj], question: str, answer: str, family: str, *,
         effects: tuple = (), occluders: tuple = (), bars: tuple = ()) -> Draft:
    scene = Scene(tuple(objs), ctx.domain(), effects, occluders, bars)
    return Draft([scene], f"{IMAGE}\n{question}", answer, (), meta={"family": family})


def _named(o: Obj) -> dict[str, str]:
    return {"colour": o.colour, "shape": o.shape}


# ---------------------------------------------------------------------------------------------
# single-picture families


def describe(ctx: Ctx) -> Draft:
    objs = distinct_objects(ctx, 1, 5)
    items = [_T["describe_item"].format(size=o.size, colour=o.colour, fill=o.fill, shape=o.shape,
                                        position=POSITIONS[o.cell()])
             for o in sorted(objs, key=lambda o: (o.cell(), o.x))]
    return _one(ctx, objs, _T["describe"], ", ".join(items) + ".", "describe")


def colour(ctx: Ctx) -> Draft:
    objs = distinct_objects(ctx, 1, 4)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, _T["colour"].format(shape=o.shape), o.colour, "colour")


def shape(ctx: Ctx) -> Draft:
    objs = distinct_objects(ctx, 1, 4)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, _T["shape"].format(colour=o.colour), o.shape, "shape")


def where(ctx: Ctx) -> Draft:
    objs = distinct_objects(ctx, 1, 5)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, _T["where"].format(**_named(o)), POSITIONS[o.cell()], "where")


def what_at(ctx: Ctx) -> Draft:
    objs = list(arrange(ctx.rng, random_objects(ctx.rng, ctx.n_objects(1, 5))))
    cell = int(ctx.rng.integers(len(POSITIONS)))
    there = [o for o in objs if o.cell() == cell]
    answer = f"{there[0].colour} {there[0].shape}" if there else _T["nothing"]
    return _one(ctx, objs, _T["what_at"].format(position=POSITIONS[cell]), answer, "what_at")


def fill(ctx: Ctx) -> Draft:
    objs = distinct_objects(ctx, 1, 3)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, _T["fill"].format(**_named(o)), o.fill, "fill")


def size(ctx: Ctx) -> Draft:
    objs = distinct_objects(ctx, 1, 3)
    o = pick(ctx.rng, objs)
    return _one(ctx, objs, _T["size"].format(**_named(o)), o.size, "size")


def state(ctx: Ctx) -> Draft:
    rng = ctx.rng
    objs = [replace(o, state=pick(rng, ("", "broken", "faded"))) for o in distinct_objects(ctx, 1, 3)]
    o = pick(rng, objs)
    return _one(ctx, objs, _T["state"].format(**_named(o)), STATE_WORDS[o.state], "state")


def count(ctx: Ctx) -> Draft:
    rng = ctx.rng
    kind = pick(rng, ("all", "colour", "shape"))
    if kind == "all":
        objs = list(arrange(rng, random_objects(rng, ctx.n_objects(0, 9))))
        return _one(ctx, objs, _T["count_all"], str(len(objs)), "count")
    n = ctx.n_objects(0, 5)
    rest = ctx.n_objects(0, 9 - n)
    if kind == "colour":
        c = pick(rng, COLOURS)
        objs = [Obj(pick(rng, SHAPES), c, pick(rng, SIZES), pick(rng, FILLS)) for _ in range(n)]
        objs += random_objects(rng, rest, colours=[x for x in COLOURS if x != c])
        question = _T["count_colour"].format(colour=c)
    else:
        s = pick(rng, SHAPES)
        objs = [Obj(s, pick(rng, COLOURS), pick(rng, SIZES), pick(rng, FILLS)) for _ in range(n)]
        objs += random_objects(rng, rest, shapes=[x for x in SHAPES if x != s])
        question = _T["count_shape"].format(shapes=plural(s))
    return _one(ctx, list(arrange(rng, shuffled(rng, objs))), question, str(n), "count")


def exists(ctx: Ctx) -> Draft:
    rng = ctx.rng
    objs = distinct_objects(ctx, 1, 5)
    o = pick(rng, objs)
    if coin(rng):
        return _one(ctx, objs, _T["exists"].format(**_named(o)), _T["yes"], "exists")
    present = {x.key() for x in objs}
    options = [(s, c) for s in SHAPES for c in COLOURS if (s, c) not in present
               and (s == o.shape or c == o.colour)]
    s, c = pick(rng, options)
    return _one(ctx, objs, _T["exists"].format(colour=c, shape=s), _T["no"], "exists")


def relation(ctx: Ctx) -> Draft:
    """Where one object is relative to another in the same grid row or column."""
    rng = ctx.rng
    objs = list(arrange(rng, distinct_objects(ctx, 2, 5)))
    pairs = [(a, b) for a in objs for b in objs if a is not b
             and (a.cell() // 3 == b.cell() // 3 or a.cell() % 3 == b.cell() % 3)]
    if not pairs:  # one object only (the knob's cap): fall back to placing it
        return where(ctx)
    a, b = pick(rng, pairs)
    if a.cell() // 3 == b.cell() // 3:
        side = SIDE_WORDS[0] if a.cell() % 3 < b.cell() % 3 else SIDE_WORDS[1]
    else:
        side = SIDE_WORDS[2] if a.cell() // 3 < b.cell() // 3 else SIDE_WORDS[3]
    question = _T["relation"].format(a=f"{a.colour} {a.shape}", b=f"{b.colour} {b.shape}")
    return _one(ctx, objs, question, side, "relation")


def background(ctx: Ctx) -> Draft:
    scene = Scene(tuple(arrange(ctx.rng, random_objects(ctx.rng, ctx.n_objects(0, 3)))),
                  ctx.domain())
    return Draft([scene], f"{IMAGE}\n{_T['background']}", scene.domain, (),
                 meta={"family": "background"})


def quality(ctx: Ctx) -> Draft:
    objs = list(arrange(ctx.rng, random_objects(ctx.rng, ctx.n_objects(1, 4))))
    kind, effects, occluders = _degraded(ctx, 6 / 7)
    return _one(ctx, objs, _T["quality"], QUALITY_WORDS[kind], "quality", effects=effects,
                occluders=occluders)


def bars(ctx: Ctx) -> Draft:
    rng = ctx.rng
    colours = sample(rng, COLOURS, int(rng.integers(2, 6)))
    values = [int(v) for v in rng.choice(10, size=len(colours), replace=False) + 1]
    chart = tuple(zip(colours, values))
    if coin(rng):
        c, v = pick(rng, chart)
        question, answer = _T["bar_height"].format(colour=c), str(v)
    else:
        question, answer = _T["bar_top"], colours[values.index(max(values))]
    return _one(ctx, (), question, answer, "bars", bars=chart)


def tags(ctx: Ctx) -> Draft:
    rng = ctx.rng
    objs = distinct_objects(ctx, 2, 4)
    objs = [replace(o, size="large", r=RADIUS["large"], label=str(t))
            for o, t in zip(arrange(rng, objs), sample(rng, range(1, 10), len(objs)))]
    o = pick(rng, objs)
    if coin(rng):
        question, answer = _T["tag_of"].format(**_named(o)), o.label
    else:
        question, answer = _T["tag_shape"].format(tag=o.label), o.shape
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


def multi_which(ctx: Ctx) -> Draft:
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
    return _pictures(ctx, scenes, _T["multi_which"].format(**_named(target)), str(k + 1),
                     "multi_which")


def multi_count(ctx: Ctx) -> Draft:
    rng = ctx.rng
    s = pick(rng, SHAPES)
    has = [coin(rng) for _ in range(_picture_count(ctx))]
    scenes = []
    for h in has:
        objs = random_objects(rng, ctx.n_objects(0, 2), shapes=[x for x in SHAPES if x != s])
        if h:
            objs.append(Obj(s, pick(rng, COLOURS), pick(rng, SIZES), pick(rng, FILLS)))
        scenes.append(Scene(arrange(rng, shuffled(rng, objs)), ctx.domain()))
    return _pictures(ctx, scenes, _T["multi_count"].format(shape=s), str(sum(has)),
                     "multi_count")


def multi_attr(ctx: Ctx) -> Draft:
    rng = ctx.rng
    scenes = [Scene(tuple(distinct_objects(ctx, 1, 3)), ctx.domain())
              for _ in range(_picture_count(ctx))]
    k = int(rng.integers(len(scenes)))
    if coin(rng):
        o = pick(rng, scenes[k].objects)
        question, answer = _T["multi_colour"].format(shape=o.shape, k=k + 1), o.colour
    else:
        question, answer = _T["multi_number"].format(k=k + 1), str(len(scenes[k].objects))
    return _pictures(ctx, scenes, question, answer, "multi_attr")


def multi_more(ctx: Ctx) -> Draft:
    rng = ctx.rng
    counts = [ctx.n_objects(0, 8) for _ in range(2)]
    scenes = [Scene(arrange(rng, random_objects(rng, m)), ctx.domain()) for m in counts]
    answer = "1" if counts[0] > counts[1] else "2" if counts[1] > counts[0] else _T["equal"]
    return _pictures(ctx, scenes, _T["multi_more"], answer, "multi_more")


def multi_same(ctx: Ctx) -> Draft:
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
    return _pictures(ctx, scenes, _T["multi_same"], _T["yes"] if same else _T["no"], "multi_same")


SINGLE_FAMILIES: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType({
    f.__name__: f for f in (describe, colour, shape, where, what_at, fill, size, state, count,
                            exists, relation, background, quality, bars, tags)})
MULTI_FAMILIES: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType({
    f.__name__: f for f in (multi_which, multi_count, multi_attr, multi_more, multi_same)})


def public_open(ctx: Ctx) -> Draft:
    """synth-public-open: one picture, a question of a uniformly drawn single-picture family."""
    return pick(ctx.rng, tuple(SINGLE_FAMILIES.values()))(ctx)


def public_multi(ctx: Ctx) -> Draft:
    """synth-public-multi: two to four pictures, a question of a uniformly drawn family."""
    return pick(ctx.rng, tuple(MULTI_FAMILIES.values()))(ctx)


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType({
    "synth-public-open": public_open,
    "synth-public-multi": public_multi,
})

TEXTS: tuple[str, ...] = (*_T.values(), *QUALITY_WORDS.values(), *STATE_WORDS.values(),
                          *SIDE_WORDS, *DOMAINS)
"""Every literal word of the public split (part of :func:`drake.synth.vocabulary`)."""
