"""tap-synth: the offline twins of TAP's eight datasets (TAP §5.1, Tab. 23), on drake-synth
scenes.

Each twin keeps its real task's modalities, task kind and answer format; only the pixels and
the semantics are synthetic. Every text uses drake-synth's vocabulary, so the tiny models'
tokenizer covers it.

======================  ================  ===================================================
twin                    of                sample
======================  ================  ===================================================
``tap-synth-objects``   tiny-ImageNet     one shape, class = colour x fill x shape (192)
``tap-synth-coarse``    CIFAR-100         one shape, class = colour x shape (64), any fill
``tap-synth-item``      Fashion-MNIST     reconstruct a single shape on a plain background
``tap-synth-scene``     Caltech-256       reconstruct a scene of 1-4 shapes on any background
``tap-synth-topic``     AG News           text only: a scene description, class = the colour
                                          of its one large shape (4 classes)
``tap-synth-quiz``      MMLU (3 subsets)  text only: a scene description and a lettered
                                          question about colour, shape or place;
                                          ``"Answer on <subject>: <letter>. <option>"``
``tap-synth-vqa``       VQAv2             image and question; ``"Answer: <short answer>"``
``tap-synth-describe``  CommonGen         text only: lettered concepts; ``"Description:
                                          <sentence>"`` that uses them all
======================  ================  ===================================================

Reconstruction samples are of answer type ``"image"``: two pictures, the input (the prompt's one
``<image>``) and, last, the target, drawn from the same scene and background seed so that its
pixels equal the input's (TAP reconstructs its input; scored by MSE); the answer is empty.
Image-classification prompts are the bare ``<image>``, as TAP feeds pictures without text.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from drake.synth.common import Ctx, Draft, random_objects
from drake.synth.extra import CLS_CLASSES, cls_scene, describe_scene
from drake.synth.scene import COLOURS, FILLS, POSITIONS, SHAPES, Obj, Scene, arrange
from drake.synth.text import IMAGE, LETTERS, capitalise, pick, sample, shuffled, with_article

COARSE_CLASSES: tuple[str, ...] = tuple(sorted(f"{c} {s}" for c in COLOURS for s in SHAPES))
"""tap-synth-coarse's class names ("blue circle", ...), sorted; the label is the index."""
TOPIC_CLASSES: tuple[str, ...] = ("red", "green", "blue", "yellow")
"""tap-synth-topic's classes: the colour of the described scene's one large shape."""
QUIZ_SUBJECTS: tuple[str, ...] = ("colour", "shape", "place")
"""tap-synth-quiz's three subjects (MMLU's law, medicine and moral scenarios)."""

_T = MappingProxyType({
    "quiz": "The following is a question about {subject}. Choose the answer from the choices "
            "below.\n\nQuestion: {scene} {question}\nChoices:\n{options}",
    "quiz_answer": "Answer on {subject}: {letter}. {option}",
    "colour": "What colour is the {shape}?",
    "shape": "What shape is the {colour} object?",
    "place": "Where is the {thing}?",
    "vqa": "{image}\nLook at the image and answer the question.\n\nQuestion: {question}",
    "vqa_answer": "Answer: {answer}",
    "count": "How many objects are there?",
    "exists": "Is there {thing}?",
    "describe": "Describe a scene with each concept below.\n\nConcept list:\n{concepts}",
    "describe_answer": "Description: {sentence}",
})
#: tap-synth's literal texts (for the vocabulary check)
TEXTS: tuple[str, ...] = (*_T.values(), *COARSE_CLASSES, *TOPIC_CLASSES, *QUIZ_SUBJECTS, "yes",
                          "no")


def _lettered(options: list[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))


def _described(objs: list[Obj]) -> dict:
    """``meta`` of a text-only sample: the objects its text describes."""
    return {"described": [o.summary() for o in objs]}


def _scene_text(objs: list[Obj], domain: str) -> str:
    return " ".join(describe_scene(objs, domain, None))


