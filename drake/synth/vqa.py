"""Twins of the DRAKE *VQA* tasks (clients 6-9): counting, attributes, charts, image quality,
shape knowledge, labelled diagrams and named composite patterns ("dishes").

Shared pieces: counting scenes (IconQA twins), graded degradations (Co-Instruct twins), the dish
table with its regions (WCVQA twins) and attribute questions about one instance (SEED-Bench,
TQA twins).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from drake.synth.common import Ctx, Draft, GenerationError, random_objects
from drake.synth.relation import DEMON_CHOOSE
from drake.synth.scene import (
    CELL_BLOCKS,
    COLOURS,
    CORNERS,
    FILLS,
    HUE_WINDOWS,
    POSITIONS,
    SHAPE_PAIRS,
    SHAPES,
    Obj,
    Scene,
    arrange,
)
from drake.synth.text import (
    ANSWER_IDS,
    IMAGE,
    LETTERS,
    ORDINAL_IMAGES,
    YES_NO,
    choice_list,
    coin,
    id_options,
    insert_gold,
    letter_options,
    options_first,
    pick,
    plural,
    sample,
    shuffled,
    window_options,
)

_T = MappingProxyType(
    {
        "dish": "{image}\n{context}Question: What is the name of this dish?\n{options}",
        "context": "Context: This dish comes from {region}.\n",
        "region": "{image}\nQuestion: Which region does this dish come from?\n{options}",
        "count_mc": "{image}\nQuestion: {question}\n{choices}",
        "count_open": "{image}\nQuestion: {question}\nAnswer the question using a single word or "
        "number.",
        "how_many": "How many {things} are there?",
        "blank": "Fill in the blank: there are _ {things} in the picture.",
        "how_many_colour": "How many {colour} objects are there?",
        "more_of": "Are there more {a} or more {b}?",
        "total": "How many {a} and {b} are there in total?",
        "difference": "How many more {a} than {b} are there?",
        "add": "If you add {k} more {a}, how many {a} will there be?",
        "take": "If you take away {k} {a}, how many {a} will be left?",
        "pair": "The first image: {image}\nThe second image: {image}\n{question}\n{choices}",
        "triple": "The first image: {image}\nThe second image: {image}\nThe third image: {image}\n"
        "{question}\n{choices}",
        "single": "{image}\n{question}\n{choices}",
        "letters": "{image}\nQuestion: {question}\n{options}",
        "facts_corners": "How many corners does the shape in the image have?",
        "facts_most": "Which object has the most corners?",
        "facts_sum": "How many corners do the {a} object and the {b} object have together?",
        "facts_none": "Which object has no corners?",
        "the_colour": "the {colour} object",
        "diagram_label": "Which label marks the {colour} {shape}?",
        "diagram_shape": "What shape is labelled {d}?",
        "diagram_colour": "What colour is the shape labelled {d}?",
        "instance_colour": "What colour is the {shape}?",
        "instance_shape": "What shape is the {colour} object?",
        "instance_where": "Where is the {colour} {shape}?",
        "bar_tallest": "Which bar is the tallest?",
        "bar_shortest": "Which bar is the shortest?",
        "bar_value": "What is the value of the {colour} bar?",
        "bar_taller": "Is the {a} bar taller than the {b} bar?",
        "bar_count": "How many bars are there?",
        "bar_prompt": "{image}\nQuestion: {question} " + DEMON_CHOOSE + "\n{choices}",
    }
)

# ---------------------------------------------------------------------------------------------
# dishes (WCVQA)

REGIONS = ("Northland", "Southland", "Eastland", "Westland", "Midland")
LAYOUTS = MappingProxyType(
    {
        "Northland": "stack",
        "Southland": "row",
        "Eastland": "nest",
        "Westland": "diagonal",
        "Midland": "triangle",
    }
)
REGION_SHAPES = MappingProxyType(
    {
        "Northland": "circle",
        "Southland": "square",
        "Eastland": "hexagon",
        "Westland": "star",
        "Midland": "heart",
    }
)
"""Every dish of a region is served on its region's shape: the dish's main (large) part."""


@dataclass(frozen=True)
class Dish:
    """A named composite pattern: its parts (shape, colour) in its region's layout.

    The first part is the main one, drawn large in the region's shape (:data:`REGION_SHAPES`);
    the name begins with its colour ("cyan snow tower"), as a dish's look names it, and the
    four dishes of a region differ in that colour. The other parts are small side parts.
    """

    name: str
    region: str
    parts: tuple[tuple[str, str], ...]

    @property
    def colour(self) -> str:
        """The main part's colour: the first word of the name."""
        return self.parts[0][1]


def _dish(name: str, region: str, colour: str, *sides: tuple[str, str]) -> Dish:
    return Dish(f"{colour} {name}", region, ((REGION_SHAPES[region], colour), *sides))


