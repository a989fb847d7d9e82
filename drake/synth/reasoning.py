"""Twins of the DRAKE *multi-modal reasoning* tasks (clients 3-5).

Three families of shared concepts make the reasoning twins resemble one another:

* **figures** (IRFL twins): named patterns of primitives ("a crowd", "twins", "a tower", "fire")
  each with an idiom, a metaphor, a simile and a plain phrase, a builder for positive images,
  one for near misses, and a predicate that checks any scene;
* **relations** (Bongard-HOI twins): how a small solid shape sits relative to a large outlined
  one (above, below, inside, left of, right of, far from);
* **attribute concepts** (Bongard-OpenWorld twins): "a red star", "a striped object",
  "exactly 3 objects".

VizWiz, MIT-States and COMICS twins use degradations, object states and panel sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from drake.synth.common import (
    Ctx,
    Draft,
    GenerationError,
    Prop,
    keys_of,
    prop_objects,
    random_objects,
    random_prop,
    scene_of,
    shared_background,
)
from drake.synth.relation import DEMON_CHOOSE
from drake.synth.scene import (
    COLOURS,
    COOL_COLOURS,
    FILLS,
    NEAR_COLOURS,
    SHAPES,
    WARM_COLOURS,
    Obj,
    Scene,
    arrange,
)
from drake.synth.text import (
    IMAGE,
    LETTERS,
    TRUE_FALSE,
    choice_list,
    coin,
    image_names,
    insert_gold,
    labelled_images,
    options_first,
    pick,
    plural,
    sample,
    shuffled,
    window_options,
)

POS_NEG = ("Positive", "Negative")

_T = MappingProxyType(
    {
        "figure_image": '{images}\nWhich image best illustrates the {kind} "{text}"? '
        + DEMON_CHOOSE
        + "\n{choices}",
        "figure_tf": '{image}\nPhrase: "{text}"\nIs the phrase a fitting figurative description '
        "of the image? " + DEMON_CHOOSE + "\n{choices}",
        "phrase_for_image": "{image}\nWhich phrase describes the image best in a figurative way? "
        + DEMON_CHOOSE
        + "\n{choices}",
        "common_relation": "{images}\nIn each of the six images, a small solid shape sits near a "
        "large outlined shape in the same way. Where is the small shape relative to the large "
        "one? " + DEMON_CHOOSE + "\n{choices}",
        "odd_relation": "{images}\nThree of the images show the small solid shape in the same "
        "place relative to the large outlined shape. Which image does not? "
        + DEMON_CHOOSE
        + "\n{choices}",
        "query": "Positive: {pos}\nNegative: {neg}\nQuery: {query}\nThe positive images follow a "
        "rule that the negative images break. Does the query image follow the rule? Answer "
        "Positive if it does and Negative if it does not.\n{choices}",
        "common_concept": "{images}\nAll six images show one common concept. Which concept is "
        "it? " + DEMON_CHOOSE + "\n{choices}",
        "concept_count": "exactly {n} objects",
        "story": "{images}\nThe three panels tell a short story. Which caption describes the next "
        "panel?\n{options}\nAnswer with the letter of the caption.",
        "answerable": "A blind person took the photo below and asked a question about it.\n"
        "{image}\nQuestion: {question}\nStatement: the question can be answered from the photo. "
        + DEMON_CHOOSE
        + "\n{choices}",
        "ask_colour": "What colour is the {shape}?",
        "ask_shape": "What shape is the {colour} object?",
        "state": "{image}\nWhat state is the {shape} in? " + DEMON_CHOOSE + "\n{choices}",
    }
)

# ---------------------------------------------------------------------------------------------
# figures


def _place_random(rng, objs: Sequence[Obj]) -> tuple[Obj, ...]:
    return arrange(rng, objs)


def _line(rng, objs: Sequence[Obj], vertical: bool, shift: bool) -> tuple[Obj, ...]:
    lane = int(rng.integers(3))
    cells = [lane + 3 * k for k in range(3)] if vertical else [3 * lane + k for k in range(3)]
    if shift:
        k = int(rng.integers(3))
        step = 1 if (lane == 0 or (lane == 1 and coin(rng))) else -1
        cells[k] += step if vertical else 3 * step
    return arrange(rng, objs, cells=cells, jitter=0.02)


def _fig_crowd(rng, near: bool) -> tuple[Obj, ...]:
    n = int(rng.integers(4, 6)) if near else int(rng.integers(6, 9))
    colours = sample(rng, COLOURS, 2)
    return _place_random(rng, random_objects(rng, n, colours=colours, sizes=("small",)))


def _fig_lonely(rng, near: bool) -> tuple[Obj, ...]:
    if near:
        if coin(rng):
            return _place_random(rng, random_objects(rng, 1, sizes=("large",)))
        return _place_random(rng, random_objects(rng, 2, sizes=("small",)))
    return _place_random(rng, random_objects(rng, 1, sizes=("small",)))


def _fig_twins(rng, near: bool) -> tuple[Obj, ...]:
    base = random_objects(rng, 1)[0]
    other = replace(base, colour=pick(rng, NEAR_COLOURS[base.colour])) if near else base
    return _place_random(rng, [base, other])


def _fig_rainbow(rng, near: bool) -> tuple[Obj, ...]:
    n = int(rng.integers(4, 6))
    if near:
        colours = sample(rng, COLOURS, 2)
        return _place_random(rng, random_objects(rng, n, colours=colours))
    colours = sample(rng, COLOURS, n)
    objs = [replace(o, colour=c) for o, c in zip(random_objects(rng, n), colours)]
    return _place_random(rng, objs)


def _fig_palette(palette: Sequence[str], other: Sequence[str]):
    def build(rng, near: bool) -> tuple[Obj, ...]:
        n = int(rng.integers(2, 4))
        objs = random_objects(rng, n, colours=palette)
        if near:
            objs[0] = replace(objs[0], colour=pick(rng, other))
        return _place_random(rng, objs)

    return build


def _fig_tower(rng, near: bool) -> tuple[Obj, ...]:
    return _line(rng, random_objects(rng, 3), vertical=True, shift=near)


def _fig_queue(rng, near: bool) -> tuple[Obj, ...]:
    return _line(rng, random_objects(rng, 3), vertical=False, shift=near)


def _fig_black_sheep(rng, near: bool) -> tuple[Obj, ...]:
    n = int(rng.integers(3, 6))
    colour = pick(rng, COLOURS)
    objs = random_objects(rng, n, colours=(colour,))
    odd = [] if near and coin(rng) else [0] if not near else [0, 1]
    others = [c for c in COLOURS if c != colour]
    for i in odd:
        objs[i] = replace(objs[i], colour=pick(rng, others))
    return _place_random(rng, objs)


def _fig_fill(fill: str):
    def build(rng, near: bool) -> tuple[Obj, ...]:
        n = int(rng.integers(2, 5))
        objs = random_objects(rng, n, fills=(fill,))
        if near:
            objs[0] = replace(objs[0], fill=pick(rng, [f for f in FILLS if f != fill]))
        return _place_random(rng, objs)

    return build


def _fig_big_fish(rng, near: bool) -> tuple[Obj, ...]:
    n = int(rng.integers(4, 6))
    objs = random_objects(rng, n, sizes=("small",))
    big = [] if near and coin(rng) else [0] if not near else [0, 1]
    for i in big:
        objs[i] = replace(objs[i], size="large")
    return _place_random(rng, objs)


def _fig_broken_heart(rng, near: bool) -> tuple[Obj, ...]:
    colour = pick(rng, COLOURS)
    if near and coin(rng):
        main = Obj("heart", colour, "large", "solid")
    elif near:
        main = Obj(
            pick(rng, [s for s in SHAPES if s != "heart"]), colour, "large", "solid", state="broken"
        )
    else:
        main = Obj("heart", colour, "large", "solid", state="broken")
    extra = random_objects(
        rng, int(rng.integers(2)), shapes=[s for s in SHAPES if s != "heart"], taken=[main.key()]
    )
    return _place_random(rng, [main, *extra])


def _all_same_column(objs) -> bool:
    return len({o.cell() % 3 for o in objs}) == 1


def _all_same_row(objs) -> bool:
    return len({o.cell() // 3 for o in objs}) == 1


@dataclass(frozen=True)
class Figure:
    """A figurative pattern: its texts, a builder (positive or near miss) and a predicate."""

    name: str
    idiom: str
    metaphor: str
    simile: str
    phrase: str
    build: Callable[[np.random.Generator, bool], tuple[Obj, ...]]
    holds: Callable[[Sequence[Obj]], bool]

    def text(self, kind: str) -> str:
        """The figure's ``idiom``, ``metaphor``, ``simile`` or ``phrase``."""
        return getattr(self, kind)


