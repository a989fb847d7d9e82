"""Twins of the DRAKE *visual relation* tasks (clients 0-2): spatial, comparison, edit direction.

Each generator draws the gold answer first (True/False by a fair coin, the gold option at a
uniform position), then builds scenes that make it so. Shared primitives: :class:`Prop`
statements quantified over images (VISION, Fashion200K), :class:`Edit` operations (MagicBrush,
CIRR, FashionIQ) and grid relations (VSR, NLVR2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType

from drake.synth.common import (
    OPPOSITE,
    RELATIONS,
    Ctx,
    Draft,
    GenerationError,
    alternative_edit,
    apply_edit,
    choose_pattern,
    edits_differ,
    keys_of,
    prop_objects,
    random_edit,
    random_edits,
    random_objects,
    random_prop,
    relation_holds,
    scene_of,
    shared_background,
)
from drake.synth.scene import (
    COLOURS,
    DOMAINS,
    FILLS,
    NEAR_COLOURS,
    NEAR_SHAPES,
    RADIUS,
    SHAPES,
    Obj,
    Scene,
    arrange,
)
from drake.synth.text import (
    IMAGE,
    TRUE_FALSE,
    choice_list,
    coin,
    join_and,
    labelled_images,
    letter_options,
    options_first,
    pick,
    plural,
    sample,
    shuffled,
    window_options,
    with_article,
)

DEMON_CHOOSE = "You must choose your answer from the Choice List."
REL_TEXT = MappingProxyType(
    {"left of": "to the left of", "right of": "to the right of", "above": "above", "below": "below"}
)

QUANT_2: tuple[tuple[str, Callable[[tuple[int, ...]], bool]], ...] = (
    ("Both images contain {x}.", lambda p: all(p)),
    ("Neither image contains {x}.", lambda p: not any(p)),
    ("Exactly one of the two images contains {x}.", lambda p: sum(p) == 1),
    ("The first image contains {x}, but the second image does not.", lambda p: p == (1, 0)),
    ("The second image contains {x}, but the first image does not.", lambda p: p == (0, 1)),
)
QUANT_4: tuple[tuple[str, Callable[[tuple[int, ...]], bool]], ...] = (
    ("All four images contain {x}.", lambda p: all(p)),
    ("None of the four images contains {x}.", lambda p: not any(p)),
    ("Exactly one of the four images contains {x}.", lambda p: sum(p) == 1),
    ("Exactly two of the four images contain {x}.", lambda p: sum(p) == 2),
    ("Exactly three of the four images contain {x}.", lambda p: sum(p) == 3),
    ("At least two of the four images contain {x}.", lambda p: sum(p) >= 2),
    ("The first and the last image both contain {x}.", lambda p: bool(p[0] and p[3])),
)

_T = MappingProxyType(
    {
        "colour_count": "Count the {colour} objects in the three images. "
        + DEMON_CHOOSE
        + "\n{images}\nQuestion: How many {colour} objects are there in the three images "
        "together?\n{choices}",
        "edit_direction": "{images}\nEdit instruction: {edit}.\nWas the instruction applied to "
        "turn Image A into Image B, or to turn Image B into Image A? "
        + DEMON_CHOOSE
        + "\n{choices}",
        "pair_statement": "{images}\nIs the following statement about the two images true? "
        + DEMON_CHOOSE
        + "\nStatement: {statement}\n{choices}",
        "query_reference": "{images}\nDescription: compared with the reference image, the item "
        "in the query image {description}.\nDoes the description match the difference between "
        "the two images? " + DEMON_CHOOSE + "\n{choices}",
        "spatial": "For a given image and caption, your task is to determine whether the caption "
        "correctly describe the spatial relationship between objects in the image. "
        + DEMON_CHOOSE
        + "\n{images}\nCaption: {caption}\n{choices}",
        "spatial_caption": "The {a} is {rel} the {b}.",
        "quad_statement": "{images}\nIs the following statement about the four images true? "
        + DEMON_CHOOSE
        + "\nStatement: {statement}\n{choices}",
        "quad_colour": "{images}\nDecide whether the statement about the main items of the four "
        "images is true. " + DEMON_CHOOSE + "\nStatement: {statement}\n{choices}",
        "quad_colour_same": "The main items in the four images all have the same colour.",
        "quad_colour_named": "The main items in all four images are {colour}.",
        "pair_images": "Left image: {image}\nRight image: {image}",
        "pair_compare": "{images}\nDecide whether the statement is true for the pair of images. "
        + DEMON_CHOOSE
        + "\nStatement: {statement}\n{choices}",
        "more": "The left image contains more {things} than the right image.",
        "fewer": "The left image contains fewer {things} than the right image.",
        "same": "The two images contain the same number of {things}.",
        "more_objects": "The right image contains more objects than the left image.",
        "side_spatial": "In the {side} image, the {a} is {rel} the {b}.",
        "side_colour": "All objects in the {side} image are {colour}.",
        "side_count": "The {side} image contains exactly {n} objects.",
        "motion": "The following images are frames of a short video, in order.\n{images}\n"
        "Question: What happens to the {shape} in the video?\n{options}",
        "triple_style": "{images}\nDecide whether the statement about the style of the three "
        "images is true. " + DEMON_CHOOSE + "\nStatement: {statement}\n{choices}",
        "style_same": "The three images are drawn in the same style.",
        "style_named": "All three images are drawn in the {domain} style.",
        "transition": "Reference image: {image}\nTarget image: {image}\nModification: {text}.\n"
        "Does the modification describe how the reference image changes into the target image? "
        + DEMON_CHOOSE
        + "\n{choices}",
        "desc_colour": "is {colour}",
        "desc_fill": "is {fill}",
        "desc_shape": "is {shape}",
    }
)
DIRECTIONS = ("A to B", "B to A")
SIDES = ("left", "right")
MOTIONS = (
    "It moves to the left",
    "It moves to the right",
    "It moves up",
    "It moves down",
    "It grows larger",
    "It shrinks",
    "It changes colour",
    "It stays still",
)
MOTION_OPPOSITE = MappingProxyType({0: 1, 1: 0, 2: 3, 3: 2, 4: 5, 5: 4, 6: 7, 7: 6})


def _tf(ctx: Ctx) -> bool:
    return coin(ctx.rng)


def _images(n: int) -> str:
    return "\n".join([IMAGE] * n)


# ---------------------------------------------------------------------------------------------
# client 0


def colour_count(ctx: Ctx) -> Draft:
    """Fashion200K-0 twin: count the objects of a named colour across three images.

    Options first: four consecutive counts inside the ``count`` knob, the total uniform among
    them. The total is spread over the images at random (at most ``objects[1]`` per image).
    Other objects take a neighbouring hue with probability ``closeness``.
    """
    rng, kn = ctx.rng, ctx.knobs
    colour = pick(rng, COLOURS)
    cap = max(1, kn.objects[1])
    options, _, total = window_options(rng, kn.count[0], min(kn.count[1], 3 * cap), 4)
    if total > 3 * cap:
        raise GenerationError(f"{total} objects do not fit three images of at most {cap}")
    per = [0, 0, 0]
    for _ in range(total):
        per[pick(rng, [i for i in range(3) if per[i] < cap])] += 1
    domain = ctx.domain()
    scenes = []
    for t in per:
        n = max(t, ctx.n_objects(), 1)
        objs = random_objects(rng, t, colours=(colour,))
        others = NEAR_COLOURS[colour] if ctx.near() else tuple(c for c in COLOURS if c != colour)
        objs += random_objects(rng, n - t, colours=others, taken=keys_of(objs))
        scenes.append(scene_of(ctx, objs, domain))
    prompt = _T["colour_count"].format(
        colour=colour, images=_images(3), choices=choice_list(options)
    )
    return Draft(scenes, prompt, str(total), options, meta={"per_image": per, "colour": colour})


def edit_direction(ctx: Ctx, n_edits: int = 1) -> Draft:
    """MagicBrush-0 twin: was the edit instruction applied A->B or B->A (gold by a fair coin)?"""
    rng = ctx.rng
    objs = arrange(rng, random_objects(rng, ctx.n_objects(low=2)))
    edits, after = random_edits(rng, objs, n_edits)
    forward = _tf(ctx)
    domain, bg = ctx.domain(), shared_background(rng)
    first, second = (objs, after) if forward else (after, objs)
    scenes = [Scene(first, domain, bg_seed=bg), Scene(second, domain, bg_seed=bg)]
    text = join_and([e.text for e in edits])
    prompt = _T["edit_direction"].format(
        images=labelled_images(("Image A", "Image B")), edit=text, choices=choice_list(DIRECTIONS)
    )
    answer = DIRECTIONS[0] if forward else DIRECTIONS[1]
    return Draft(scenes, prompt, answer, DIRECTIONS, meta={"edits": [e.text for e in edits]})


def _quantified(ctx: Ctx, n_images: int, quants, kinds) -> tuple[list[Scene], str, bool, dict]:
    rng = ctx.rng
    prop = random_prop(rng, kinds)
    template, pred = pick(rng, quants)
    truth = _tf(ctx)
    pattern = choose_pattern(ctx, n_images, pred, truth)
    domain = ctx.domain()
    scenes = [
        scene_of(ctx, prop_objects(ctx, prop, bool(p), ctx.n_objects(low=1)), domain)
        for p in pattern
    ]
    statement = template.format(x=prop.phrase())
    return scenes, statement, truth, {"pattern": list(pattern), "statement": statement}


def pair_statement(ctx: Ctx) -> Draft:
    """VISION-0 twin: a quantified statement ("Both images contain a star.") over two images."""
    scenes, statement, truth, meta = _quantified(ctx, 2, QUANT_2, ("shape", "colour", "pair"))
    prompt = _T["pair_statement"].format(
        images=_images(2), statement=statement, choices=choice_list(TRUE_FALSE)
    )
    return Draft(scenes, prompt, TRUE_FALSE[0] if truth else TRUE_FALSE[1], TRUE_FALSE, meta=meta)


#: Radius of a garment that fills its picture (Fashion200K's dominant colour).
GARMENT_RADIUS = 0.24


def _garment(rng, shape: str, colour: str, fill: str, radius: float = GARMENT_RADIUS) -> Obj:
    """One item in the picture's centre (``radius`` times a factor in [0.92, 1.08])."""
    return Obj(
        shape,
        colour,
        "large",
        fill,
        x=0.5 + float(rng.uniform(-0.05, 0.05)),
        y=0.5 + float(rng.uniform(-0.05, 0.05)),
        r=radius * float(rng.uniform(0.92, 1.08)),
    )