DISHES: tuple[Dish, ...] = (
    _dish("snow tower", "Northland", "cyan", ("square", "blue")),
    _dish("frost cake", "Northland", "blue", ("hexagon", "cyan"), ("square", "purple")),
    _dish("polar bun", "Northland", "purple", ("heart", "cyan")),
    _dish("glacier pie", "Northland", "green", ("star", "cyan"), ("circle", "blue")),
    _dish("sun roll", "Southland", "yellow", ("circle", "orange")),
    _dish("ember wrap", "Southland", "red", ("star", "orange"), ("circle", "red")),
    _dish("desert bread", "Southland", "orange", ("diamond", "yellow")),
    _dish("coral soup", "Southland", "pink", ("circle", "orange"), ("cross", "red")),
    _dish("jade dumpling", "Eastland", "green", ("square", "yellow")),
    _dish("lotus bowl", "Eastland", "pink", ("star", "green"), ("heart", "pink")),
    _dish("tea parcel", "Eastland", "orange", ("circle", "green")),
    _dish("bamboo cup", "Eastland", "cyan", ("triangle", "green")),
    _dish("prairie stew", "Westland", "yellow", ("circle", "green")),
    _dish("canyon tart", "Westland", "red", ("hexagon", "purple")),
    _dish("ranch loaf", "Westland", "purple", ("cross", "yellow"), ("diamond", "red")),
    _dish("cactus salad", "Westland", "green", ("heart", "yellow"), ("circle", "green")),
    _dish("garden plate", "Midland", "pink", ("star", "yellow"), ("square", "green")),
    _dish("harvest ring", "Midland", "orange", ("circle", "yellow"), ("heart", "red")),
    _dish("meadow mix", "Midland", "cyan", ("diamond", "green"), ("triangle", "yellow")),
    _dish("orchard bowl", "Midland", "red", ("square", "green"), ("star", "orange")),
)


def dish_objects(ctx: Ctx, dish: Dish) -> tuple[Obj, ...]:
    """The dish's parts in its region's arrangement (the main part large, the side parts small),
    with jitter and an optional garnish in a corner."""
    rng = ctx.rng
    n = len(dish.parts)
    layout = LAYOUTS[dish.region]
    cx, cy = 0.5 + float(rng.uniform(-0.06, 0.06)), 0.5 + float(rng.uniform(-0.06, 0.06))
    out: list[Obj] = []
    for k, (shape, colour) in enumerate(dish.parts):
        off = k - (n - 1) / 2
        r = (0.15 if k == 0 else 0.08) * float(rng.uniform(0.9, 1.1))
        fill = "solid" if k == 0 else pick(rng, ("solid", "striped"))
        if layout == "stack":
            x, y = cx, cy + 0.28 * off
        elif layout == "row":
            x, y = cx + 0.28 * off, cy
        elif layout == "diagonal":
            x, y = cx + 0.22 * off, cy + 0.22 * off
        elif layout == "triangle":
            x, y = cx + (0.0, -0.23, 0.23)[k], cy + (-0.2, 0.16, 0.16)[k]
        else:  # nest: the main part holds the others
            if k == 0:
                out.append(Obj(shape, colour, "large", "outlined", x=cx, y=cy, r=0.3))
                continue
            x, y, r = cx + (0.0 if n == 2 else (-0.1 if k == 1 else 0.1)), cy, 0.075
        out.append(Obj(shape, colour, "large" if k == 0 else "small", fill, x=x, y=y, r=r))
    garnish = random_objects(rng, min(1, ctx.n_objects()), sizes=("small",))
    for g in garnish:
        corner = pick(rng, ((0.09, 0.09), (0.91, 0.09), (0.09, 0.91), (0.91, 0.91)))
        out.append(Obj(g.shape, g.colour, "small", g.fill, x=corner[0], y=corner[1], r=0.05))
    return tuple(out)


def _other_colours(rng, pool: Sequence[Dish], k: int, taken: Sequence[Dish]) -> list[Dish]:
    """``k`` dishes of ``pool`` whose main colours differ from each other's and ``taken``'s
    (so that the five options' first words always differ), or a :class:`GenerationError`."""
    colours = {d.colour for d in taken}
    out: list[Dish] = []
    for d in shuffled(rng, pool):
        if len(out) == k:
            break
        if d.colour not in colours and d not in taken:
            out.append(d)
            colours.add(d.colour)
    if len(out) < k:
        raise GenerationError(f"fewer than {k} dishes of other colours than {sorted(colours)}")
    return out


def _free(region: str, colours: set[str]) -> int:
    """How many of ``region``'s dishes have a main colour outside ``colours``."""
    return sum(d.colour not in colours for d in DISHES if d.region == region)