FIGURES: tuple[Figure, ...] = (
    Figure(
        "crowd",
        "packed like sardines",
        "the picture is a beehive",
        "the shapes are like bees in a hive",
        "a crowded scene",
        _fig_crowd,
        lambda o: len(o) >= 6,
    ),
    Figure(
        "lonely",
        "a lone wolf",
        "the shape is an island",
        "as lonely as a lighthouse",
        "a lonely little shape",
        _fig_lonely,
        lambda o: len(o) == 1 and o[0].size == "small",
    ),
    Figure(
        "twins",
        "two peas in a pod",
        "the shapes are mirror images",
        "as alike as two drops of water",
        "a matching pair",
        _fig_twins,
        lambda o: (
            len(o) == 2
            and (o[0].shape, o[0].colour, o[0].fill) == (o[1].shape, o[1].colour, o[1].fill)
        ),
    ),
    Figure(
        "rainbow",
        "every colour under the sun",
        "the picture is a rainbow",
        "as colourful as a parrot",
        "a burst of colour",
        _fig_rainbow,
        lambda o: len(o) >= 4 and len({x.colour for x in o}) == len(o),
    ),
    Figure(
        "fire",
        "red hot",
        "the shapes are flames",
        "as warm as a fireplace",
        "a warm scene",
        _fig_palette(WARM_COLOURS, COOL_COLOURS),
        lambda o: len(o) >= 2 and all(x.colour in WARM_COLOURS for x in o),
    ),
    Figure(
        "ice",
        "cold as ice",
        "the shapes are icebergs",
        "as cool as the sea",
        "a cold scene",
        _fig_palette(COOL_COLOURS, WARM_COLOURS),
        lambda o: len(o) >= 2 and all(x.colour in COOL_COLOURS for x in o),
    ),
    Figure(
        "tower",
        "a tower of strength",
        "the shapes are a ladder",
        "stacked like plates",
        "a tall stack",
        _fig_tower,
        lambda o: len(o) >= 3 and _all_same_column(o),
    ),
    Figure(
        "queue",
        "all in a row",
        "the shapes are a train",
        "lined up like soldiers",
        "a long line",
        _fig_queue,
        lambda o: len(o) >= 3 and _all_same_row(o),
    ),
    Figure(
        "black sheep",
        "the black sheep of the family",
        "one shape is a stranger",
        "like a fox among hens",
        "one does not belong",
        _fig_black_sheep,
        lambda o: len(o) >= 3 and max(sum(x.colour == c for x in o) for c in COLOURS) == len(o) - 1,
    ),
    Figure(
        "ghost",
        "a shadow of its former self",
        "the shapes are ghosts",
        "as empty as a shell",
        "hollow shapes",
        _fig_fill("outlined"),
        lambda o: len(o) >= 2 and all(x.fill == "outlined" for x in o),
    ),
    Figure(
        "zebra",
        "earn your stripes",
        "the shapes are zebras",
        "striped like a tiger",
        "stripes everywhere",
        _fig_fill("striped"),
        lambda o: len(o) >= 2 and all(x.fill == "striped" for x in o),
    ),
    Figure(
        "big fish",
        "a big fish in a small pond",
        "the large shape is a giant",
        "like an elephant among mice",
        "one giant among little ones",
        _fig_big_fish,
        lambda o: len(o) >= 4 and sum(x.size == "large" for x in o) == 1,
    ),
    Figure(
        "broken heart",
        "a broken heart",
        "the heart is shattered glass",
        "as fragile as glass",
        "heartbreak",
        _fig_broken_heart,
        lambda o: any(x.shape == "heart" and x.state == "broken" for x in o),
    ),
)