def _accessories(ctx: Ctx, item: Obj, colours=COLOURS, extra: int = 0) -> tuple[Obj, ...]:
    """Small objects in the image corners around a central item (``objects`` knob minus one)."""
    n = min(4, max(0, ctx.n_objects() - 1 + extra))
    objs = random_objects(ctx.rng, n, sizes=("small",), colours=colours, taken=[item.key()])
    return arrange(ctx.rng, objs, cells=sample(ctx.rng, (0, 2, 6, 8), n), jitter=0.01)


def query_reference(ctx: Ctx) -> Draft:
    """FashionIQ-0 twin: does "the query item is blue and striped" describe query vs reference?

    The reference item differs from the query in one or two of colour, fill and shape; the
    description lists the query's new values. A false description swaps one of them for a value
    neither image has (a neighbouring hue or look-alike shape with probability closeness), so
    true and false descriptions are alike in length and wording. Both items have the size of a
    large shape in any scene: drawn to fill the picture (:data:`GARMENT_RADIUS`), their shape
    and fill were not read (claims about them stayed at chance under a client's LoRA; the
    dataset card, *Items at the size the tower reads*).
    """
    rng = ctx.rng
    shape, colour, fill = pick(rng, SHAPES), pick(rng, COLOURS), pick(rng, FILLS)
    changed = sample(rng, ("colour", "fill", "shape"), 1 + int(rng.integers(2)))
    q = {"shape": shape, "colour": colour, "fill": fill}
    ref = dict(q)
    for attr in changed:
        pool = {"colour": COLOURS, "fill": FILLS, "shape": SHAPES}[attr]
        ref[attr] = pick(rng, [v for v in pool if v != q[attr]])
    truth = _tf(ctx)
    claims = {attr: q[attr] for attr in changed}
    if not truth:
        attr = pick(rng, changed)
        pool = {"colour": COLOURS, "fill": FILLS, "shape": SHAPES}[attr]
        near = {"colour": NEAR_COLOURS, "shape": NEAR_SHAPES}.get(attr)
        wrong = [v for v in pool if v not in (q[attr], ref[attr])]
        if near is not None and ctx.near():
            wrong = [v for v in near[q[attr]] if v != ref[attr]] or wrong
        claims[attr] = pick(rng, wrong)
    parts = []
    for attr in ("shape", "colour", "fill"):
        if attr in claims:
            value = with_article(claims[attr]) if attr == "shape" else claims[attr]
            parts.append(_T["desc_" + attr].format(**{attr: value}))
    description = join_and(shuffled(rng, parts))
    domain = ctx.domain()
    query_item = _garment(rng, q["shape"], q["colour"], q["fill"], RADIUS["large"])
    ref_item = _garment(rng, ref["shape"], ref["colour"], ref["fill"], RADIUS["large"])
    scenes = [
        Scene((query_item, *_accessories(ctx, query_item)), domain),
        Scene((ref_item, *_accessories(ctx, ref_item)), domain),
    ]
    prompt = _T["query_reference"].format(
        images=labelled_images(("Query Image", "Reference Image")),
        description=description,
        choices=choice_list(TRUE_FALSE),
    )
    return Draft(
        scenes,
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"changed": changed, "description": description},
    )