def _dish_question(ctx: Ctx, context: str) -> Draft:
    """WCVQA dish-name twins. ``context``: "" (none), "helpful" (true region) or "misleading".

    The five options' main colours always differ, so the main part's colour names the dish.
    Without context the options are drawn first (with probability closeness the four dishes of
    one region, which share the main shape and layout and differ only in that colour, plus one
    other; else five at random) and the gold among them. With a helpful context the distractors
    come mostly from other regions (one same-region dish with probability closeness); with a
    misleading one, two come from the region the context names and two from the gold's own
    region (so avoiding the named region is no shortcut).
    """
    rng = ctx.rng
    line = ""
    if context == "":
        if ctx.near():
            region = pick(rng, REGIONS)
            chosen = [d for d in DISHES if d.region == region]
            chosen += _other_colours(rng, DISHES, 1, chosen)
            chosen = shuffled(rng, chosen)
        else:
            chosen = _other_colours(rng, DISHES, 5, ())
        pos = int(rng.integers(5))
        dish = chosen[pos]
        options = [d.name for d in chosen]
    else:
        dish = pick(rng, DISHES)
        same = [d for d in DISHES if d.region == dish.region and d is not dish]
        other = [d for d in DISHES if d.region != dish.region]
        if context == "helpful":
            k = 1 if ctx.near() else 0
            distractors = sample(rng, same, k)
            distractors += _other_colours(rng, other, 4 - k, [dish, *distractors])
            line = _T["context"].format(region=dish.region)
        else:
            distractors = sample(rng, same, 2)
            taken = {d.colour for d in (dish, *distractors)}
            wrong = pick(rng, [r for r in REGIONS if r != dish.region and _free(r, taken) >= 2])
            decoys = [d for d in DISHES if d.region == wrong]
            distractors += _other_colours(rng, decoys, 2, [dish, *distractors])
            line = _T["context"].format(region=wrong)
        options, pos = insert_gold(rng, dish.name, [d.name for d in distractors])
    scene = Scene(dish_objects(ctx, dish), ctx.domain())
    prompt = _T["dish"].format(image=IMAGE, context=line, options=id_options(options))
    return Draft(
        [scene], prompt, ANSWER_IDS[pos], ANSWER_IDS, meta={"dish": dish.name, "context": context}
    )


def dish_name(ctx: Ctx) -> Draft:
    """WCVQA-0 twin: the name of the dish, among five (same-region distractors with closeness)."""
    return _dish_question(ctx, "")


def dish_context(ctx: Ctx) -> Draft:
    """WCVQA-1 twin: the dish name with a context line naming its true region."""
    return _dish_question(ctx, "helpful")


def dish_misleading(ctx: Ctx) -> Draft:
    """WCVQA-2 twin: the dish name with a context line naming a wrong region (decoys from it)."""
    return _dish_question(ctx, "misleading")


def dish_region(ctx: Ctx) -> Draft:
    """WCVQA-3 twin: which of the five regions the dish comes from (answer id 1-5); the main
    part's shape and the layout tell the region."""
    rng = ctx.rng
    dish = pick(rng, DISHES)
    options = shuffled(rng, REGIONS)
    pos = options.index(dish.region)
    scene = Scene(dish_objects(ctx, dish), ctx.domain())
    prompt = _T["region"].format(image=IMAGE, options=id_options(options))
    return Draft([scene], prompt, ANSWER_IDS[pos], ANSWER_IDS, meta={"dish": dish.name})


# ---------------------------------------------------------------------------------------------
# counting (IconQA)


def _count_scene(
    ctx: Ctx, groups: Sequence[tuple[str, int]], clutter: int, grid: int, same_colour: bool = False
) -> Scene:
    """``groups`` of (shape, count) plus ``clutter`` objects of other shapes, on a grid."""
    rng = ctx.rng
    objs: list[Obj] = []
    used = [s for s, _ in groups]
    for shape, count in groups:
        colour = pick(rng, COLOURS)
        for _ in range(count):
            c = colour if same_colour else pick(rng, COLOURS)
            objs.append(Obj(shape, c, pick(rng, ("small", "large")), pick(rng, FILLS)))
    objs += random_objects(rng, clutter, shapes=[s for s in SHAPES if s not in used])
    if len(objs) > grid * grid:
        raise GenerationError(f"{len(objs)} objects do not fit a {grid}x{grid} grid")
    return Scene(arrange(rng, shuffled(rng, objs), grid=grid), ctx.domain())


def count_easy(ctx: Ctx) -> Draft:
    """IconQA-0 twin: how many of one shape (all alike, no clutter); three number choices
    (drawn first: three consecutive counts inside the ``count`` knob)."""
    rng, kn = ctx.rng, ctx.knobs
    shape = pick(rng, SHAPES)
    clutter = ctx.n_objects()
    options, _, n = window_options(rng, max(1, kn.count[0]), min(kn.count[1], 9 - clutter), 3)
    scene = _count_scene(ctx, [(shape, n)], clutter, 3, same_colour=True)
    prompt = _T["count_mc"].format(
        image=IMAGE,
        question=_T["how_many"].format(things=plural(shape)),
        choices=choice_list(options),
    )
    return Draft([scene], prompt, str(n), options, meta={"count": n})