def _figure_scene(
    ctx: Ctx, fig: Figure, positive: bool, avoid: Sequence[Figure], domain: str, tries: int = 40
) -> tuple[Obj, ...]:
    """Objects showing ``fig`` (positive) or a scene without it (near miss with probability
    closeness, else another figure), and never showing any figure of ``avoid``."""
    rng = ctx.rng
    for _ in range(tries):
        if positive:
            objs = fig.build(rng, False)
        elif ctx.near():
            objs = fig.build(rng, True)
        else:
            objs = pick(rng, [f for f in FIGURES if f is not fig]).build(rng, False)
        ok = fig.holds(objs) == positive and not any(f.holds(objs) for f in avoid if f is not fig)
        if ok:
            return objs
    raise GenerationError(f"could not draw a scene for figure {fig.name!r}")


def _figure_choice(ctx: Ctx, kinds: Sequence[str]) -> Draft:
    rng = ctx.rng
    fig = pick(rng, FIGURES)
    kind = pick(rng, kinds)
    domain = ctx.domain()
    pos = int(rng.integers(4))
    scenes = []
    for i in range(4):
        objs = _figure_scene(ctx, fig, i == pos, (), domain)
        scenes.append(Scene(objs, domain))
    names = image_names(4)
    prompt = _T["figure_image"].format(
        images=labelled_images(names), kind=kind, text=fig.text(kind), choices=choice_list(names)
    )
    return Draft(scenes, prompt, names[pos], names, meta={"figure": fig.name, "kind": kind})