# ---------------------------------------------------------------------------------------------
# client 1


def _relation_pair(ctx: Ctx, objs, truth: bool) -> tuple[Obj, Obj, str]:
    """Two objects of ``objs`` and a relation that holds (truth) or not (near: the opposite)."""
    rng = ctx.rng
    pairs = [(a, b) for a in objs for b in objs if a is not b and a.cell() != b.cell()]
    a, b = pick(rng, pairs)
    holding = [r for r in RELATIONS if relation_holds(a, b, r)]
    if truth:
        return a, b, pick(rng, holding)
    failing = [r for r in RELATIONS if r not in holding]
    if ctx.near():
        return a, b, OPPOSITE[pick(rng, holding)]
    return a, b, pick(rng, failing)


def spatial(ctx: Ctx) -> Draft:
    """VSR-0 twin: is "The red square is to the left of the blue circle." true of the image?"""
    rng = ctx.rng
    objs = arrange(rng, random_objects(rng, ctx.n_objects(low=2)))
    truth = _tf(ctx)
    a, b, rel = _relation_pair(ctx, objs, truth)
    caption = _T["spatial_caption"].format(a=a.describe(), rel=REL_TEXT[rel], b=b.describe())
    prompt = _T["spatial"].format(images=IMAGE, caption=caption, choices=choice_list(TRUE_FALSE))
    return Draft(
        [Scene(objs, ctx.domain())],
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"caption": caption},
    )


