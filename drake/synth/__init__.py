"""drake-synth: the procedural, deterministic offline twin of the DRAKE benchmark.

Every DRAKE client task has a twin with the same number of images, the same ``<image>``
placement and the same answer format; only pixels and semantics are synthetic (coloured shapes
on a few visual domains, drawn with PIL). Twins in one DRAKE subgroup share primitives, so task
similarity has the same structure as DRAKE's. Beside the 40 client twins there are the 7 unseen
twins, a public split for pretraining tiny models, ``synth-cls`` (classification) and
``synth-caption`` (captioning).

Examples
--------
>>> from drake.synth import SYNTH_TASKS, generate_sample
>>> SYNTH_TASKS["synth-spatial"].twin_of
'VSR-0'
>>> sample = generate_sample("synth-spatial", "train", 0, seed=0)
>>> sample["answer"] in sample["choices"]
True
"""

from drake.synth.catalog import (
    GROUPS,
    SPLITS,
    SYNTH_CLS_CLASSES,
    SYNTH_TASKS,
    SynthTask,
    default_knobs,
    generate_sample,
    stable_task_hash,
    vocabulary,
)
from drake.synth.knobs import DEFAULT_KNOBS, Knobs
from drake.synth.scene import ALL_DOMAINS, DOMAINS, HELD_OUT_DOMAINS
from drake.synth.text import tokenize

__all__ = [
    "ALL_DOMAINS",
    "DEFAULT_KNOBS",
    "DOMAINS",
    "GROUPS",
    "HELD_OUT_DOMAINS",
    "Knobs",
    "SPLITS",
    "SYNTH_CLS_CLASSES",
    "SYNTH_TASKS",
    "SynthTask",
    "default_knobs",
    "generate_sample",
    "stable_task_hash",
    "tokenize",
    "vocabulary",
]