def idiom_image(ctx: Ctx) -> Draft:
    """IRFL-1 twin: which of Image A-D illustrates the idiom (e.g. "two peas in a pod")?"""
    return _figure_choice(ctx, ("idiom",))


def metaphor_image(ctx: Ctx) -> Draft:
    """IRFL-2 twin: which of Image A-D matches the metaphor or simile?"""
    return _figure_choice(ctx, ("metaphor", "simile"))


def figurative_tf(ctx: Ctx) -> Draft:
    """IRFL-0 twin: does an idiom, metaphor or simile fit the image (True/False by a fair coin)?"""
    rng = ctx.rng
    fig = pick(rng, FIGURES)
    kind = pick(rng, ("idiom", "metaphor", "simile"))
    truth = coin(rng)
    domain = ctx.domain()
    objs = _figure_scene(ctx, fig, truth, (), domain)
    prompt = _T["figure_tf"].format(
        image=IMAGE, text=fig.text(kind), choices=choice_list(TRUE_FALSE)
    )
    return Draft(
        [Scene(objs, domain)],
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"figure": fig.name, "kind": kind},
    )


def phrase_for_image(ctx: Ctx) -> Draft:
    """IRFL-3 twin: which of four figurative phrases fits the image?"""
    rng = ctx.rng
    fig = pick(rng, FIGURES)
    kind = pick(rng, ("idiom", "metaphor", "simile", "phrase"))
    domain = ctx.domain()
    for _ in range(20):
        objs = _figure_scene(ctx, fig, True, (), domain)
        others = [f for f in FIGURES if f is not fig and not f.holds(objs)]
        if len(others) >= 3:
            break
    else:
        raise GenerationError(f"figure {fig.name!r} scene matched too many other figures")
    distractors = sample(rng, others, 3)
    options, pos = insert_gold(rng, fig.text(kind), [f.text(kind) for f in distractors])
    prompt = _T["phrase_for_image"].format(image=IMAGE, choices=choice_list(options))
    return Draft(
        [Scene(objs, domain)],
        prompt,
        options[pos],
        options,
        meta={"figure": fig.name, "kind": kind},
    )


# ---------------------------------------------------------------------------------------------
# relations (Bongard-HOI)

HOI_RELATIONS = ("above", "below", "inside", "left of", "right of", "far from")
HOI_TEXT = MappingProxyType(
    {
        "above": "above it",
        "below": "below it",
        "inside": "inside it",
        "left of": "to the left of it",
        "right of": "to the right of it",
        "far from": "far from it",
    }
)
HOI_OPPOSITE = MappingProxyType(
    {
        "above": "below",
        "below": "above",
        "inside": "far from",
        "far from": "inside",
        "left of": "right of",
        "right of": "left of",
    }
)