def quad_statement(ctx: Ctx) -> Draft:
    """VISION-1 twin: a quantified statement ("Exactly two of the four images contain ...")."""
    scenes, statement, truth, meta = _quantified(
        ctx, 4, QUANT_4, ("shape", "colour", "pair", "fill")
    )
    prompt = _T["quad_statement"].format(
        images=_images(4), statement=statement, choices=choice_list(TRUE_FALSE)
    )
    return Draft(scenes, prompt, TRUE_FALSE[0] if truth else TRUE_FALSE[1], TRUE_FALSE, meta=meta)


def quad_colour(ctx: Ctx) -> Draft:
    """Fashion200K-2 twin: do the main items of four images share (the named) colour?

    A false case recolours one item (probability closeness, to a neighbouring hue) or 1-3
    items at random; small accessories never take the shared colour.
    """
    rng = ctx.rng
    colour = pick(rng, COLOURS)
    named = coin(rng)
    truth = _tf(ctx)
    colours = [colour] * 4
    if not truth:
        near = ctx.near()
        k = 1 if near else int(rng.integers(1, 4))
        if named and not near and coin(rng, 0.25):
            k = 4
        others = NEAR_COLOURS[colour] if near else tuple(c for c in COLOURS if c != colour)
        for i in sample(rng, range(4), k):
            colours[i] = pick(rng, others)
        if not named and len(set(colours)) == 1:
            colours[int(rng.integers(4))] = colour
    domain = ctx.domain()
    scenes = []
    for c in colours:
        item = _garment(rng, pick(rng, SHAPES), c, pick(rng, FILLS))
        acc = _accessories(ctx, item, colours=[x for x in COLOURS if x != colour], extra=1)
        scenes.append(Scene((item, *acc), domain))
    statement = _T["quad_colour_named"].format(colour=colour) if named else _T["quad_colour_same"]
    prompt = _T["quad_colour"].format(
        images=_images(4), statement=statement, choices=choice_list(TRUE_FALSE)
    )
    return Draft(
        scenes,
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"item_colours": colours, "statement": statement},
    )


