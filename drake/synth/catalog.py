"""The drake-synth task table and the one entry point that generates a sample.

``SYNTH_TASKS`` reads like a benchmark card: every twin names the real DRAKE task it mirrors,
its subgroup, answer format, metric, image count and visual domains. ``generate_sample`` turns
(task, split, index, seed) into one schema sample, deterministically and independently of any
other call, so that a build can generate rows in any order, in parallel, or resume midway.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from drake.synth import extra, public, reasoning, relation, tap, unseen, vqa
from drake.synth.common import Ctx, Draft, GenerationError
from drake.synth.knobs import DEFAULT_KNOBS, Knobs
from drake.synth.scene import (
    ALL_DOMAINS,
    COLOURS,
    DOMAINS,
    FILLS,
    HELD_OUT_DOMAINS,
    POSITIONS,
    SHAPES,
    SIZES,
    render,
)
from drake.synth.text import FORMAT_TEXTS, IMAGE, LETTERS, literal_words

SPLITS = MappingProxyType({"train": 0, "test": 1, "public": 2})
"""Split name -> code mixed into the per-sample seed ("public" is accepted for public tasks)."""

_ATTEMPTS = 8

GROUPS = (
    "relation",
    "reasoning",
    "vqa",
    "unseen-task",
    "unseen-domain",
    "public",
    "cls",
    "caption",
    "tap",
)


@dataclass(frozen=True)
class SynthTask:
    """One drake-synth task: what it mirrors and what its samples look like."""

    id: str
    twin_of: str | None
    group: str
    answer_type: str
    metric: str
    num_images: tuple[int, int]
    description: str
    domains: tuple[str, ...]


def _t(
    id_: str,
    twin_of: str | None,
    group: str,
    images: tuple[int, int],
    description: str,
    answer_type: str = "multiple_choice",
    metric: str = "accuracy",
    domains: tuple[str, ...] = DOMAINS,
) -> tuple[str, SynthTask]:
    return id_, SynthTask(id_, twin_of, group, answer_type, metric, images, description, domains)


_NO_SKETCH = tuple(d for d in DOMAINS if d != "sketch")
_R, _Q, _V = "relation", "reasoning", "vqa"

# fmt: off
SYNTH_TASKS: Mapping[str, SynthTask] = MappingProxyType(dict([
    # client 0 (small)
    _t("synth-colour-count", "Fashion200K-0", _R, (3, 3),
       "count the objects of a named colour across three images; digit choice list"),
    _t("synth-edit-direction", "MagicBrush-0", _R, (2, 2),
       "Image A/Image B and an edit instruction: was it applied A to B or B to A"),
    _t("synth-pair-statement", "VISION-0", _R, (2, 2),
       "a quantified statement about two images (both/neither/exactly one contain X)"),
    _t("synth-query-reference", "FashionIQ-0", _R, (2, 2),
       "query and reference item plus a description of their difference; True/False"),
    # client 1 (small)
    _t("synth-spatial", "VSR-0", _R, (1, 1),
       "one image and a caption with a left/right/above/below relation; True/False"),
    _t("synth-quad-statement", "VISION-1", _R, (4, 4),
       "a quantified statement over four images (all/none/exactly k contain X)"),
    _t("synth-quad-colour", "Fashion200K-2", _R, (4, 4),
       "do the main items of four images share the (named) colour; True/False"),
    _t("synth-pair-count", "NLVR2-0", _R, (2, 2),
       "left/right image count comparison (more/fewer/same number of X); True/False"),
    # client 2 (large)
    _t("synth-motion", "SEED-Bench-2-2", _R, (4, 8),
       "4-8 video frames: how does a shape move or change; letters A-D"),
    _t("synth-triple-style", "Fashion200K-1", _R, (3, 3),
       "are three images drawn in the same (named) style/domain; True/False"),
    _t("synth-pair-relation", "NLVR2-1", _R, (2, 2),
       "left/right image relation, homogeneity and exact-count statements; True/False"),
    _t("synth-transition", "CIRR-0", _R, (2, 2),
       "reference and target image plus a modification text; True/False"),
    # client 3 (large)
    _t("synth-answerable", "VizWiz-0", _Q, (1, 1),
       "a degraded or occluded photo and a question: can it be answered; True/False",
       domains=_NO_SKETCH),
    _t("synth-metaphor-image", "IRFL-2", _Q, (4, 4),
       "Image A-D and a metaphor or simile naming a pattern: which image shows it"),
    _t("synth-common-relation", "Bongard-HOI-1", _Q, (6, 6),
       "six images share a small-to-large shape relation: which of four"),
    _t("synth-state", "MIT-States-0", _Q, (1, 1),
       "the state of a named shape (solid/outlined/striped/broken/faded); choice list",
       domains=_NO_SKETCH),
    # client 4 (large)
    _t("synth-idiom-image", "IRFL-1", _Q, (4, 4),
       "Image A-D and an idiom naming a pattern: which image shows it"),
    _t("synth-common-concept", "Bongard-OpenWorld-1", _Q, (6, 6),
       "six images share an attribute concept: which of four, with close distractors"),
    _t("synth-story-next", "COMICS_Dialogue-0", _Q, (3, 3),
       "three story panels: which caption comes next; 'A: ...| B: ...', gold letter"),
    _t("synth-figurative-tf", "IRFL-0", _Q, (1, 1),
       "one image and a figurative phrase: does it fit; True/False"),
    # client 5 (large)
    _t("synth-odd-relation", "Bongard-HOI-2", _Q, (4, 4),
       "Image A-D: which image breaks the relation the other three share"),
    _t("synth-concept-query", "Bongard-OpenWorld-0", _Q, (7, 7),
       "3 positive, 3 negative images of an attribute concept, a query: Positive/Negative"),
    _t("synth-phrase-for-image", "IRFL-3", _Q, (1, 1),
       "one image: which of four figurative phrases fits; choice list"),
    _t("synth-relation-query", "Bongard-HOI-0", _Q, (7, 7),
       "3 positive, 3 negative images of a relation rule, a query: Positive/Negative"),
    # client 6 (large)
    _t("synth-dish-name", "WCVQA-0", _V, (1, 1),
       "a named composite pattern ('dish'): which name; answer id 1-5"),
    _t("synth-count-open", "iconqa-2", _V, (1, 1),
       "easy counting answered with a single number (open-ended, token F1)",
       answer_type="open_ended", metric="token_f1"),
    _t("synth-quality-pair", "Co-Instruct-DB-2", _V, (2, 2),
       "two degraded images: which is sharper/brighter/cleaner; [First image, Second image]"),
    _t("synth-shape-facts", "SEED-Bench-2-1", _V, (1, 1),
       "knowledge about the shapes shown (corners); letters A-D"),
    # client 7 (large)
    _t("synth-diagram", "TQA-0", _V, (1, 1),
       "a diagram of shapes with digit labels; letters A-D"),
    _t("synth-dish-region", "WCVQA-3", _V, (1, 1),
       "a composite pattern: which region it comes from; answer id 1-5"),
    _t("synth-count-choice", "iconqa-1", _V, (1, 1),
       "harder counting and count comparison; choice list"),
    _t("synth-quality-yesno", "Co-Instruct-DB-1", _V, (1, 1),
       "a yes/no question about image quality or content; choice list [Yes, No]"),
    # client 8 (small)
    _t("synth-quality-what", "Co-Instruct-DB-0", _V, (1, 1),
       "a what/how question about distortion, clarity, lighting or content; choice list"),
    _t("synth-bar-chart", "dvqa-0", _V, (1, 1),
       "a bar chart: tallest bar, a value, a comparison or the bar count; choice list"),
    _t("synth-dish-context", "WCVQA-1", _V, (1, 1),
       "as synth-dish-name with a helpful context naming the region; answer id 1-5"),
    _t("synth-count-arith", "iconqa-3", _V, (1, 1),
       "harder counting and arithmetic answered with a number (open-ended, token F1)",
       answer_type="open_ended", metric="token_f1"),
    # client 9 (small)
    _t("synth-count-easy", "iconqa-0", _V, (1, 1),
       "easy counting of one shape; choice list"),
    _t("synth-quality-triple", "Co-Instruct-DB-3", _V, (3, 3),
       "three images: best/worst in a quality; [First image, Second image, Third image]"),
    _t("synth-instance-attr", "SEED-Bench-2-0", _V, (1, 1),
       "an attribute (colour, shape, position) of one instance; letters A-D"),
    _t("synth-dish-misleading", "WCVQA-2", _V, (1, 1),
       "as synth-dish-name with a misleading context; answer id 1-5"),
    # unseen: new task type
    _t("synth-step-coherence", "RecipeQA_ImageCoherence-0", "unseen-task", (4, 4),
       "four steps of a process: which image does not fit; Image A-D"),
    _t("synth-step-cloze", "RecipeQA_VisualCloze-0", "unseen-task", (7, 7),
       "three steps with a gap and four candidates: which completes it; Image A-D"),
    _t("synth-caption-match", "Mantis_contrastive_caption-1", "unseen-task", (3, 8),
       "up to eight contrastive images and a caption: which image; Image 1-8"),
    _t("synth-edit-direction-multi", "HQ_Edit-0", "unseen-task", (2, 2),
       "Image A/Image B and a two- or three-part edit: A to B or B to A"),
    # unseen: new visual domain
    _t("synth-similarity-ood", "DreamSim-0", "unseen-domain", (3, 3),
       "reference and Image A/B on a held-out domain: which is more similar",
       domains=HELD_OUT_DOMAINS),
    _t("synth-caption-match-ood", "Mantis_contrastive_caption-0", "unseen-domain", (3, 8),
       "as synth-caption-match on a held-out domain", domains=HELD_OUT_DOMAINS),
    _t("synth-near-identical-ood", "imagecode-0", "unseen-domain", (4, 4),
       "four near-identical candidates and a description, held-out domain; Image 1-4",
       domains=HELD_OUT_DOMAINS),
    # public split, classification, captioning
    _t("synth-public-open", None, "public", (1, 1),
       "generic short-answer questions and descriptions of one picture (look-up, counting, "
       "places, relations, background, quality, bars, tags)",
       answer_type="open_ended", metric="token_f1"),
    _t("synth-public-multi", None, "public", (2, 4),
       "generic short-answer questions across two to four pictures (which picture, how many "
       "pictures, per-picture attributes, comparisons)",
       answer_type="open_ended", metric="token_f1"),
    _t("synth-public-formats", None, "public", (1, 4),
       "the same generic questions, worded as questions, in the client tasks' answer formats "
       "(choice list, letters, answer ids, a proposed answer to judge, a single word)",
       answer_type="open_ended", metric="token_f1"),
    _t("synth-cls", None, "cls", (1, 1),
       "classify colour x fill x shape (192 classes) across six domains",
       answer_type="classification"),
    _t("synth-caption", None, "caption", (1, 1),
       "describe a scene in several sentences (alternative captions in meta.references)",
       answer_type="captioning", metric="caption"),
    # tap-synth: TAP's eight datasets (drake.synth.tap)
    _t("tap-synth-objects", "tiny-imagenet", "tap", (1, 1),
       "one shape; class = colour x fill x shape (192)", answer_type="classification"),
    _t("tap-synth-coarse", "cifar100", "tap", (1, 1),
       "one shape; class = colour x shape (64), any fill", answer_type="classification"),
    _t("tap-synth-item", "fashion-mnist", "tap", (2, 2),
       "reconstruct one centred shape on a plain background (64x64); target stored last",
       answer_type="image", metric="mse"),
    _t("tap-synth-scene", "caltech256", "tap", (2, 2),
       "reconstruct a scene of one to four shapes (64x64); target stored last",
       answer_type="image", metric="mse"),
    _t("tap-synth-topic", "ag-news", "tap", (0, 0),
       "text only: a described scene; class = the colour of its one large shape (4)",
       answer_type="classification"),
    _t("tap-synth-quiz", "mmlu", "tap", (0, 0),
       "text only: a described scene and a lettered question on colour, shape or place, "
       "answered as 'Answer on <subject>: <letter>. <option>'",
       answer_type="open_ended", metric="generation"),
    _t("tap-synth-vqa", "vqav2-small", "tap", (1, 1),
       "a question on the picture (colour, count, yes/no), answered as 'Answer: <answer>'",
       answer_type="open_ended", metric="generation"),
    _t("tap-synth-describe", "common-gen", "tap", (0, 0),
       "text only: lettered concepts to one sentence, answered as 'Description: <sentence>'",
       answer_type="open_ended", metric="generation"),
]))
# fmt: on
"""Every drake-synth task by id: the 40 client twins in DRAKE's released client order, the 7
unseen twins, the three public-split tasks, synth-cls, synth-caption, and tap-synth's eight
twins of TAP's datasets."""