def relation_objects(rng: np.random.Generator, rel: str) -> tuple[Obj, ...]:
    """A small solid shape placed ``rel`` a large outlined shape (random shapes and colours)."""
    shape_a, shape_b = sample(rng, SHAPES, 2)
    colour_a, colour_b = sample(rng, COLOURS, 2)
    R = 0.19 * float(rng.uniform(0.92, 1.08))
    r = 0.07 * float(rng.uniform(0.92, 1.08))
    gap = float(rng.uniform(0.025, 0.06))
    j = float(rng.uniform(-0.05, 0.05))
    if rel == "inside":
        tx, ty = rng.uniform(0.3, 0.7, size=2)
        ax, ay = tx + j * 0.3, ty + float(rng.uniform(-0.015, 0.015))
    elif rel in ("above", "below"):
        tx = float(rng.uniform(0.27, 0.73))
        ty = float(rng.uniform(0.56, 0.7))
        if rel == "below":
            ty = 1.0 - ty
        ax, ay = tx + j, ty + (-1 if rel == "above" else 1) * (R + r + gap)
    elif rel in ("left of", "right of"):
        ty = float(rng.uniform(0.27, 0.73))
        tx = float(rng.uniform(0.56, 0.7))
        if rel == "right of":
            tx = 1.0 - tx
        ax, ay = tx + (-1 if rel == "left of" else 1) * (R + r + gap), ty + j
    elif rel == "far from":
        R *= 0.85
        cx, cy = int(rng.integers(2)), int(rng.integers(2))
        tx, ty = (
            0.24 + 0.52 * cx + float(rng.uniform(-0.03, 0.03)),
            0.24 + 0.52 * cy + float(rng.uniform(-0.03, 0.03)),
        )
        ax, ay = 1.0 - tx + j * 0.5, 1.0 - ty + j * 0.5
    else:
        raise ValueError(f"unknown relation {rel!r}; choose one of {list(HOI_RELATIONS)}")
    thing = Obj(shape_b, colour_b, "large", "outlined", x=float(tx), y=float(ty), r=R)
    actor = Obj(shape_a, colour_a, "small", "solid", x=float(ax), y=float(ay), r=r)
    return (thing, actor)


def _other_relation(ctx: Ctx, rel: str) -> str:
    if ctx.near():
        return HOI_OPPOSITE[rel]
    return pick(ctx.rng, [r for r in HOI_RELATIONS if r != rel])


def common_relation(ctx: Ctx) -> Draft:
    """Bongard-HOI-1 twin: the relation all six images share, among four options.

    The options are drawn first (with probability closeness two pairs of opposite relations,
    else four at random) and the gold uniformly among them.
    """
    rng = ctx.rng
    pairs = [("above", "below"), ("left of", "right of"), ("inside", "far from")]
    options, pos = options_first(rng, HOI_RELATIONS, 4, pairs if ctx.near() else ())
    rel = options[pos]
    domain = ctx.domain()
    scenes = [Scene(relation_objects(rng, rel), domain) for _ in range(6)]
    texts = [HOI_TEXT[o] for o in options]
    prompt = _T["common_relation"].format(images="\n".join([IMAGE] * 6), choices=choice_list(texts))
    return Draft(scenes, prompt, texts[pos], texts, meta={"relation": rel})


def odd_relation(ctx: Ctx) -> Draft:
    """Bongard-HOI-2 twin: which of Image A-D breaks the relation the other three share?"""
    rng = ctx.rng
    rel = pick(rng, HOI_RELATIONS)
    odd_rel = _other_relation(ctx, rel)
    pos = int(rng.integers(4))
    domain = ctx.domain()
    scenes = [Scene(relation_objects(rng, odd_rel if i == pos else rel), domain) for i in range(4)]
    names = image_names(4)
    prompt = _T["odd_relation"].format(images=labelled_images(names), choices=choice_list(names))
    return Draft(scenes, prompt, names[pos], names, meta={"relation": rel, "odd": odd_rel})


def _query_prompt(n_pos: int = 3, n_neg: int = 3) -> str:
    return _T["query"].format(
        pos=" ".join([IMAGE] * n_pos),
        neg=" ".join([IMAGE] * n_neg),
        query=IMAGE,
        choices=choice_list(POS_NEG),
    )


def relation_query(ctx: Ctx) -> Draft:
    """Bongard-HOI-0 twin: 3 positives share a relation, 3 negatives do not; is the query one?"""
    rng = ctx.rng
    rel = pick(rng, HOI_RELATIONS)
    domain = ctx.domain()
    positive = coin(rng)
    rels = [rel] * 3 + [_other_relation(ctx, rel) for _ in range(3)]
    rels.append(rel if positive else _other_relation(ctx, rel))
    scenes = [Scene(relation_objects(rng, r), domain) for r in rels]
    return Draft(
        scenes,
        _query_prompt(),
        POS_NEG[0] if positive else POS_NEG[1],
        POS_NEG,
        meta={"relation": rel, "relations": rels},
    )


# ---------------------------------------------------------------------------------------------
# attribute concepts (Bongard-OpenWorld)