def _count_pairs(ctx: Ctx, pred, truth: bool, lo: int, hi: int) -> tuple[int, int]:
    pairs = [(a, b) for a in range(lo, hi + 1) for b in range(lo, hi + 1) if pred(a, b) == truth]
    if ctx.near():
        pairs = [p for p in pairs if abs(p[0] - p[1]) <= 1] or pairs
    return pick(ctx.rng, pairs)


def pair_count(ctx: Ctx) -> Draft:
    """NLVR2-0 twin: count comparisons across a left and a right image ("more stars than")."""
    rng, kn = ctx.rng, ctx.knobs
    family = pick(rng, ("more", "fewer", "same", "more_objects"))
    truth = _tf(ctx)
    lo, hi = kn.count
    domain = ctx.domain()
    if family == "more_objects":
        left_n, right_n = _count_pairs(ctx, lambda a, b: b > a, truth, max(1, lo), max(hi, 2) + 1)
        scenes = [scene_of(ctx, random_objects(rng, n), domain) for n in (left_n, right_n)]
        statement = _T["more_objects"]
        counts = [left_n, right_n]
    else:
        pred = {
            "more": lambda a, b: a > b,
            "fewer": lambda a, b: a < b,
            "same": lambda a, b: a == b,
        }[family]
        shape = pick(rng, SHAPES)
        counts = list(_count_pairs(ctx, pred, truth, lo, hi))
        scenes = []
        for c in counts:
            objs = random_objects(rng, c, shapes=(shape,))
            objs += random_objects(rng, ctx.n_objects(), shapes=[s for s in SHAPES if s != shape])
            if not objs:
                objs = random_objects(rng, 1, shapes=[s for s in SHAPES if s != shape])
            scenes.append(scene_of(ctx, objs, domain))
        statement = _T[family].format(things=plural(shape))
    prompt = _T["pair_compare"].format(
        images=_T["pair_images"].format(image=IMAGE),
        statement=statement,
        choices=choice_list(TRUE_FALSE),
    )
    return Draft(
        scenes,
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"counts": counts, "statement": statement},
    )


# ---------------------------------------------------------------------------------------------
# client 2