def count_open(ctx: Ctx) -> Draft:
    """IconQA-2 twin: how many of one shape among clutter, answered with a number (open)."""
    rng, kn = ctx.rng, ctx.knobs
    shape = pick(rng, SHAPES)
    clutter = ctx.n_objects()
    n = int(rng.integers(max(1, kn.count[0]), min(kn.count[1], 9 - clutter) + 1))
    scene = _count_scene(ctx, [(shape, n)], clutter, 3, same_colour=coin(rng))
    template = _T["how_many"] if coin(rng) else _T["blank"]
    prompt = _T["count_open"].format(image=IMAGE, question=template.format(things=plural(shape)))
    return Draft([scene], prompt, str(n), (), meta={"count": n})


def count_arith(ctx: Ctx) -> Draft:
    """IconQA-3 twin: totals, differences and add/take-away of counted shapes (open, number)."""
    rng, kn = ctx.rng, ctx.knobs
    a, b = sample(rng, SHAPES, 2)
    lo, hi = max(1, kn.count[0]), max(kn.count[1], 2)
    family = pick(rng, ("total", "difference", "add", "take"))
    n1, n2 = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
    if family == "difference":
        if n1 == n2:
            n1, n2 = (n1, n2 - 1) if n2 > 1 else (n1 + 1, n2)
        n1, n2 = max(n1, n2), min(n1, n2)
    if family == "take" and n1 < 2:
        n1 = 2
    k = (
        int(rng.integers(1, 4))
        if family == "add"
        else int(rng.integers(1, n1))
        if family == "take"
        else 0
    )
    answer = {"total": n1 + n2, "difference": n1 - n2, "add": n1 + k, "take": n1 - k}[family]
    groups = [(a, n1), (b, n2)] if family in ("total", "difference") else [(a, n1), (b, min(n2, 3))]
    scene = _count_scene(ctx, groups, ctx.n_objects(), 4)
    question = _T[family].format(a=plural(a), b=plural(b), k=k)
    prompt = _T["count_open"].format(image=IMAGE, question=question)
    return Draft(
        [scene], prompt, str(answer), (), meta={"family": family, "counts": [n1, n2], "k": k}
    )


def count_choice(ctx: Ctx) -> Draft:
    """IconQA-1 twin: harder counting among clutter, colour counts, and "more of" comparisons.

    Count options are drawn first (four consecutive counts inside the ``count`` knob); in "more
    of" questions the larger group is drawn by a fair coin and, with probability closeness,
    the two counts differ by one.
    """
    rng, kn = ctx.rng, ctx.knobs
    family = pick(rng, ("shape", "colour", "more"))
    lo, hi = max(1, kn.count[0]), min(max(kn.count[1], 2), 12)
    clutter = ctx.n_objects()
    if family == "more":
        a, b = sample(rng, SHAPES, 2)
        top = min(hi, 7)
        small = int(rng.integers(lo, top))
        large = small + 1 if ctx.near() else int(rng.integers(small + 1, top + 1))
        n1, n2 = (large, small) if coin(rng) else (small, large)
        scene = _count_scene(ctx, [(a, n1), (b, n2)], min(clutter, 16 - n1 - n2), 4)
        options = [plural(a), plural(b)]
        answer = options[0] if n1 > n2 else options[1]
        question = _T["more_of"].format(a=options[0], b=options[1])
        meta = {"counts": [n1, n2]}
    elif family == "shape":
        shape = pick(rng, SHAPES)
        options, _, n = window_options(rng, lo, min(hi, 16 - clutter), 4)
        scene = _count_scene(ctx, [(shape, n)], clutter, 4)
        answer, question, meta = str(n), _T["how_many"].format(things=plural(shape)), {"count": n}
    else:
        colour = pick(rng, COLOURS)
        options, _, n = window_options(rng, lo, min(hi, 15 - clutter), 4)
        objs = [
            Obj(pick(rng, SHAPES), colour, pick(rng, ("small", "large")), pick(rng, FILLS))
            for _ in range(n)
        ]
        others = [c for c in COLOURS if c != colour]
        objs += [
            Obj(
                pick(rng, SHAPES),
                pick(rng, others),
                pick(rng, ("small", "large")),
                pick(rng, FILLS),
            )
            for _ in range(clutter + 1)
        ]
        scene = Scene(arrange(rng, shuffled(rng, objs), grid=4), ctx.domain())
        answer, question, meta = str(n), _T["how_many_colour"].format(colour=colour), {"count": n}
    prompt = _T["count_mc"].format(image=IMAGE, question=question, choices=choice_list(options))
    return Draft([scene], prompt, answer, options, meta={"family": family, **meta})


# ---------------------------------------------------------------------------------------------
# image quality (Co-Instruct)

DISTORTIONS = ("blur", "noise", "dark", "bright", "pixelate")
DISTORTION_NAMES = MappingProxyType(
    {
        "blur": "blur",
        "noise": "noise",
        "dark": "darkness",
        "bright": "overexposure",
        "pixelate": "pixelation",
    }
)