@dataclass(frozen=True)
class Concept:
    """An attribute concept: a :class:`Prop` ("a red star") or an exact object count."""

    prop: Prop | None = None
    count: int = 0

    def holds(self, objs: Sequence[Obj]) -> bool:
        """Whether a scene with ``objs`` shows the concept."""
        return self.prop.holds(objs) if self.prop is not None else len(objs) == self.count

    def phrase(self) -> str:
        """``"a red star"``, ``"a striped object"``, ``"exactly 3 objects"``."""
        return (
            self.prop.phrase()
            if self.prop is not None
            else _T["concept_count"].format(n=self.count)
        )


def _random_concept(ctx: Ctx) -> Concept:
    rng = ctx.rng
    if coin(rng, 0.2):
        lo, hi = ctx.knobs.objects
        return Concept(count=int(rng.integers(max(2, lo), max(hi, 3) + 1)))
    return Concept(prop=random_prop(rng, ("shape", "colour", "pair", "fill")))


def _concept_objects(ctx: Ctx, concept: Concept, positive: bool) -> list[Obj]:
    rng = ctx.rng
    if concept.prop is not None:
        for _ in range(20):
            objs = prop_objects(ctx, concept.prop, positive, ctx.n_objects(low=1))
            if concept.holds(objs) == positive:
                return objs
        raise GenerationError("could not draw objects for the concept")
    n = concept.count
    if not positive:
        if ctx.near():
            n = n + pick(rng, [d for d in (-1, 1) if 1 <= n + d <= 9])
        else:
            n = pick(rng, [v for v in range(1, 7) if v != concept.count])
    return random_objects(rng, n)


def _concept_options(ctx: Ctx, kind: str) -> list[Concept]:
    """Four distinct concepts of one kind; close pairs form a 2 x 2 shape-colour grid."""
    rng = ctx.rng
    if kind == "shape":
        return [Concept(prop=Prop("shape", shape=v)) for v in sample(rng, SHAPES, 4)]
    if kind == "colour":
        return [Concept(prop=Prop("colour", colour=v)) for v in sample(rng, COLOURS, 4)]
    if ctx.near():
        shapes, colours = sample(rng, SHAPES, 2), sample(rng, COLOURS, 2)
        pairs = [(sh, c) for sh in shapes for c in colours]
    else:
        keys = [(sh, c) for sh in SHAPES for c in COLOURS]
        pairs = sample(rng, keys, 4)
    return shuffled(rng, [Concept(prop=Prop("pair", shape=sh, colour=c)) for sh, c in pairs])


def common_concept(ctx: Ctx) -> Draft:
    """Bongard-OpenWorld-1 twin: the concept shared by six images, among four options.

    Options first: four concepts of one kind (shapes, colours, colour-shape pairs or exact
    object counts), the gold uniform among them, so the option texts never give it away. Every
    image shows the gold. Each distractor is missing from some images and shown in the rest:
    missing from one image only with probability closeness (a near miss), else from two to
    four.
    """
    rng = ctx.rng
    kind = pick(rng, ("shape", "colour", "pair", "count"))
    domain = ctx.domain()
    if kind == "count":
        texts, pos, n = window_options(rng, 1, 6, 4)
        texts = [_T["concept_count"].format(n=v) for v in texts]
        object_lists = [random_objects(rng, n) for _ in range(6)]
    else:
        concepts = _concept_options(ctx, kind)
        pos = int(rng.integers(4))
        gold = concepts[pos].prop
        others = [c.prop for k, c in enumerate(concepts) if k != pos]
        near = ctx.near()
        missing = [
            set(sample(rng, range(6), 1 if near else int(rng.integers(2, 5)))) for _ in others
        ]
        object_lists = []
        for i in range(6):
            objs = [gold.positive(rng)]
            for d, gone in zip(others, missing):
                if i not in gone and coin(rng, 0.8):
                    objs.append(d.positive(rng))
            lacking = [d for d, gone in zip(others, missing) if i in gone]
            objs += random_objects(
                rng,
                max(0, ctx.n_objects() - len(objs)),
                avoid=lambda o, lacking=lacking: any(d.matches(o) for d in lacking),
                taken=keys_of(objs),
            )
            object_lists.append(objs)
        texts = [c.phrase() for c in concepts]
    scenes = [scene_of(ctx, objs, domain) for objs in object_lists]
    prompt = _T["common_concept"].format(images="\n".join([IMAGE] * 6), choices=choice_list(texts))
    return Draft(scenes, prompt, texts[pos], texts, meta={"concept": texts[pos], "kind": kind})


