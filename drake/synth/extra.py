"""The companions of the DRAKE twin: ``synth-cls`` and ``synth-caption`` (the public split is
:mod:`drake.synth.public`).

* ``synth-cls``: one shape per image, class = colour x fill x shape (192 classes), six domains.
  Balanced by index: label ``index % 192``, domain ``DOMAINS[(index // 192) % 6]``.
* ``synth-caption``: a scene and its multi-sentence description; shorter alternative captions
  are in ``meta["references"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from drake.synth.common import Ctx, Draft, random_objects, relation_holds
from drake.synth.relation import REL_TEXT
from drake.synth.scene import COLOURS, DOMAINS, FILLS, POSITIONS, SHAPES, SIZES, Obj, Scene, arrange
from drake.synth.text import (
    IMAGE,
    capitalise,
    join_and,
    pick,
    sample,
    with_article,
)

CLS_TRIPLES: tuple[tuple[str, str, str], ...] = tuple(
    sorted(((c, f, s) for c in COLOURS for f in FILLS for s in SHAPES), key=" ".join)
)
CLS_CLASSES: tuple[str, ...] = tuple(" ".join(t) for t in CLS_TRIPLES)
"""synth-cls class names ("blue outlined circle", ...) in sorted order; the label is the index."""

DOMAIN_PHRASES = MappingProxyType(
    {
        "plain": "on a plain background",
        "noise": "on a noisy background",
        "stripes": "on a striped background",
        "gradient": "on a gradient background",
        "sketch": "sketched on paper",
        "texture": "on a textured background",
        "dots": "on a dotted background",
        "checker": "on a checkered background",
        "night": "against a night sky",
    }
)

_T = MappingProxyType(
    {
        "cls": "{image}\nWhat is shown in the image?",
        "caption": "{image}\nDescribe the image.",
        "cap_count_one": "There is one object {where}.",
        "cap_count": "There are {n} objects {where}.",
        "cap_object": "{thing} is at the {position}.",
        "cap_relation": "The {a} is {rel} the {b}.",
        "cap_short": "{things} {where}.",
    }
)


# ---------------------------------------------------------------------------------------------
# synth-cls


def cls_scene(rng: np.random.Generator, label: int, domain: str) -> Scene:
    """The picture of synth-cls class ``label``: one large shape near the centre on ``domain``
    (also drawn, from other random streams, to pretrain ``tiny-clip``)."""
    colour, fill, shape = CLS_TRIPLES[label]
    obj = Obj(
        shape,
        colour,
        "large",
        fill,
        x=0.5 + float(rng.uniform(-0.12, 0.12)),
        y=0.5 + float(rng.uniform(-0.12, 0.12)),
        r=float(rng.uniform(0.18, 0.3)),
    )
    return Scene((obj,), domain)


def cls(ctx: Ctx) -> Draft:
    """synth-cls: one large shape of class ``index % 192`` on domain ``(index // 192) % 6``."""
    label = ctx.index % len(CLS_CLASSES)
    domain = DOMAINS[(ctx.index // len(CLS_CLASSES)) % len(DOMAINS)]
    prompt = _T["cls"].format(image=IMAGE)
    return Draft([cls_scene(ctx.rng, label, domain)], prompt, CLS_CLASSES[label], (),
                 label=label)


# ---------------------------------------------------------------------------------------------
# synth-caption


def describe_scene(
    objs: Sequence[Obj], domain: str, relation: tuple[int, int, str] | None
) -> list[str]:
    """Sentences describing a scene: the object count and domain, each object with its place
    (reading order), then an optional relation sentence ``(i, j, rel)``."""
    where = DOMAIN_PHRASES[domain]
    n = len(objs)
    first = (
        _T["cap_count_one"].format(where=where)
        if n == 1
        else _T["cap_count"].format(n=n, where=where)
    )
    lines = [first]
    for o in sorted(objs, key=lambda o: o.cell()):
        thing = capitalise(with_article(o.describe(size=True, fill=True)))
        lines.append(_T["cap_object"].format(thing=thing, position=POSITIONS[o.cell()]))
    if relation is not None:
        i, j, rel = relation
        lines.append(
            _T["cap_relation"].format(a=objs[i].describe(), rel=REL_TEXT[rel], b=objs[j].describe())
        )
    return lines


def short_captions(objs: Sequence[Obj], domain: str) -> list[str]:
    """Two one-sentence alternatives: with sizes and the domain, and with fills only."""
    ordered = sorted(objs, key=lambda o: o.cell())
    with_size = join_and([with_article(o.describe(size=True)) for o in ordered])
    with_fill = join_and([with_article(o.describe(fill=True)) for o in ordered])
    return [
        capitalise(_T["cap_short"].format(things=with_size, where=DOMAIN_PHRASES[domain])),
        capitalise(with_fill) + ".",
    ]


def caption(ctx: Ctx) -> Draft:
    """synth-caption: 1-4 objects; the answer is the multi-sentence description (one sentence a
    line), ``meta["references"]`` holds the two one-sentence alternatives."""
    rng = ctx.rng
    objs = arrange(rng, random_objects(rng, ctx.n_objects(low=1)))
    domain = ctx.domain()
    relation = None
    if len(objs) >= 2:
        i, j = sample(rng, range(len(objs)), 2)
        holding = [r for r in REL_TEXT if relation_holds(objs[i], objs[j], r)]
        if holding:
            relation = (i, j, pick(rng, holding))
    lines = describe_scene(objs, domain, relation)
    prompt = _T["caption"].format(image=IMAGE)
    return Draft(
        [Scene(objs, domain)],
        prompt,
        "\n".join(lines),
        (),
        meta={"references": short_captions(objs, domain)},
    )


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType(
    {
        "synth-cls": cls,
        "synth-caption": caption,
    }
)

TEXTS: tuple[str, ...] = (*_T.values(), *DOMAIN_PHRASES.values(), *SIZES, "A An a an and , .")
