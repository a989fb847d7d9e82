"""Machinery shared by the drake-synth generators: the draw context, the sample draft, random
scenes, image properties with quantified statements, scene edits and spatial relations.

Tasks in one DRAKE subgroup share these pieces on purpose, so that task similarity is real:
the relation twins all use :class:`Prop` statements, :class:`Edit` operations and
:func:`relation_holds`; the reasoning and VQA twins reuse :func:`random_objects` scenes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from drake.synth.knobs import Knobs
from drake.synth.scene import (
    COLOURS,
    FILLS,
    GRID,
    NEAR_COLOURS,
    NEAR_SHAPES,
    POSITIONS,
    SHAPES,
    SIZES,
    Obj,
    Scene,
    arrange,
    cell_centre,
    free_cells,
    radius_for,
)
from drake.synth.text import coin, pick, shuffled, with_article


class GenerationError(RuntimeError):
    """A generator could not satisfy its constraints (a bug or impossible knobs)."""


@dataclass(frozen=True)
class Ctx:
    """What a generator may use: its random generator, knobs, visual domains and row index.

    Only index-balanced tasks (synth-cls) read ``index``; every other draw comes from ``rng``.
    """

    rng: np.random.Generator
    knobs: Knobs
    domains: tuple[str, ...]
    index: int = 0

    def domain(self) -> str:
        """One of the task's domains, uniformly."""
        return pick(self.rng, self.domains)

    def near(self) -> bool:
        """Whether this negative/distractor should be a near miss (probability ``closeness``)."""
        return coin(self.rng, self.knobs.closeness)

    def n_objects(self, low: int | None = None, high: int | None = None) -> int:
        """Object count drawn uniformly from the ``objects`` knob (clamped to [low, high])."""
        lo, hi = self.knobs.objects
        lo = lo if low is None else max(lo, low)
        hi = hi if high is None else min(hi, high)
        hi = max(hi, lo)
        return int(self.rng.integers(lo, hi + 1))


@dataclass
class Draft:
    """A generated sample before rendering: scenes (one per image, in prompt order) and text."""

    scenes: list[Scene]
    prompt: str
    answer: str
    choices: Sequence[str] = ()
    label: int = -1
    meta: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# random objects and scenes


def random_objects(
    rng: np.random.Generator,
    n: int,
    *,
    shapes: Sequence[str] = SHAPES,
    colours: Sequence[str] = COLOURS,
    fills: Sequence[str] = FILLS,
    sizes: Sequence[str] = SIZES,
    avoid: Callable[[Obj], bool] | None = None,
    taken: Sequence[tuple[str, str]] = (),
) -> list[Obj]:
    """``n`` unplaced objects with distinct (shape, colour) pairs, none in ``taken``.

    Candidates for which ``avoid(obj)`` is true are skipped, so callers can exclude whatever a
    statement must not see (e.g. every red object).
    """
    taken_set = set(taken)
    keys = [(s, c) for s in shapes for c in colours if (s, c) not in taken_set]
    out: list[Obj] = []
    for i in rng.permutation(len(keys)):
        if len(out) == n:
            break
        s, c = keys[int(i)]
        obj = Obj(s, c, size=pick(rng, sizes), fill=pick(rng, fills))
        if avoid is not None and avoid(obj):
            continue
        out.append(obj)
    if len(out) < n:
        raise GenerationError(f"could not draw {n} distinct objects under the constraints")
    return out


def keys_of(objs: Sequence[Obj]) -> list[tuple[str, str]]:
    """The (shape, colour) pairs of ``objs``."""
    return [o.key() for o in objs]


def scene_of(ctx: Ctx, objs: Sequence[Obj], domain: str, grid: int = GRID) -> Scene:
    """Place ``objs`` (shuffled into random cells) on ``domain``."""
    return Scene(arrange(ctx.rng, shuffled(ctx.rng, objs), grid=grid), domain=domain)


def scene_signature(objs: Sequence[Obj]) -> frozenset:
    """What a scene shows, up to jitter: the set of (shape, colour, size, fill, state, cell)."""
    return frozenset((o.shape, o.colour, o.size, o.fill, o.state, o.cell()) for o in objs)


# ---------------------------------------------------------------------------------------------
# image properties and quantified statements (VISION / NLVR2 twins)