def distortion(kind: str, level: float) -> tuple[str, float]:
    """A degradation of ``kind`` at ``level`` in [0, 1] (0 = barely visible, 1 = strong)."""
    if kind == "blur":
        return ("blur", 0.3 + 2.7 * level)
    if kind == "noise":
        return ("noise", 5.0 + 45.0 * level)
    if kind in ("dark", "bright"):
        return (kind, 0.1 + 0.65 * level)
    if kind == "pixelate":
        return ("pixelate", float(2 + round(6 * level)))
    raise ValueError(f"unknown distortion {kind!r}; choose one of {list(DISTORTIONS)}")


def _levels(ctx: Ctx, n: int) -> list[float]:
    """``n`` increasing levels in [0, 1]; consecutive ones differ by at least
    ``(0.15 + 0.5 * degradation) / (n - 1)``, the rest of the range is spread at random."""
    rng = ctx.rng
    gap = (0.15 + 0.5 * ctx.knobs.degradation) / (n - 1)
    start = float(rng.uniform(0.0, 1.0 - gap * (n - 1)))
    slack = 1.0 - gap * (n - 1) - start
    extras = sorted(float(v) for v in rng.uniform(0.0, slack, size=n - 1))
    return [start] + [start + gap * k + extras[k - 1] for k in range(1, n)]


def _quality_scene(ctx: Ctx, effects: Sequence[tuple[str, float]]) -> Scene:
    objs = random_objects(ctx.rng, ctx.n_objects(low=1))
    return Scene(
        arrange(ctx.rng, objs), ctx.domain(), effects=tuple(e for e in effects if e[1] > 0)
    )


QUALITY_COMPARE = MappingProxyType(
    {
        # question -> (kind, the winner has the lowest (True) or highest (False) level)
        "Which image is sharper?": ("blur", True),
        "Which image is brighter?": ("dark", True),
        "Which image has less noise?": ("noise", True),
        "Which image has better overall quality?": ("any", True),
        "Which image is blurrier?": ("blur", False),
        "Which image is darker?": ("dark", False),
        "Which image is noisier?": ("noise", False),
        "Which image has the best quality?": ("any", True),
        "Which image is the blurriest?": ("blur", False),
        "Which image is the darkest?": ("dark", False),
        "Which image is the noisiest?": ("noise", False),
        "Which image is the sharpest?": ("blur", True),
    }
)
_PAIR_QUESTIONS = tuple(list(QUALITY_COMPARE)[:7])
_TRIPLE_QUESTIONS = tuple(list(QUALITY_COMPARE)[7:])


def _quality_compare(ctx: Ctx, n: int, questions: Sequence[str]) -> Draft:
    rng = ctx.rng
    question = pick(rng, questions)
    kind, lowest_wins = QUALITY_COMPARE[question]
    winner = int(rng.integers(n))
    levels = _levels(ctx, n)
    order = (
        [levels[0]] + shuffled(rng, levels[1:])
        if lowest_wins
        else [levels[-1]] + shuffled(rng, levels[:-1])
    )
    assigned = [0.0] * n
    assigned[winner] = order[0]
    rest = [i for i in range(n) if i != winner]
    for i, lvl in zip(rest, order[1:]):
        assigned[i] = lvl
    scenes = []
    for lvl in assigned:
        k = pick(rng, DISTORTIONS) if kind == "any" else kind
        scenes.append(_quality_scene(ctx, [distortion(k, lvl)]))
    names = ORDINAL_IMAGES[:n]
    template = _T["pair"] if n == 2 else _T["triple"]
    prompt = template.format(image=IMAGE, question=question, choices=choice_list(names))
    return Draft(
        scenes,
        prompt,
        names[winner],
        names,
        meta={"question": question, "levels": [round(v, 3) for v in assigned]},
    )


def quality_pair(ctx: Ctx) -> Draft:
    """Co-Instruct-DB-2 twin: which of two degraded images is sharper/brighter/cleaner/better?"""
    return _quality_compare(ctx, 2, _PAIR_QUESTIONS)


def quality_triple(ctx: Ctx) -> Draft:
    """Co-Instruct-DB-3 twin: which of three degraded images is best/blurriest/darkest/...?"""
    return _quality_compare(ctx, 3, _TRIPLE_QUESTIONS)


QUALITY_YESNO = MappingProxyType(
    {
        "Is this image blurry?": "blur",
        "Is this image too dark?": "dark",
        "Is this image noisy?": "noise",
        "Is this image overexposed?": "bright",
        "Is this image pixelated?": "pixelate",
    }
)
CONTENT_YESNO = ("Is there a {colour} object in the image?", "Is there a {shape} in the image?")