def motion(ctx: Ctx) -> Draft:
    """SEED-Bench-2-2 twin: 4-8 frames of a shape that moves, grows, shrinks, recolours or rests.

    Options are four of the eight motion phrases, drawn before the gold: with probability
    closeness two pairs of opposites (so the gold's opposite is a distractor), else four at
    random. Static clutter stays off the moving shape's path.
    """
    rng = ctx.rng
    frames = int(rng.integers(4, 9))
    pairs = [(i, MOTION_OPPOSITE[i]) for i in range(0, len(MOTIONS), 2)]
    options, pos = options_first(rng, range(len(MOTIONS)), 4, pairs if ctx.near() else ())
    gold = options[pos]
    shape, colour, fill = pick(rng, SHAPES), pick(rng, COLOURS), pick(rng, FILLS)
    lane = int(rng.integers(3))
    if gold in (0, 1):
        free = [c for c in range(9) if c // 3 != lane]
    elif gold in (2, 3):
        free = [c for c in range(9) if c % 3 != lane]
    else:
        free = [0, 2, 6, 8]
    statics = random_objects(
        rng, min(ctx.n_objects(), len(free)), shapes=[s for s in SHAPES if s != shape]
    )
    statics = arrange(rng, statics, cells=sample(rng, free, len(statics)), jitter=0.0)
    other_colour = pick(rng, [c for c in COLOURS if c != colour])
    domain, bg = ctx.domain(), shared_background(rng)
    scenes = []
    for f in range(frames):
        t = f / (frames - 1)
        x = y = 0.5
        r = 0.12
        c = colour
        lane_pos = (lane + 0.5) / 3
        if gold in (0, 1):
            x, y = (0.82 - 0.64 * t if gold == 0 else 0.18 + 0.64 * t), lane_pos
        elif gold in (2, 3):
            x, y = lane_pos, (0.82 - 0.64 * t if gold == 2 else 0.18 + 0.64 * t)
        elif gold == 4:
            r = 0.06 + 0.12 * t
        elif gold == 5:
            r = 0.18 - 0.12 * t
        elif gold == 6 and f >= frames // 2:
            c = other_colour
        main = Obj(shape, c, "large", fill, x=x, y=y, r=r)
        scenes.append(Scene((main, *statics), domain, bg_seed=bg))
    prompt = _T["motion"].format(
        images=_images(frames), shape=shape, options=letter_options([MOTIONS[i] for i in options])
    )
    letter = "ABCD"[pos]
    return Draft(
        scenes, prompt, letter, tuple("ABCD"), meta={"motion": MOTIONS[gold], "frames": frames}
    )


def triple_style(ctx: Ctx) -> Draft:
    """Fashion200K-1 twin: are three images drawn in the same (named) style (= domain)?"""
    rng = ctx.rng
    domain = pick(rng, ctx.domains)
    named = coin(rng)
    truth = _tf(ctx)
    domains = [domain] * 3
    if not truth:
        near = ctx.near()
        if named and not near and coin(rng, 0.3):
            domains = [pick(rng, [d for d in ctx.domains if d != domain])] * 3
        else:
            k = 1 if near else int(rng.integers(1, 3))
            for i in sample(rng, range(3), k):
                domains[i] = pick(rng, [d for d in ctx.domains if d != domain])
    scenes = [scene_of(ctx, random_objects(rng, ctx.n_objects(low=1)), d) for d in domains]
    statement = _T["style_named"].format(domain=domain) if named else _T["style_same"]
    prompt = _T["triple_style"].format(
        images=_images(3), statement=statement, choices=choice_list(TRUE_FALSE)
    )
    return Draft(
        scenes,
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"statement": statement},
    )