@dataclass(frozen=True)
class Prop:
    """An image property: it contains a shape, a colour, a colour-shape pair or a fill."""

    kind: str
    shape: str = ""
    colour: str = ""
    fill: str = ""

    def matches(self, obj: Obj) -> bool:
        """Whether ``obj`` shows the property."""
        if self.kind == "shape":
            return obj.shape == self.shape
        if self.kind == "colour":
            return obj.colour == self.colour
        if self.kind == "pair":
            return obj.shape == self.shape and obj.colour == self.colour
        return obj.fill == self.fill

    def holds(self, objs: Sequence[Obj]) -> bool:
        """Whether any of ``objs`` shows the property."""
        return any(self.matches(o) for o in objs)

    def phrase(self) -> str:
        """``"a star"``, ``"a red object"``, ``"a red star"``, ``"a striped object"``."""
        if self.kind == "shape":
            return with_article(self.shape)
        if self.kind == "colour":
            return with_article(f"{self.colour} object")
        if self.kind == "pair":
            return with_article(f"{self.colour} {self.shape}")
        return with_article(f"{self.fill} object")

    def positive(self, rng: np.random.Generator) -> Obj:
        """A random object with the property."""
        shape = self.shape or pick(rng, SHAPES)
        colour = self.colour or pick(rng, COLOURS)
        fill = self.fill or pick(rng, FILLS)
        return Obj(shape, colour, size=pick(rng, SIZES), fill=fill)

    def near_miss(self, rng: np.random.Generator) -> Obj:
        """An object without the property that shares one attribute with it (or looks alike)."""
        base = self.positive(rng)
        if self.kind == "shape":
            return replace(base, shape=pick(rng, NEAR_SHAPES[self.shape]))
        if self.kind == "colour":
            return replace(base, colour=pick(rng, NEAR_COLOURS[self.colour]))
        if self.kind == "pair":
            if coin(rng):
                return replace(base, colour=pick(rng, NEAR_COLOURS[self.colour]))
            return replace(base, shape=pick(rng, NEAR_SHAPES[self.shape]))
        return replace(base, fill=pick(rng, [f for f in FILLS if f != self.fill]))


def random_prop(
    rng: np.random.Generator, kinds: Sequence[str] = ("shape", "colour", "pair")
) -> Prop:
    """A property of a random kind among ``kinds`` with random values."""
    kind = pick(rng, kinds)
    if kind == "shape":
        return Prop("shape", shape=pick(rng, SHAPES))
    if kind == "colour":
        return Prop("colour", colour=pick(rng, COLOURS))
    if kind == "pair":
        return Prop("pair", shape=pick(rng, SHAPES), colour=pick(rng, COLOURS))
    return Prop("fill", fill=pick(rng, FILLS))


def prop_objects(ctx: Ctx, prop: Prop, has: bool, n: int) -> list[Obj]:
    """``n`` >= 1 objects that show ``prop`` (``has``) or not; a negative may hold a near miss."""
    rng = ctx.rng
    objs: list[Obj] = []
    if has:
        objs.append(prop.positive(rng))
    elif ctx.near():
        objs.append(prop.near_miss(rng))
    objs += random_objects(
        rng, max(0, n - len(objs)), avoid=None if has else prop.matches, taken=keys_of(objs)
    )
    return objs


def _hamming(a: Sequence[int], b: Sequence[int]) -> int:
    return sum(x != y for x, y in zip(a, b))


def choose_pattern(
    ctx: Ctx, n: int, pred: Callable[[tuple[int, ...]], bool], truth: bool
) -> tuple[int, ...]:
    """A 0/1 pattern over ``n`` images with ``pred(pattern) == truth``.

    For a false statement, with probability ``closeness`` the pattern is one flip away from a
    pattern that would make it true (a near miss).
    """
    every = list(itertools.product((0, 1), repeat=n))
    pats = [p for p in every if pred(p) == truth]
    if not pats:
        raise GenerationError("no image pattern satisfies the statement")
    if not truth and ctx.near():
        trues = [p for p in every if pred(p)]
        close = [p for p in pats if any(_hamming(p, t) == 1 for t in trues)]
        pats = close or pats
    return pick(ctx.rng, pats)


# ---------------------------------------------------------------------------------------------
# spatial relations (VSR / NLVR2 twins)