def quality_yesno(ctx: Ctx) -> Draft:
    """Co-Instruct-DB-1 twin: a yes/no question on a distortion or on the content.

    "Yes" images carry the asked distortion at a strong level; "No" images are clean, mildly
    distorted, or carry a *different* distortion.
    """
    rng, kn = ctx.rng, ctx.knobs
    yes = coin(rng)
    if coin(rng, 0.7):
        question = pick(rng, tuple(QUALITY_YESNO))
        kind = QUALITY_YESNO[question]
        if yes:
            effects = [distortion(kind, float(rng.uniform(0.45 + 0.3 * (1 - kn.degradation), 1.0)))]
        else:
            case = int(rng.integers(3))
            if case == 0:
                effects = []
            elif case == 1:
                effects = [distortion(kind, float(rng.uniform(0.0, 0.1)))]
            else:
                alike = ({"dark", "bright"}, {"blur", "pixelate"})
                other = pick(rng, [d for d in DISTORTIONS if d != kind and {d, kind} not in alike])
                effects = [distortion(other, float(rng.uniform(0.5, 1.0)))]
        scene = _quality_scene(ctx, effects)
    else:
        template = pick(rng, CONTENT_YESNO)
        objs = random_objects(rng, ctx.n_objects(low=1))
        colour, shape = objs[0].colour, objs[0].shape
        if not yes:
            if "{colour}" in template:
                colour = pick(rng, [c for c in COLOURS if all(o.colour != c for o in objs)])
            else:
                shape = pick(rng, [s for s in SHAPES if all(o.shape != s for o in objs)])
        question = template.format(colour=colour, shape=shape)
        scene = Scene(arrange(rng, objs), ctx.domain())
    prompt = _T["single"].format(image=IMAGE, question=question, choices=choice_list(YES_NO))
    return Draft(
        [scene], prompt, YES_NO[0] if yes else YES_NO[1], YES_NO, meta={"question": question}
    )


CLARITY = ("High", "Medium", "Low")
LIGHTING = ("Too dark", "Good", "Too bright")
QUALITY_WHAT = (
    "What is the main distortion in this image?",
    "How is the clarity of this image?",
    "How is the lighting of this image?",
    "What colour is the large {shape}?",
)


def quality_what(ctx: Ctx) -> Draft:
    """Co-Instruct-DB-0 twin: what/how questions on distortion type, clarity, lighting, content."""
    rng, kn = ctx.rng, ctx.knobs
    family = int(rng.integers(len(QUALITY_WHAT)))
    question = QUALITY_WHAT[family]
    strong = 0.5 + 0.5 * kn.degradation
    if family == 0:
        kind = pick(rng, DISTORTIONS)
        options, pos = insert_gold(
            rng,
            DISTORTION_NAMES[kind],
            sample(rng, [DISTORTION_NAMES[d] for d in DISTORTIONS if d != kind], 3),
        )
        scene = _quality_scene(ctx, [distortion(kind, float(rng.uniform(strong * 0.8, 1.0)))])
    elif family == 1:
        pos = int(rng.integers(3))
        level = (0.0, 0.3, strong)[pos]
        scene = _quality_scene(ctx, [distortion("blur", level)] if pos else [])
        options = list(CLARITY)
    elif family == 2:
        pos = int(rng.integers(3))
        effects = (
            [distortion("dark", strong)]
            if pos == 0
            else [distortion("bright", strong)]
            if pos == 2
            else []
        )
        scene = _quality_scene(ctx, effects)
        options = list(LIGHTING)
    else:
        window = [pick(rng, HUE_WINDOWS)] if ctx.near() else ()
        options, pos = options_first(rng, COLOURS, 4, window)
        objs = random_objects(rng, ctx.n_objects(low=1), sizes=("small",))
        shape = pick(rng, [s for s in SHAPES if all(o.shape != s for o in objs)])
        main = Obj(shape, options[pos], "large", pick(rng, FILLS))
        question = question.format(shape=main.shape)
        scene = Scene(arrange(rng, shuffled(rng, [main, *objs])), ctx.domain())
    prompt = _T["single"].format(image=IMAGE, question=question, choices=choice_list(options))
    return Draft([scene], prompt, options[pos], options, meta={"question": question})


# ---------------------------------------------------------------------------------------------
# SEED-Bench (knowledge, instances), TQA (diagrams), DVQA (bar charts)

_CORNER_SHAPES = tuple(CORNERS)


def _letters(options: Sequence[str], pos: int, scene: Scene, question: str, meta: dict) -> Draft:
    prompt = _T["letters"].format(image=IMAGE, question=question, options=letter_options(options))
    return Draft(
        [scene], prompt, LETTERS[pos], LETTERS[: len(options)], meta={"question": question, **meta}
    )