def pair_relation(ctx: Ctx) -> Draft:
    """NLVR2-1 twin: relation, homogeneity and exact-count statements about one of two images."""
    rng, kn = ctx.rng, ctx.knobs
    family = pick(rng, ("spatial", "colour", "count"))
    truth = _tf(ctx)
    side = int(rng.integers(2))
    domain = ctx.domain()
    if family == "spatial":
        objs = arrange(rng, random_objects(rng, ctx.n_objects(low=2)))
        a, b, rel = _relation_pair(ctx, objs, truth)
        statement = _T["side_spatial"].format(
            side=SIDES[side], a=a.describe(), rel=REL_TEXT[rel], b=b.describe()
        )
        focus = Scene(objs, domain)
    elif family == "colour":
        colour = pick(rng, COLOURS)
        n = max(2, ctx.n_objects(low=2))
        objs = random_objects(rng, n, colours=(colour,))
        if not truth:
            near = ctx.near()
            others = NEAR_COLOURS[colour] if near else tuple(c for c in COLOURS if c != colour)
            k = 1 if near else int(rng.integers(1, n + 1))
            for i in sample(rng, range(n), k):
                objs[i] = replace(objs[i], colour=pick(rng, others))
            if len(set(keys_of(objs))) != n:
                objs = [replace(o, shape=s) for o, s in zip(objs, sample(rng, SHAPES, n))]
        statement = _T["side_colour"].format(side=SIDES[side], colour=colour)
        focus = scene_of(ctx, objs, domain)
    else:
        lo, hi = max(1, kn.count[0]), max(kn.count[1], 2)
        n = int(rng.integers(lo, hi + 1))
        actual = n
        if not truth:
            actual = (
                n + pick(rng, [d for d in (-1, 1) if lo <= n + d <= 9])
                if ctx.near()
                else pick(rng, [v for v in range(1, 9) if v != n])
            )
        statement = _T["side_count"].format(side=SIDES[side], n=n)
        focus = scene_of(ctx, random_objects(rng, actual), domain)
    other = scene_of(ctx, random_objects(rng, ctx.n_objects(low=1)), domain)
    scenes = [focus, other] if side == 0 else [other, focus]
    prompt = _T["pair_compare"].format(
        images=_T["pair_images"].format(image=IMAGE),
        statement=statement,
        choices=choice_list(TRUE_FALSE),
    )
    return Draft(
        scenes,
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"family": family, "statement": statement},
    )


def transition(ctx: Ctx) -> Draft:
    """CIRR-0 twin: does the modification text turn the reference image into the target image?

    One or two edits; a false pair replaces the last edit's outcome by an edit of the same kind
    with another value (probability closeness) or by a random different edit.
    """
    rng = ctx.rng
    ref = arrange(rng, random_objects(rng, ctx.n_objects(low=2)))
    k = 1 + int(rng.integers(2))
    edits, target = random_edits(rng, ref, k)
    truth = _tf(ctx)
    if not truth:
        before = ref
        for e in edits[:-1]:
            before = apply_edit(before, e)
        alt = None
        if not ctx.near():
            for _ in range(30):
                cand = random_edit(rng, before)
                if edits_differ(before, edits[-1], cand):
                    alt = cand
                    break
        if alt is None:
            alt = alternative_edit(rng, before, edits[-1])
        target = apply_edit(before, alt)
    domain, bg = ctx.domain(), shared_background(rng)
    text = join_and([e.text for e in edits])
    prompt = _T["transition"].format(image=IMAGE, text=text, choices=choice_list(TRUE_FALSE))
    scenes = [Scene(ref, domain, bg_seed=bg), Scene(target, domain, bg_seed=bg)]
    return Draft(
        scenes,
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"modification": text},
    )


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType(
    {
        "synth-colour-count": colour_count,
        "synth-edit-direction": edit_direction,
        "synth-pair-statement": pair_statement,
        "synth-query-reference": query_reference,
        "synth-spatial": spatial,
        "synth-quad-statement": quad_statement,
        "synth-quad-colour": quad_colour,
        "synth-pair-count": pair_count,
        "synth-motion": motion,
        "synth-triple-style": triple_style,
        "synth-pair-relation": pair_relation,
        "synth-transition": transition,
    }
)

TEXTS: tuple[str, ...] = (
    *_T.values(),
    *(q for q, _ in QUANT_2),
    *(q for q, _ in QUANT_4),
    *DIRECTIONS,
    *MOTIONS,
    *REL_TEXT.values(),
    *SIDES,
    "add remove make move to the larger smaller",
    " and ",
    ", ",
    *DOMAINS,
)