RELATIONS = ("left of", "right of", "above", "below")
OPPOSITE = MappingProxyType(
    {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
)


def relation_holds(a: Obj, b: Obj, rel: str) -> bool:
    """Whether ``a`` is ``rel`` ``b`` on the 3 x 3 grid (strictly another column / row)."""
    ca, cb = a.cell(), b.cell()
    col_a, row_a, col_b, row_b = ca % GRID, ca // GRID, cb % GRID, cb // GRID
    if rel == "left of":
        return col_a < col_b
    if rel == "right of":
        return col_a > col_b
    if rel == "above":
        return row_a < row_b
    if rel == "below":
        return row_a > row_b
    raise ValueError(f"unknown relation {rel!r}; choose one of {list(RELATIONS)}")


# ---------------------------------------------------------------------------------------------
# edits (MagicBrush / CIRR / FashionIQ / HQ-Edit twins)

EDIT_KINDS = ("add", "remove", "recolour", "move", "resize", "refill")


@dataclass(frozen=True)
class Edit:
    """One scene edit: ``kind``, the index of its target object (-1 for add), the new value."""

    kind: str
    target: int
    value: object
    text: str


def _make_edit(
    rng: np.random.Generator, objs: Sequence[Obj], kind: str, avoid: Sequence[int]
) -> Edit | None:
    targets = [i for i in range(len(objs)) if i not in set(avoid)]
    taken = set(keys_of(objs))
    if kind == "add":
        cells = free_cells(objs)
        if not cells or len(objs) >= 6:
            return None
        new = random_objects(rng, 1, taken=list(taken))[0]
        new = arrange(rng, [new], cells=[pick(rng, cells)])[0]
        return Edit("add", -1, new, f"add {with_article(new.describe(size=True))}")
    if not targets:
        return None
    i = pick(rng, targets)
    obj = objs[i]
    name = obj.describe()
    if kind == "remove":
        if len(objs) < 2:
            return None
        return Edit("remove", i, None, f"remove the {name}")
    if kind == "recolour":
        options = [c for c in COLOURS if c != obj.colour and (obj.shape, c) not in taken]
        if not options:
            return None
        colour = pick(rng, options)
        return Edit("recolour", i, colour, f"make the {name} {colour}")
    if kind == "move":
        cells = free_cells(objs)
        if not cells:
            return None
        cell = pick(rng, cells)
        return Edit("move", i, cell, f"move the {name} to the {POSITIONS[cell]}")
    if kind == "resize":
        size = "small" if obj.size == "large" else "large"
        word = "larger" if size == "large" else "smaller"
        return Edit("resize", i, size, f"make the {name} {word}")
    if kind == "refill":
        fill = pick(rng, [f for f in FILLS if f != obj.fill])
        return Edit("refill", i, fill, f"make the {name} {fill}")
    raise ValueError(f"unknown edit kind {kind!r}; choose one of {list(EDIT_KINDS)}")


def random_edit(
    rng: np.random.Generator,
    objs: Sequence[Obj],
    kinds: Sequence[str] = EDIT_KINDS,
    avoid: Sequence[int] = (),
) -> Edit:
    """A feasible edit of a random kind among ``kinds`` whose target is not in ``avoid``."""
    for kind in shuffled(rng, kinds):
        edit = _make_edit(rng, objs, kind, avoid)
        if edit is not None:
            return edit
    raise GenerationError(
        f"no feasible edit among {list(kinds)} for a scene of {len(objs)} objects"
    )


def apply_edit(objs: Sequence[Obj], edit: Edit) -> tuple[Obj, ...]:
    """The objects after ``edit``."""
    out = list(objs)
    if edit.kind == "add":
        return (*out, edit.value)
    obj = out[edit.target]
    if edit.kind == "remove":
        del out[edit.target]
        return tuple(out)
    if edit.kind == "recolour":
        out[edit.target] = replace(obj, colour=edit.value)
    elif edit.kind == "move":
        x, y = cell_centre(int(edit.value))
        out[edit.target] = replace(obj, x=x, y=y)
    elif edit.kind == "resize":
        out[edit.target] = replace(
            obj, size=edit.value, r=radius_for(edit.value) * obj.r / radius_for(obj.size)
        )
    elif edit.kind == "refill":
        out[edit.target] = replace(obj, fill=edit.value)
    return tuple(out)


def random_edits(
    rng: np.random.Generator, objs: Sequence[Obj], k: int
) -> tuple[list[Edit], tuple[Obj, ...]]:
    """``k`` edits on distinct objects, applied in turn (a removal only last).

    Returns the edits and the objects after all of them.
    """
    edits: list[Edit] = []
    cur = tuple(objs)
    touched: list[int] = []
    for step in range(k):
        kinds = EDIT_KINDS if step == k - 1 else tuple(x for x in EDIT_KINDS if x != "remove")
        edit = random_edit(rng, cur, kinds, avoid=touched)
        touched.append(edit.target if edit.kind != "add" else len(cur))
        cur = apply_edit(cur, edit)
        edits.append(edit)
    return edits, cur


def edits_differ(objs: Sequence[Obj], edit: Edit, other: Edit) -> bool:
    """Whether ``other`` leads elsewhere than ``edit`` *and* is not described by its text (an
    added object of the same size, colour and shape in another cell would still fit it)."""
    return other.text != edit.text and scene_signature(apply_edit(objs, other)) != scene_signature(
        apply_edit(objs, edit)
    )


def alternative_edit(
    rng: np.random.Generator, objs: Sequence[Obj], edit: Edit, tries: int = 24
) -> Edit:
    """An edit of the same kind as ``edit`` (another kind if none) that :func:`edits_differ`."""
    kinds = [edit.kind] * tries + list(EDIT_KINDS) * 2
    for kind in kinds:
        other = _make_edit(rng, objs, kind, ())
        if other is not None and edits_differ(objs, edit, other):
            return other
    raise GenerationError("no alternative edit with a different outcome")


def shared_background(rng: np.random.Generator) -> int:
    """A fresh background seed for :attr:`Scene.bg_seed` (images of one sample share it)."""
    return int(rng.integers(2**31 - 1))
