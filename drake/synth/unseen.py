"""Twins of DRAKE's 7 unseen tasks: 4 new task types and 3 tasks on held-out visual domains.

None of these is trained on by a client. The new task types recombine known primitives in new
formats (step sequences, contrastive captions over up to eight images, multi-part edits); the
new-domain tasks draw *only* from :data:`drake.synth.scene.HELD_OUT_DOMAINS`, which no other
task uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from drake.synth.common import (
    Ctx,
    Draft,
    GenerationError,
    random_objects,
    relation_holds,
    shared_background,
)
from drake.synth.relation import DEMON_CHOOSE, REL_TEXT, edit_direction
from drake.synth.scene import (
    COLOURS,
    FILLS,
    NEAR_COLOURS,
    NEAR_SHAPES,
    POSITIONS,
    SHAPES,
    Obj,
    Scene,
    arrange,
    cell_centre,
    free_cells,
    radius_for,
)
from drake.synth.text import (
    IMAGE,
    choice_list,
    coin,
    image_names,
    insert_gold,
    labelled_images,
    pick,
    sample,
    shuffled,
    with_article,
)

_T = MappingProxyType(
    {
        "coherence": "{images}\nThe four images show the steps of a recipe, in order. Which image "
        "does not belong to the recipe? " + DEMON_CHOOSE + "\n{choices}",
        "cloze": "{steps}\nWhich image completes the missing step?\n{images}\n"
        + DEMON_CHOOSE
        + "\n{choices}",
        "step": "Step {k}: {image}",
        "missing": "Step {k}: ?",
        "caption_match": "{images}\nCaption: {caption}.\nWhich image matches the caption? "
        + DEMON_CHOOSE
        + "\n{choices}",
        "caption_rel": "{a} {rel} {b}",
        "similarity": "Reference image:{image}\nImage A:{image}\nImage B:{image}\nWhich image is "
        "more similar to the reference image? " + DEMON_CHOOSE + "\n{choices}",
        "near_identical": "{images}\nDescription: {description}\nWhich image does the description "
        "match? " + DEMON_CHOOSE + "\n{choices}",
        "desc_colour": "The {shape} is {colour}.",
        "desc_where": "The {colour} {shape} is at the {position}.",
        "desc_shape": "The {colour} object is {shape}.",
    }
)

# ---------------------------------------------------------------------------------------------
# step processes (RecipeQA twins)

PROCESSES = ("add", "grow", "paint", "walk")


@dataclass(frozen=True)
class Process:
    """A four-step process with fixed parameters; :meth:`step` is deterministic."""

    kind: str
    shape: str
    colour: str
    fill: str
    lane: int
    cells: tuple[int, ...]
    shapes: tuple[str, ...]

    def step(self, k: int) -> tuple[Obj, ...]:
        """Objects at step ``k`` (0..3)."""
        if self.kind == "add":
            return tuple(
                Obj(s, self.colour, "large", self.fill, *cell_centre(c), r=radius_for("large"))
                for s, c in zip(self.shapes[: k + 1], self.cells)
            )
        if self.kind == "grow":
            return (Obj(self.shape, self.colour, "large", self.fill, r=0.06 + 0.045 * k),)
        if self.kind == "paint":
            return tuple(
                Obj(
                    s,
                    self.colour,
                    "large",
                    "solid" if i < k else "outlined",
                    *cell_centre(c),
                    r=radius_for("large"),
                )
                for i, (s, c) in enumerate(zip(self.shapes[:3], self.cells))
            )
        x = 0.15 + 0.233 * k
        return (
            Obj(self.shape, self.colour, "large", self.fill, x=x, y=(self.lane + 0.5) / 3, r=0.11),
        )


def random_process(ctx: Ctx, kind: str | None = None) -> Process:
    """A process of ``kind`` (random if None) with random shapes, colour, fill and cells."""
    rng = ctx.rng
    return Process(
        kind=kind or pick(rng, PROCESSES),
        shape=pick(rng, SHAPES),
        colour=pick(rng, COLOURS),
        fill=pick(rng, ("solid", "striped")),
        lane=int(rng.integers(3)),
        cells=tuple(int(c) for c in rng.choice(9, size=4, replace=False)),
        shapes=tuple(sample(rng, SHAPES, 4)),
    )


def _signature(objs: Sequence[Obj]) -> tuple:
    return tuple(
        sorted(
            (o.shape, o.colour, o.fill, o.state, round(o.x, 2), round(o.y, 2), round(o.r, 3))
            for o in objs
        )
    )


def _off_process(ctx: Ctx, proc: Process, k: int) -> tuple[Obj, ...]:
    """Step ``k`` of ``proc``, broken: recoloured/reshaped (near miss) or another process."""
    rng = ctx.rng
    if ctx.near():
        if coin(rng):
            colour = pick(rng, [c for c in COLOURS if c != proc.colour])
            return tuple(replace(o, colour=colour) for o in proc.step(k))
        shape = pick(rng, [s for s in SHAPES if s not in proc.shapes and s != proc.shape])
        objs = list(proc.step(k))
        objs[-1] = replace(objs[-1], shape=shape)
        return tuple(objs)
    other = random_process(ctx, pick(rng, [p for p in PROCESSES if p != proc.kind]))
    return other.step(k)


def step_coherence(ctx: Ctx) -> Draft:
    """RecipeQA_ImageCoherence-0 twin: four ordered steps; which image does not fit?"""
    rng = ctx.rng
    proc = random_process(ctx)
    pos = int(rng.integers(4))
    domain, bg = ctx.domain(), shared_background(rng)
    scenes = []
    for k in range(4):
        objs = _off_process(ctx, proc, k) if k == pos else proc.step(k)
        scenes.append(Scene(objs, domain, bg_seed=bg))
    names = image_names(4)
    prompt = _T["coherence"].format(images=labelled_images(names), choices=choice_list(names))
    return Draft(scenes, prompt, names[pos], names, meta={"process": proc.kind})


def step_cloze(ctx: Ctx) -> Draft:
    """RecipeQA_VisualCloze-0 twin: three of four steps shown; which candidate is the missing one?

    Distractors: other steps of the same process (wrong order), the right step broken
    (probability closeness), or a step of another process; all four candidates differ.
    """
    rng = ctx.rng
    proc = random_process(ctx)
    gap = int(rng.integers(4))
    gold = proc.step(gap)
    seen = {_signature(gold)}
    distractors: list[tuple[Obj, ...]] = []
    pool = [proc.step(k) for k in shuffled(rng, [k for k in range(4) if k != gap])]
    for _ in range(40):
        if len(distractors) == 3:
            break
        cand = pool.pop() if pool and coin(rng) else _off_process(ctx, proc, gap)
        if _signature(cand) not in seen:
            seen.add(_signature(cand))
            distractors.append(cand)
    if len(distractors) < 3:
        raise GenerationError("could not draw three distinct cloze candidates")
    options, pos = insert_gold(rng, gold, distractors)
    domain, bg = ctx.domain(), shared_background(rng)
    steps = []
    scenes = []
    for k in range(4):
        if k == gap:
            steps.append(_T["missing"].format(k=k + 1))
        else:
            steps.append(_T["step"].format(k=k + 1, image=IMAGE))
            scenes.append(Scene(proc.step(k), domain, bg_seed=bg))
    scenes += [Scene(objs, domain, bg_seed=bg) for objs in options]
    names = image_names(4)
    prompt = _T["cloze"].format(
        steps="\n".join(steps), images=labelled_images(names), choices=choice_list(names)
    )
    return Draft(scenes, prompt, names[pos], names, meta={"process": proc.kind, "gap": gap + 1})


# ---------------------------------------------------------------------------------------------
# contrastive captions (Mantis)

_PAIR_CELLS = MappingProxyType(
    {
        "left of": ((3, 5), (0, 2), (6, 8), (3, 4), (4, 5)),
        "above": ((1, 7), (0, 6), (2, 8), (1, 4), (4, 7)),
    }
)


def _caption_objects(ctx: Ctx, objs: Sequence[Obj], rel: str) -> tuple[Obj, ...]:
    """Place one object anywhere, or two in cells where the first is ``rel`` the second."""
    rng = ctx.rng
    if len(objs) == 1:
        return arrange(rng, objs, cells=[int(rng.integers(9))])
    base = "left of" if rel in ("left of", "right of") else "above"
    first, second = pick(rng, _PAIR_CELLS[base])
    if rel in ("right of", "below"):
        first, second = second, first
    return arrange(rng, objs, cells=[first, second])


def _perturb(ctx: Ctx, objs: tuple[Obj, ...]) -> tuple[Obj, ...]:
    """``objs`` with one caption-relevant change (attribute of one object, or swapped places)."""
    rng = ctx.rng
    options = ["colour", "shape", "fill", "size"] + (["swap"] if len(objs) == 2 else [])
    what = pick(rng, options)
    if what == "swap":
        a, b = objs
        return (replace(a, x=b.x, y=b.y), replace(b, x=a.x, y=a.y))
    i = int(rng.integers(len(objs)))
    o = objs[i]
    if what == "colour":
        pool = NEAR_COLOURS[o.colour] if ctx.near() else [c for c in COLOURS if c != o.colour]
        new = replace(o, colour=pick(rng, pool))
    elif what == "shape":
        pool = NEAR_SHAPES[o.shape] if ctx.near() else [s for s in SHAPES if s != o.shape]
        new = replace(o, shape=pick(rng, pool))
    elif what == "fill":
        new = replace(o, fill=pick(rng, [f for f in FILLS if f != o.fill]))
    else:
        size = "small" if o.size == "large" else "large"
        new = replace(o, size=size, r=radius_for(size) * o.r / radius_for(o.size))
    out = list(objs)
    out[i] = new
    return tuple(out)


def _caption(objs: Sequence[Obj], rel: str) -> str:
    phrases = [with_article(o.describe(size=True, fill=True)) for o in objs]
    if len(objs) == 1:
        return phrases[0][0].upper() + phrases[0][1:]
    text = _T["caption_rel"].format(a=phrases[0], rel=REL_TEXT[rel], b=phrases[1])
    return text[0].upper() + text[1:]


def _matches(objs: Sequence[Obj], gold: Sequence[Obj], rel: str) -> bool:
    """Whether ``objs`` fits the caption of ``gold`` (same described attributes and relation)."""
    if len(objs) != len(gold):
        return False
    attrs = [(o.size, o.colour, o.fill, o.shape) for o in objs]
    if attrs != [(o.size, o.colour, o.fill, o.shape) for o in gold]:
        return False
    return len(objs) == 1 or relation_holds(objs[0], objs[1], rel)


def caption_match(ctx: Ctx) -> Draft:
    """Mantis contrastive_caption twin: 3-8 images, each a one-change variant of the gold scene;
    which one matches the caption ("A small red striped star to the left of a large ...")?"""
    rng = ctx.rng
    n_images = int(rng.integers(3, 9))
    m = ctx.n_objects(low=1, high=2)
    rel = pick(rng, tuple(REL_TEXT))
    gold = _caption_objects(ctx, random_objects(rng, m), rel)
    variants: list[tuple[Obj, ...]] = []
    seen = {_signature(gold)}
    for _ in range(60):
        if len(variants) == n_images - 1:
            break
        cand = _perturb(ctx, gold)
        if not _matches(cand, gold, rel) and _signature(cand) not in seen:
            seen.add(_signature(cand))
            variants.append(cand)
    if len(variants) < n_images - 1:
        raise GenerationError("could not draw enough distinct contrastive variants")
    options, pos = insert_gold(rng, gold, variants)
    domain, bg = ctx.domain(), shared_background(rng)
    scenes = [Scene(objs, domain, bg_seed=bg) for objs in options]
    names = image_names(n_images, "number")
    caption = _caption(gold, rel)
    prompt = _T["caption_match"].format(
        images=labelled_images(names, "\n"), caption=caption, choices=choice_list(names)
    )
    return Draft(scenes, prompt, names[pos], names, meta={"caption": caption})


# ---------------------------------------------------------------------------------------------
# multi-part edits, similarity, near-identical candidates


def edit_direction_multi(ctx: Ctx) -> Draft:
    """HQ_Edit-0 twin: as the MagicBrush twin with a two- or three-part edit instruction."""
    return edit_direction(ctx, n_edits=2 + int(ctx.rng.integers(2)))


def _changes(ctx: Ctx, objs: tuple[Obj, ...], k: int) -> tuple[Obj, ...]:
    """``objs`` with ``k`` changes (colour, shape, fill, size or place) on distinct objects."""
    rng = ctx.rng
    out = list(objs)
    for i in sample(rng, range(len(objs)), min(k, len(objs))):
        o = out[i]
        what = pick(rng, ("colour", "shape", "fill", "size", "place"))
        if what == "colour":
            out[i] = replace(o, colour=pick(rng, [c for c in COLOURS if c != o.colour]))
        elif what == "shape":
            out[i] = replace(o, shape=pick(rng, [s for s in SHAPES if s != o.shape]))
        elif what == "fill":
            out[i] = replace(o, fill=pick(rng, [f for f in FILLS if f != o.fill]))
        elif what == "size":
            size = "small" if o.size == "large" else "large"
            out[i] = replace(o, size=size, r=radius_for(size) * o.r / radius_for(o.size))
        else:
            cells = free_cells(out)
            x, y = cell_centre(pick(rng, cells)) if cells else (o.x, o.y)
            out[i] = replace(o, x=x, y=y)
    return tuple(out)


def similarity(ctx: Ctx) -> Draft:
    """DreamSim-0 twin: which of Image A/B is closer to the reference (fewer changes)?

    The close image has one change; the far one two (probability closeness) or three.
    """
    rng = ctx.rng
    ref = arrange(rng, random_objects(rng, ctx.n_objects(low=3)))
    far_k = 2 if ctx.near() else 3
    close, far = _changes(ctx, ref, 1), _changes(ctx, ref, far_k)
    a_is_close = coin(rng)
    first, second = (close, far) if a_is_close else (far, close)
    domain, bg = ctx.domain(), shared_background(rng)
    scenes = [Scene(o, domain, bg_seed=bg) for o in (ref, first, second)]
    names = ("Image A", "Image B")
    prompt = _T["similarity"].format(image=IMAGE, choices=choice_list(names))
    return Draft(
        scenes,
        prompt,
        names[0] if a_is_close else names[1],
        names,
        meta={"changes": {"close": 1, "far": far_k}},
    )


def near_identical(ctx: Ctx) -> Draft:
    """imagecode-0 twin: four candidates differ only in one object's colour, place or shape;
    which one does the description fit? (Close values with probability closeness.)"""
    rng = ctx.rng
    n = ctx.n_objects(low=2)
    objs = [
        Obj(s, c, pick(rng, ("small", "large")), pick(rng, FILLS))
        for s, c in zip(sample(rng, SHAPES, n), sample(rng, COLOURS, n))
    ]
    objs = list(arrange(rng, objs))
    t = objs[0]
    family = pick(rng, ("colour", "where", "shape"))
    used_shapes = {o.shape for o in objs[1:]}
    used_colours = {o.colour for o in objs[1:]}
    if family == "colour":
        pool = [c for c in COLOURS if c not in used_colours]
        near = [c for c in NEAR_COLOURS[t.colour] if c in pool]
        rest = [c for c in pool if c != t.colour and c not in near]
        values = [t.colour] + (
            near + sample(rng, rest, 3 - len(near)) if ctx.near() else sample(rng, near + rest, 3)
        )
        variants = [replace(t, colour=v) for v in values]
    elif family == "shape":
        pool = [s for s in SHAPES if s not in used_shapes]
        near = [s for s in NEAR_SHAPES[t.shape] if s in pool]
        rest = [s for s in pool if s != t.shape and s not in near]
        values = [t.shape] + (
            near + sample(rng, rest, 3 - len(near)) if ctx.near() else sample(rng, near + rest, 3)
        )
        variants = [replace(t, shape=v) for v in values]
    else:
        cells = [c for c in free_cells(objs)] + [t.cell()]
        values = [t.cell()] + sample(rng, [c for c in cells if c != t.cell()], 3)
        variants = [replace(t, x=cell_centre(c)[0], y=cell_centre(c)[1]) for c in values]
    options, pos = insert_gold(rng, variants[0], variants[1:])
    domain, bg = ctx.domain(), shared_background(rng)
    scenes = [Scene(tuple([v, *objs[1:]]), domain, bg_seed=bg) for v in options]
    g = options[pos]
    if family == "colour":
        description = _T["desc_colour"].format(shape=g.shape, colour=g.colour)
    elif family == "shape":
        description = _T["desc_shape"].format(colour=g.colour, shape=with_article(g.shape))
    else:
        description = _T["desc_where"].format(
            colour=g.colour, shape=g.shape, position=POSITIONS[g.cell()]
        )
    names = image_names(4, "number")
    prompt = _T["near_identical"].format(
        images=labelled_images(names, "\n"), description=description, choices=choice_list(names)
    )
    return Draft(
        scenes, prompt, names[pos], names, meta={"family": family, "description": description}
    )


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType(
    {
        "synth-step-coherence": step_coherence,
        "synth-step-cloze": step_cloze,
        "synth-caption-match": caption_match,
        "synth-edit-direction-multi": edit_direction_multi,
        "synth-similarity-ood": similarity,
        "synth-caption-match-ood": caption_match,
        "synth-near-identical-ood": near_identical,
    }
)

TEXTS: tuple[str, ...] = (*_T.values(), "Image", "A a an")