def concept_query(ctx: Ctx) -> Draft:
    """Bongard-OpenWorld-0 twin: 3 positives show a concept, 3 negatives do not; and the query?"""
    rng = ctx.rng
    concept = _random_concept(ctx)
    domain = ctx.domain()
    positive = coin(rng)
    flags = [True] * 3 + [False] * 3 + [positive]
    scenes = [scene_of(ctx, _concept_objects(ctx, concept, f), domain) for f in flags]
    return Draft(
        scenes,
        _query_prompt(),
        POS_NEG[0] if positive else POS_NEG[1],
        POS_NEG,
        meta={"concept": concept.phrase()},
    )


# ---------------------------------------------------------------------------------------------
# COMICS, VizWiz, MIT-States

STORIES = ("grow", "shrink", "arrive", "leave", "right", "left")
STORY_OPPOSITE = MappingProxyType(
    {
        "grow": "shrink",
        "shrink": "grow",
        "arrive": "leave",
        "leave": "arrive",
        "right": "left",
        "left": "right",
    }
)
STORY_CAPTIONS = MappingProxyType(
    {
        "grow": "the {shape} grows even bigger",
        "shrink": "the {shape} shrinks even more",
        "arrive": "one more {shape} arrives",
        "leave": "one more {shape} leaves",
        "right": "the {shape} keeps moving right",
        "left": "the {shape} keeps moving left",
    }
)


def _story_caption(rule: str, shape: str) -> str:
    return STORY_CAPTIONS[rule].format(shape=shape)