def objects(ctx: Ctx) -> Draft:
    """tiny-ImageNet's twin: synth-cls's 192 classes, balanced by index."""
    label = ctx.index % len(CLS_CLASSES)
    domain = ctx.domains[(ctx.index // len(CLS_CLASSES)) % len(ctx.domains)]
    return Draft([cls_scene(ctx.rng, label, domain)], IMAGE, CLS_CLASSES[label], (), label=label)


def coarse(ctx: Ctx) -> Draft:
    """CIFAR-100's twin: colour x shape (64 classes), balanced by index; the fill is drawn."""
    label = ctx.index % len(COARSE_CLASSES)
    colour, shape = COARSE_CLASSES[label].split(" ")
    fill = pick(ctx.rng, FILLS)
    fine = CLS_CLASSES.index(f"{colour} {fill} {shape}")
    scene = cls_scene(ctx.rng, fine, ctx.domain())
    return Draft([scene], IMAGE, COARSE_CLASSES[label], (), label=label)


def _reconstruct(ctx: Ctx, picture: Scene) -> Draft:
    """A reconstruction of ``picture``: the input and, last, the target, one scene with one
    background seed (no degradations), so that both render to the same pixels."""
    fixed = replace(picture, bg_seed=int(ctx.rng.integers(2**31)))
    return Draft([fixed, fixed], IMAGE, "", ())


def item(ctx: Ctx) -> Draft:
    """Fashion-MNIST's twin: one centred shape on a plain background, to reconstruct."""
    return _reconstruct(ctx, cls_scene(ctx.rng, int(ctx.rng.integers(len(CLS_CLASSES))),
                                       "plain"))


def scene(ctx: Ctx) -> Draft:
    """Caltech-256's twin: a scene of 1-4 shapes on one of the task's backgrounds, to
    reconstruct."""
    rng = ctx.rng
    objs = arrange(rng, random_objects(rng, ctx.n_objects(low=1)))
    return _reconstruct(ctx, Scene(tuple(objs), ctx.domain()))


def topic(ctx: Ctx) -> Draft:
    """AG News's twin: a scene described in words (no picture); the class is the colour of its
    only large shape, the others small and of other colours."""
    rng = ctx.rng
    label = int(rng.integers(len(TOPIC_CLASSES)))
    big = random_objects(rng, 1, colours=(TOPIC_CLASSES[label],), sizes=("large",))
    others = random_objects(rng, ctx.n_objects(low=1) - 1, sizes=("small",),
                            colours=[c for c in COLOURS if c != TOPIC_CLASSES[label]],
                            taken=[o.key() for o in big])
    objs = arrange(rng, big + others)
    return Draft([], _scene_text(objs, ctx.domain()), TOPIC_CLASSES[label], (), label=label,
                 meta=_described(objs))


def quiz(ctx: Ctx) -> Draft:
    """MMLU's twin: a described scene and one four-option question about it, in one of three
    subjects; the answer names the subject, the letter and the option."""
    rng = ctx.rng
    objs = arrange(rng, random_objects(rng, ctx.n_objects(low=2)))
    target = pick(rng, objs)
    subject = pick(rng, QUIZ_SUBJECTS)
    if subject == "colour":
        question = _T["colour"].format(shape=target.shape)
        gold, pool = target.colour, COLOURS
        if sum(o.shape == target.shape for o in objs) > 1:  # name it by colour-free place
            question = _T["colour"].format(shape=f"{target.shape} at the "
                                                 f"{POSITIONS[target.cell()]}")
    elif subject == "shape":
        question = _T["shape"].format(colour=target.colour)
        gold, pool = target.shape, SHAPES
        if sum(o.colour == target.colour for o in objs) > 1:
            question = _T["place"].format(thing=target.describe())
            subject, gold, pool = "place", POSITIONS[target.cell()], POSITIONS
    else:
        question = _T["place"].format(thing=target.describe())
        gold, pool = POSITIONS[target.cell()], POSITIONS
    options = shuffled(rng, [gold, *sample(rng, [p for p in pool if p != gold], 3)])
    pos = options.index(gold)
    prompt = _T["quiz"].format(subject=subject, scene=_scene_text(objs, ctx.domain()),
                               question=question, options=_lettered(options))
    answer = _T["quiz_answer"].format(subject=subject, letter=LETTERS[pos], option=gold)
    return Draft([], prompt, answer, (),
                 meta={"short_answer": gold, "subject": subject, **_described(objs)})


def vqa(ctx: Ctx) -> Draft:
    """VQAv2's twin: a question about the picture (a colour, a count, or yes/no)."""
    rng = ctx.rng
    objs = arrange(rng, random_objects(rng, ctx.n_objects(low=1)))
    kind = pick(rng, ("colour", "count", "exists"))
    if kind == "colour":
        target = pick(rng, objs)
        question, short = _T["colour"].format(shape=target.shape), target.colour
        if sum(o.shape == target.shape for o in objs) > 1:
            question = _T["colour"].format(
                shape=f"{target.shape} at the {POSITIONS[target.cell()]}")
    elif kind == "count":
        question, short = _T["count"], str(len(objs))
    else:
        present = rng.random() < 0.5
        probe = pick(rng, objs) if present else random_objects(
            rng, 1, taken=[o.key() for o in objs])[0]
        question = _T["exists"].format(thing=with_article(probe.describe()))
        short = "yes" if present else "no"
    prompt = _T["vqa"].format(image=IMAGE, question=question)
    return Draft([Scene(tuple(objs), ctx.domain())], prompt,
                 _T["vqa_answer"].format(answer=short), (), meta={"short_answer": short})


def describe(ctx: Ctx) -> Draft:
    """CommonGen's twin: the colour, shape and place of one or two shapes as lettered concepts
    (shuffled); the answer is the sentence that places each."""
    rng = ctx.rng
    objs = arrange(rng, random_objects(rng, int(rng.integers(1, 3))))
    concepts = shuffled(rng, [w for o in objs for w in (o.colour, o.shape,
                                                        POSITIONS[o.cell()])])
    sentence = " ".join(f"{capitalise(with_article(o.describe()))} is at the "
                        f"{POSITIONS[o.cell()]}." for o in sorted(objs, key=lambda o: o.cell()))
    prompt = _T["describe"].format(concepts=_lettered(concepts))
    return Draft([], prompt, _T["describe_answer"].format(sentence=sentence), (),
                 meta=_described(objs))


GENERATORS = MappingProxyType({
    "tap-synth-objects": objects,
    "tap-synth-coarse": coarse,
    "tap-synth-item": item,
    "tap-synth-scene": scene,
    "tap-synth-topic": topic,
    "tap-synth-quiz": quiz,
    "tap-synth-vqa": vqa,
    "tap-synth-describe": describe,
})