def shape_facts(ctx: Ctx) -> Draft:
    """SEED-Bench-2-1 twin: knowledge about the drawn shapes (corner counts); letters A-D.

    Objects are named by colour only ("the red object"), so the image is needed to know which
    shape carries the knowledge. Number options are drawn before the gold: four corner counts
    (neighbouring values with probability closeness) or four consecutive achievable sums.
    """
    rng = ctx.rng
    family = pick(rng, ("corners", "most", "sum", "none"))
    domain = ctx.domain()
    values = sorted(set(CORNERS.values()))
    if family == "corners":
        windows = [tuple(values[i : i + 4]) for i in range(len(values) - 3)]
        near = [pick(rng, windows)] if ctx.near() else ()
        chosen, pos = options_first(rng, values, 4, near)
        chosen = sorted(chosen)
        gold = chosen[pos]
        shape = pick(rng, [s for s in _CORNER_SHAPES if CORNERS[s] == gold])
        objs = random_objects(rng, 1, shapes=(shape,), sizes=("large",))
        options = [str(v) for v in chosen]
        question = _T["facts_corners"]
    elif family in ("most", "none"):
        if family == "most":
            counts = sample(rng, values, 4)
        else:
            counts = [0] + sample(rng, [v for v in values if v != 0], 3)
        shapes = [pick(rng, [s for s in _CORNER_SHAPES if CORNERS[s] == v]) for v in counts]
        colours = sample(rng, COLOURS, 4)
        objs = [
            Obj(s, c, pick(rng, ("small", "large")), pick(rng, FILLS))
            for s, c in zip(shapes, colours)
        ]
        best = max(range(4), key=lambda k: counts[k]) if family == "most" else 0
        names = [_T["the_colour"].format(colour=o.colour) for o in objs]
        options, pos = insert_gold(
            rng, names[best], [nm for k, nm in enumerate(names) if k != best]
        )
        question = _T["facts_most"] if family == "most" else _T["facts_none"]
    else:
        n = ctx.n_objects(low=2)
        pairs = [(x, y) for x in _CORNER_SHAPES for y in _CORNER_SHAPES if x < y]
        sums = sorted({CORNERS[x] + CORNERS[y] for x, y in pairs})
        start = int(rng.integers(len(sums) - 3))
        chosen, pos = sums[start : start + 4], int(rng.integers(4))
        first, second = shuffled(
            rng, pick(rng, [p for p in pairs if CORNERS[p[0]] + CORNERS[p[1]] == chosen[pos]])
        )
        shapes = [first, second] + sample(
            rng, [x for x in _CORNER_SHAPES if x not in (first, second)], n - 2
        )
        objs = [
            Obj(sh, c, pick(rng, ("small", "large")), pick(rng, FILLS))
            for sh, c in zip(shapes, sample(rng, COLOURS, n))
        ]
        options = [str(v) for v in chosen]
        question = _T["facts_sum"].format(a=objs[0].colour, b=objs[1].colour)
    scene = Scene(arrange(rng, shuffled(rng, objs)), domain)
    return _letters(options, pos, scene, question, {"family": family})


_DIAGRAM_SPOTS = ((0.28, 0.28), (0.68, 0.28), (0.28, 0.72), (0.68, 0.72))


def diagram(ctx: Ctx) -> Draft:
    """TQA-0 twin: a diagram of shapes tagged with digit labels; label, shape and colour lookups."""
    rng = ctx.rng
    n = ctx.n_objects(low=3, high=4)
    shapes, colours = sample(rng, SHAPES, n), sample(rng, COLOURS, n)
    labels = [str(d) for d in shuffled(rng, range(1, n + 1))]
    spots = sample(rng, _DIAGRAM_SPOTS, n)
    objs = [
        Obj(
            s,
            c,
            "large",
            pick(rng, ("solid", "striped")),
            x=x + float(rng.uniform(-0.03, 0.03)),
            y=y + float(rng.uniform(-0.03, 0.03)),
            r=0.12,
            label=lab,
        )
        for s, c, lab, (x, y) in zip(shapes, colours, labels, spots)
    ]
    family = pick(rng, ("label", "shape", "colour"))
    k = int(rng.integers(n))
    target = objs[k]
    if family == "label":
        question = _T["diagram_label"].format(colour=target.colour, shape=target.shape)
        others = [str(d) for d in range(1, 5) if str(d) != target.label]
        options, pos = insert_gold(rng, target.label, sample(rng, others, 3))
        options = sorted(options)
        pos = options.index(target.label)
    elif family == "shape":
        question = _T["diagram_shape"].format(d=target.label)
        present = [o.shape for o in objs if o is not target]
        pool = present if ctx.near() else [s for s in SHAPES if s != target.shape]
        pool = (pool + [s for s in SHAPES if s not in pool and s != target.shape])[
            : max(3, len(pool))
        ]
        options, pos = insert_gold(rng, target.shape, sample(rng, pool, 3))
    else:
        question = _T["diagram_colour"].format(d=target.label)
        present = [o.colour for o in objs if o is not target]
        pool = present if ctx.near() else [c for c in COLOURS if c != target.colour]
        pool = (pool + [c for c in COLOURS if c not in pool and c != target.colour])[
            : max(3, len(pool))
        ]
        options, pos = insert_gold(rng, target.colour, sample(rng, pool, 3))
    return _letters(options, pos, Scene(tuple(objs), ctx.domain()), question, {"family": family})