def story_next(ctx: Ctx) -> Draft:
    """COMICS_Dialogue-0 twin: three panels of a little story; which caption comes next?

    The four captions are a 2 x 2 grid of two rules (opposites with probability closeness,
    e.g. grows/shrinks, else two random rules) told about two shapes; the gold cell is drawn
    uniformly and drawn in the panels, the other shape appears as a bystander. Gold is a
    letter; options are shown as ``"A: ...| B: ...| C: ...| D: ..."``.
    """
    rng = ctx.rng
    first = pick(rng, STORIES)
    second = STORY_OPPOSITE[first] if ctx.near() else pick(rng, [r for r in STORIES if r != first])
    shapes = sample(rng, SHAPES, 2)
    grid = [(r, sh) for r in (first, second) for sh in shapes]
    options, pos = options_first(rng, grid, 4)
    rule, shape = options[pos]
    bystander_shape = shapes[1] if shape == shapes[0] else shapes[0]
    colour, fill = pick(rng, COLOURS), pick(rng, ("solid", "striped"))
    lane = int(rng.integers(3))
    domain, bg = ctx.domain(), shared_background(rng)
    n_static = 0 if rule in ("arrive", "leave") else min(1, ctx.n_objects())
    free = [c for c in range(9) if c // 3 != lane] if rule in ("left", "right") else [0, 2, 6, 8]
    statics = arrange(
        rng,
        random_objects(rng, n_static, shapes=(bystander_shape,)),
        cells=sample(rng, free, n_static),
        jitter=0.0,
    )
    crowd = arrange(rng, random_objects(rng, 5, shapes=(shape,)))
    scenes = []
    for k in range(3):
        if rule == "grow":
            objs = (Obj(shape, colour, "large", fill, r=0.07 + 0.045 * k),)
        elif rule == "shrink":
            objs = (Obj(shape, colour, "large", fill, r=0.19 - 0.045 * k),)
        elif rule == "arrive":
            objs = crowd[: k + 1]
        elif rule == "leave":
            objs = crowd[: 5 - k]
        else:
            x = 0.18 + 0.22 * k if rule == "right" else 0.82 - 0.22 * k
            objs = (Obj(shape, colour, "large", fill, x=x, y=(lane + 0.5) / 3, r=0.11),)
        scenes.append(Scene((*objs, *statics), domain, bg_seed=bg))
    captions = [_story_caption(r, sh) for r, sh in options]
    line = "| ".join(f"{LETTERS[i]}: {opt}" for i, opt in enumerate(captions))
    prompt = _T["story"].format(images="\n".join([IMAGE] * 3), options=line)
    return Draft(scenes, prompt, LETTERS[pos], LETTERS[:4], meta={"rule": rule, "shape": shape})


def answerable(ctx: Ctx) -> Draft:
    """VizWiz-0 twin: can the question about a (degraded) photo be answered? True/False.

    Unanswerable photos have the asked-about object hidden under a grey box, missing, or the
    whole photo blurred and pixelated beyond recognition (strength from ``degradation``).
    Answerable photos may carry mild blur or noise, or (probability closeness) a box hiding a
    *different* object.
    """
    rng, kn = ctx.rng, ctx.knobs
    n = ctx.n_objects(low=2)
    fills = [pick(rng, FILLS) for _ in range(n)]
    objs = [
        Obj(s, c, pick(rng, ("small", "large")), f)
        for s, c, f in zip(sample(rng, SHAPES, n), sample(rng, COLOURS, n), fills)
    ]
    objs = list(arrange(rng, objs))
    target = objs[0]
    ask_colour = coin(rng)
    question = (
        _T["ask_colour"].format(shape=target.shape)
        if ask_colour
        else _T["ask_shape"].format(colour=target.colour)
    )
    truth = coin(rng)
    effects: list[tuple[str, float]] = []
    occluders: list[tuple[float, float, float, float]] = []

    def box(o: Obj) -> tuple[float, float, float, float]:
        m = o.r * 1.25
        return (o.x - m, o.y - m, o.x + m, o.y + m)

    if truth:
        if coin(rng, kn.degradation):
            effects.append(pick(rng, (("blur", 0.7), ("noise", 12.0))))
        if ctx.near():
            occluders.append(box(objs[1]))
        way = "visible"
    else:
        way = pick(rng, ("occluded", "missing", "degraded"))
        if way == "occluded":
            occluders.append(box(target))
        elif way == "missing":
            objs = objs[1:]
        else:
            effects += [
                ("pixelate", 6 + round(4 * kn.degradation)),
                ("blur", 1.5 + 2.5 * kn.degradation),
            ]
    scene = Scene(
        tuple(shuffled(rng, objs)), ctx.domain(), effects=tuple(effects), occluders=tuple(occluders)
    )
    prompt = _T["answerable"].format(
        image=IMAGE, question=question, choices=choice_list(TRUE_FALSE)
    )
    return Draft(
        [scene],
        prompt,
        TRUE_FALSE[0] if truth else TRUE_FALSE[1],
        TRUE_FALSE,
        meta={"question": question, "case": way},
    )


STATE_WORDS = ("solid", "outlined", "striped", "broken", "faded")


def _with_state(obj: Obj, state: str) -> Obj:
    if state in ("solid", "outlined", "striped"):
        return replace(obj, fill=state, state="")
    return replace(obj, fill="solid", state=state)


def state(ctx: Ctx) -> Draft:
    """MIT-States-0 twin: the state of the named shape (solid/outlined/striped/broken/faded).

    Bystanders (small, other shapes) take random states; with probability closeness one of
    them shows a distractor state.
    """
    rng = ctx.rng
    gold = pick(rng, STATE_WORDS)
    main = _with_state(Obj(pick(rng, SHAPES), pick(rng, COLOURS), "large"), gold)
    distractors = sample(rng, [s for s in STATE_WORDS if s != gold], 3)
    others = random_objects(
        rng,
        max(0, ctx.n_objects() - 1),
        shapes=[s for s in SHAPES if s != main.shape],
        sizes=("small",),
    )
    others = [_with_state(o, pick(rng, STATE_WORDS)) for o in others]
    if others and ctx.near():
        others[0] = _with_state(others[0], distractors[0])
    options, pos = insert_gold(rng, gold, distractors)
    scene = scene_of(ctx, [main, *others], ctx.domain())
    prompt = _T["state"].format(image=IMAGE, shape=main.shape, choices=choice_list(options))
    return Draft([scene], prompt, options[pos], options, meta={"state": gold})


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType(
    {
        "synth-answerable": answerable,
        "synth-metaphor-image": metaphor_image,
        "synth-common-relation": common_relation,
        "synth-state": state,
        "synth-idiom-image": idiom_image,
        "synth-common-concept": common_concept,
        "synth-story-next": story_next,
        "synth-figurative-tf": figurative_tf,
        "synth-odd-relation": odd_relation,
        "synth-concept-query": concept_query,
        "synth-phrase-for-image": phrase_for_image,
        "synth-relation-query": relation_query,
    }
)

TEXTS: tuple[str, ...] = (
    *_T.values(),
    *(t for f in FIGURES for t in (f.idiom, f.metaphor, f.simile, f.phrase)),
    "idiom metaphor simile phrase",
    *HOI_TEXT.values(),
    *STORY_CAPTIONS.values(),
    *STATE_WORDS,
    *POS_NEG,
    "| : a an object objects",
    *(plural(s) for s in SHAPES),
)
