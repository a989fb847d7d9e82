"""The companions of the DRAKE twin: the public split, ``synth-cls`` and ``synth-caption``.

* ``synth-public-mc`` / ``synth-public-open``: generic single-image questions and captions about
  the primitives, for pretraining the tiny models and for FedMosaic's alignment. Their wording
  is disjoint from every client task, but they use every answer format (choice list,
  True/False, Yes/No, letters, answer ids, short open answers) so a pretrained model knows the
  formats' vocabulary.
* ``synth-cls``: one shape per image, class = colour x fill x shape (192 classes), six domains.
  Balanced by index: label ``index % 192``, domain ``DOMAINS[(index // 192) % 6]``.
* ``synth-caption``: a scene and its multi-sentence description; shorter alternative captions
  are in ``meta["references"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from drake.synth.common import Ctx, Draft, random_objects, relation_holds
from drake.synth.relation import REL_TEXT
from drake.synth.scene import COLOURS, DOMAINS, FILLS, POSITIONS, SHAPES, SIZES, Obj, Scene, arrange
from drake.synth.text import (
    ANSWER_IDS,
    IMAGE,
    LETTERS,
    TRUE_FALSE,
    YES_NO,
    capitalise,
    choice_list,
    coin,
    id_options,
    insert_gold,
    join_and,
    letter_options,
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
        "public_single": "{image}\n{question}",
        "public_mc": "{image}\n{question}\n{options}",
        "open_colour": "Name the colour of the shape.",
        "open_shape": "Name the shape.",
        "open_count": "How many shapes can you see? Reply with a number.",
        "open_caption": "Write a short caption for the picture.",
        "open_domain": "What kind of background is this?",
        "open_fill": "Is the shape solid, outlined or striped?",
        "open_size": "Is the shape small or large?",
        "mc_colour": "Which colour does the shape have?",
        "mc_claim": "Claim: the picture shows {thing}.",
        "mc_letter": "Which shape is in the picture?",
        "mc_domain": "Which background style is this?",
        "mc_many": "Does the picture contain more than one shape?",
    }
)


# ---------------------------------------------------------------------------------------------
# synth-cls


def cls(ctx: Ctx) -> Draft:
    """synth-cls: one large shape of class ``index % 192`` on domain ``(index // 192) % 6``."""
    rng = ctx.rng
    label = ctx.index % len(CLS_CLASSES)
    domain = DOMAINS[(ctx.index // len(CLS_CLASSES)) % len(DOMAINS)]
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
    prompt = _T["cls"].format(image=IMAGE)
    return Draft([Scene((obj,), domain)], prompt, CLS_CLASSES[label], (), label=label)


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


# ---------------------------------------------------------------------------------------------
# public split


def public_open(ctx: Ctx) -> Draft:
    """Public split, open answers: colour, shape, count, caption, background, fill, size."""
    rng = ctx.rng
    family = pick(rng, ("colour", "shape", "count", "caption", "domain", "fill", "size"))
    n = ctx.n_objects(low=1) if family in ("count", "caption", "domain") else 1
    objs = arrange(rng, random_objects(rng, n))
    domain = ctx.domain()
    o = objs[0]
    answer = {
        "colour": o.colour,
        "shape": o.shape,
        "count": str(n),
        "domain": domain,
        "fill": o.fill,
        "size": o.size,
    }.get(family) or short_captions(objs, domain)[0]
    prompt = _T["public_single"].format(image=IMAGE, question=_T["open_" + family])
    return Draft([Scene(objs, domain)], prompt, answer, (), meta={"family": family})


def public_mc(ctx: Ctx) -> Draft:
    """Public split, multiple choice in every answer format (choice list, True/False, letters,
    answer ids, Yes/No)."""
    rng = ctx.rng
    family = pick(rng, ("colour", "claim", "letter", "domain", "many"))
    n = 1
    if family == "many" and coin(rng):
        n = ctx.n_objects(low=2, high=max(2, ctx.knobs.objects[1]))
    objs = arrange(rng, random_objects(rng, n))
    domain = ctx.domain()
    o = objs[0]
    if family == "colour":
        options, pos = insert_gold(
            rng, o.colour, sample(rng, [c for c in COLOURS if c != o.colour], 2)
        )
        question, block, choices, answer = (
            _T["mc_colour"],
            choice_list(options),
            options,
            options[pos],
        )
    elif family == "claim":
        truth = coin(rng)
        shape = o.shape if truth else pick(rng, [s for s in SHAPES if s != o.shape])
        question = _T["mc_claim"].format(thing=with_article(shape))
        block, choices = choice_list(TRUE_FALSE), TRUE_FALSE
        answer = TRUE_FALSE[0] if truth else TRUE_FALSE[1]
    elif family == "letter":
        options, pos = insert_gold(
            rng, o.shape, sample(rng, [s for s in SHAPES if s != o.shape], 3)
        )
        question, block = _T["mc_letter"], letter_options(options)
        choices, answer = LETTERS[:4], LETTERS[pos]
    elif family == "domain":
        options, pos = insert_gold(rng, domain, sample(rng, [d for d in DOMAINS if d != domain], 4))
        question, block, choices, answer = (
            _T["mc_domain"],
            id_options(options),
            ANSWER_IDS,
            ANSWER_IDS[pos],
        )
    else:
        question, block, choices = _T["mc_many"], choice_list(YES_NO), YES_NO
        answer = YES_NO[0] if n > 1 else YES_NO[1]
    prompt = _T["public_mc"].format(image=IMAGE, question=question, options=block)
    return Draft([Scene(objs, domain)], prompt, answer, choices, meta={"family": family})


GENERATORS: Mapping[str, Callable[[Ctx], Draft]] = MappingProxyType(
    {
        "synth-public-mc": public_mc,
        "synth-public-open": public_open,
        "synth-cls": cls,
        "synth-caption": caption,
    }
)

TEXTS: tuple[str, ...] = (*_T.values(), *DOMAIN_PHRASES.values(), *SIZES, "A An a an and , .")