_GENERATORS = MappingProxyType(
    {
        **relation.GENERATORS,
        **reasoning.GENERATORS,
        **vqa.GENERATORS,
        **unseen.GENERATORS,
        **extra.GENERATORS,
        **public.GENERATORS,
        **tap.GENERATORS,
    }
)

SYNTH_CLS_CLASSES = extra.CLS_CLASSES


def stable_task_hash(task_id: str) -> int:
    """CRC-32 of the task id: a hash that is the same in every process and Python version."""
    return zlib.crc32(task_id.encode("utf-8"))


def default_knobs(task_id: str) -> Knobs:
    """The default difficulty knobs of ``task_id``."""
    _task(task_id)
    return DEFAULT_KNOBS[task_id]


def _task(task_id: str) -> SynthTask:
    try:
        return SYNTH_TASKS[task_id]
    except KeyError:
        from drake.errors import UnknownNameError

        raise UnknownNameError(
            f"unknown drake-synth task {task_id!r}; choose one of {sorted(SYNTH_TASKS)}"
        ) from None


def _common_domain(domains: list[str]) -> str:
    return domains[0] if domains and all(d == domains[0] for d in domains) else ""


def generate_sample(
    task_id: str,
    split: str,
    index: int,
    seed: int,
    image_size: int = 64,
    knobs: Knobs | None = None,
) -> dict[str, Any]:
    """Generate sample ``index`` of ``split`` of a drake-synth task.

    The sample is a deterministic function of the arguments alone: one generator
    ``np.random.default_rng([seed, crc32(task_id), split_code, index])`` drives first the task's
    scene and text construction, then the rendering of its images, in order. Nothing else (no
    global state, no call order) enters. If a generator cannot meet its constraints with that
    stream (a rare rejection-sampling dead end), it is rerun with
    ``default_rng([seed, crc32(task_id), split_code, index, attempt])``, attempt = 1, 2, ...

    Parameters
    ----------
    task_id : str
        A key of :data:`SYNTH_TASKS`.
    split : str
        ``"train"`` or ``"test"`` (``"public"`` is also accepted for the public tasks).
    index : int
        Row index, >= 0. Any index gives a valid sample. In ``synth-cls`` the label is
        ``index % 192`` and the domain ``DOMAINS[(index // 192) % 6]``, so any contiguous block of
        ``192 * 6`` indices is exactly balanced over classes and domains. Other tasks draw their
        gold answer from the generator (True/False by a fair coin, gold letters uniform).
    seed : int
        Non-negative base seed of the build.
    image_size : int
        Side of the square RGB images in pixels (>= 16).
    knobs : Knobs, optional
        Difficulty override; default :data:`drake.synth.knobs.DEFAULT_KNOBS` of the task.

    Returns
    -------
    dict
        Exactly the schema keys: ``id`` (``f"{task_id}-{split}-{index:06d}"``), ``task``,
        ``images`` (PIL RGB images), ``prompt`` (one ``<image>`` per image), ``answer``,
        ``choices``, ``answer_type``, ``label``, ``domain`` (the images' common domain, or ``""``
        if they differ) and ``meta`` (sorted-key JSON of the generation record).

    Raises
    ------
    UnknownNameError
        ``task_id`` is not a drake-synth task.
    ValueError
        A bad split, index, seed or image size (the message names it).
    TypeError
        ``knobs`` is not a :class:`Knobs`.

    Examples
    --------
    >>> s = generate_sample("synth-spatial", "train", 0, seed=0)
    >>> s["prompt"].count("<image>") == len(s["images"]) == 1
    True
    """
    task = _task(task_id)
    if split not in SPLITS or (split == "public" and task.group != "public"):
        allowed = ["train", "test"] + (["public"] if task.group == "public" else [])
        raise ValueError(f"split {split!r} is not valid for {task_id}; use one of {allowed}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"index must be an integer >= 0, got {index!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if (
        isinstance(image_size, bool)
        or not isinstance(image_size, (int, np.integer))
        or image_size < 16
    ):
        raise ValueError(f"image_size must be an integer >= 16, got {image_size!r}")
    if knobs is None:
        knobs = DEFAULT_KNOBS[task_id]
    elif not isinstance(knobs, Knobs):
        raise TypeError(f"knobs must be a drake.synth.knobs.Knobs, got {type(knobs).__name__}")
    key = [int(seed), stable_task_hash(task_id), SPLITS[split], int(index)]
    for attempt in range(_ATTEMPTS):
        # a constraint a generator could not meet (vanishingly rare) is retried with a seed
        # derived from the same arguments, so the result stays a function of them alone
        rng = np.random.default_rng(key if attempt == 0 else [*key, attempt])
        ctx = Ctx(rng=rng, knobs=knobs, domains=task.domains, index=int(index))
        try:
            draft: Draft = _GENERATORS[task_id](ctx)
            break
        except GenerationError:
            if attempt == _ATTEMPTS - 1:
                raise
    images = [render(scene, int(image_size), rng) for scene in draft.scenes]
    domains = [scene.domain for scene in draft.scenes]
    meta = {
        "twin_of": task.twin_of,
        "group": task.group,
        "domains": domains,
        "scenes": [scene.summary() for scene in draft.scenes],
        "knobs": dataclasses.asdict(knobs),
        **draft.meta,
    }
    return {
        "id": f"{task_id}-{split}-{int(index):06d}",
        "task": task_id,
        "images": images,
        "prompt": draft.prompt,
        "answer": draft.answer,
        "choices": list(draft.choices),
        "answer_type": task.answer_type,
        "label": int(draft.label),
        "domain": _common_domain(domains),
        "meta": json.dumps(meta, sort_keys=True),
    }


def vocabulary() -> list[str]:
    """Every word a drake-synth prompt, choice or answer can contain, sorted.

    Words are as :func:`drake.synth.text.tokenize` splits them (``<image>``, letter runs, digit
    runs, single punctuation marks). The list is the union of the literal words of every
    template and phrase table of the generators, the primitive names (shapes and their plurals,
    colours, sizes, fills, positions, all domains), the letters A-H and the numbers 0-99.
    """
    words: set[str] = {IMAGE, *LETTERS}
    words.update(str(n) for n in range(100))
    texts = [
        *FORMAT_TEXTS,
        *relation.TEXTS,
        *reasoning.TEXTS,
        *vqa.TEXTS,
        *unseen.TEXTS,
        *extra.TEXTS,
        *public.TEXTS,
    ]
    texts += [
        *SHAPES,
        *(s + "s" for s in SHAPES),
        "crosses",
        *COLOURS,
        *SIZES,
        *FILLS,
        *POSITIONS,
        *ALL_DOMAINS,
    ]
    for text in texts:
        words.update(literal_words(text))
        words.update(w.capitalize() for w in literal_words(text) if w.isalpha())
    return sorted(words)