def instance_attr(ctx: Ctx) -> Draft:
    """SEED-Bench-2-0 twin: the colour, shape or position of one instance; letters A-D.

    The four options are drawn before the gold (with probability closeness four neighbouring
    hues, two look-alike shape pairs or a 2 x 2 block of cells), then the asked-about object
    is given the gold value and the others avoid it.
    """
    rng = ctx.rng
    n = ctx.n_objects(low=2)
    family = pick(rng, ("colour", "shape", "where"))
    near = ctx.near()
    shapes, colours = sample(rng, SHAPES, n), sample(rng, COLOURS, n)
    cells = [int(c) for c in rng.choice(9, size=n, replace=False)]
    if family == "colour":
        options, pos = options_first(rng, COLOURS, 4, [pick(rng, HUE_WINDOWS)] if near else ())
        colours = [options[pos]] + sample(rng, [c for c in COLOURS if c != options[pos]], n - 1)
    elif family == "shape":
        options, pos = options_first(rng, SHAPES, 4, SHAPE_PAIRS if near else ())
        shapes = [options[pos]] + sample(rng, [s for s in SHAPES if s != options[pos]], n - 1)
    else:
        block = [pick(rng, CELL_BLOCKS)] if near else ()
        chosen, pos = options_first(rng, range(9), 4, block)
        cells = [chosen[pos]] + sample(rng, [c for c in range(9) if c != chosen[pos]], n - 1)
        options = [POSITIONS[c] for c in chosen]
    objs = [
        Obj(sh, c, pick(rng, ("small", "large")), pick(rng, FILLS))
        for sh, c in zip(shapes, colours)
    ]
    objs = list(arrange(rng, objs, cells=cells))
    target = objs[0]
    if family == "colour":
        question = _T["instance_colour"].format(shape=target.shape)
    elif family == "shape":
        question = _T["instance_shape"].format(colour=target.colour)
    else:
        question = _T["instance_where"].format(colour=target.colour, shape=target.shape)
    scene = Scene(tuple(shuffled(rng, objs)), ctx.domain())
    return _letters(options, pos, scene, question, {"family": family})


def bar_chart(ctx: Ctx) -> Draft:
    """DVQA-0 twin: a bar chart (bars named by colour, values 1-9 on a 10-step grid).

    Questions: tallest, shortest, a bar's value, a taller-than comparison (Yes/No), bar count.
    With probability closeness the values are drawn from a narrow window (near ties). Number
    options are drawn before the gold (four consecutive values).
    """
    rng = ctx.rng
    family = pick(rng, ("tallest", "shortest", "value", "taller", "count"))
    if family == "count":
        options, pos, n = window_options(rng, 3, 6, 4)
    else:
        n = ctx.n_objects(low=3, high=5)
    colours = sample(rng, COLOURS, n)
    if ctx.near():
        start = int(rng.integers(1, 10 - n + 1))
        values = [int(v) for v in rng.permutation(range(start, start + n))]
    else:
        values = [int(v) for v in rng.choice(range(1, 10), size=n, replace=False)]
    if family in ("tallest", "shortest"):
        k = (
            max(range(n), key=lambda i: values[i])
            if family == "tallest"
            else min(range(n), key=lambda i: values[i])
        )
        opts = [c for i, c in enumerate(colours) if i != k]
        options, pos = insert_gold(rng, colours[k], sample(rng, opts, min(3, len(opts))))
        question = _T["bar_" + family]
    elif family == "value":
        k = int(rng.integers(n))
        options, pos, gold = window_options(rng, 1, 9, 4)
        if gold in values:  # swap so that bar k shows the gold value and values stay distinct
            values[values.index(gold)] = values[k]
        values[k] = gold
        question = _T["bar_value"].format(colour=colours[k])
    elif family == "taller":
        i, j = sample(rng, range(n), 2)
        options = list(YES_NO)
        pos = 0 if values[i] > values[j] else 1
        question = _T["bar_taller"].format(a=colours[i], b=colours[j])
    else:
        question = _T["bar_count"]
    scene = Scene(bars=tuple(zip(colours, values)), domain=ctx.domain())
    prompt = _T["bar_prompt"].format(image=IMAGE, question=question, choices=choice_list(options))
    return Draft([scene], prompt, options[pos], options, meta={"family": family, "values": values})


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType(
    {
        "synth-dish-name": dish_name,
        "synth-count-open": count_open,
        "synth-quality-pair": quality_pair,
        "synth-shape-facts": shape_facts,
        "synth-diagram": diagram,
        "synth-dish-region": dish_region,
        "synth-count-choice": count_choice,
        "synth-quality-yesno": quality_yesno,
        "synth-quality-what": quality_what,
        "synth-bar-chart": bar_chart,
        "synth-dish-context": dish_context,
        "synth-count-arith": count_arith,
        "synth-count-easy": count_easy,
        "synth-quality-triple": quality_triple,
        "synth-instance-attr": instance_attr,
        "synth-dish-misleading": dish_misleading,
    }
)

TEXTS: tuple[str, ...] = (
    *_T.values(),
    *REGIONS,
    *(d.name for d in DISHES),
    *QUALITY_COMPARE,
    *QUALITY_YESNO,
    *CONTENT_YESNO,
    *QUALITY_WHAT,
    *DISTORTION_NAMES.values(),
    *CLARITY,
    *LIGHTING,
    *ORDINAL_IMAGES,
    *YES_NO,
)
