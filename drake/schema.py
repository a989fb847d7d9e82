"""The DRAKE sample schema: one Arrow/parquet row per sample, as Hugging Face `datasets` features.

Every benchmark the suite builds, real or synthetic, is stored in this one schema, so that the
runtime, the evaluators and `datasets.load_dataset(<folder>)` read every benchmark the same way.

Fields
------
id : str
    Unique within the benchmark (the build checks this across all shards).
task : str
    The task id the sample belongs to.
images : list of Image
    Zero or more images, stored as encoded bytes (PNG for generated data). For an
    ``answer_type`` ``"image"`` sample the last one is the target image, the rest its inputs.
prompt : str
    The text prompt. It holds exactly one ``<image>`` placeholder per image, except an
    ``"image"`` sample's target (its last image), which has none: ``len(images) - 1`` there.
answer : str
    The gold answer. For a multiple-choice sample it is one of ``choices``; for an ``"image"``
    sample it is empty (the target is the last image).
choices : list of str
    The offered options; empty when open-ended.
answer_type : str
    One of :data:`ANSWER_TYPES`.
label : int
    A class id for classification, else -1.
domain : str
    The visual domain (may be empty).
meta : str
    A JSON object with source-specific details.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from drake.errors import SchemaError

IMAGE_TOKEN = "<image>"

ANSWER_TYPES = ("multiple_choice", "open_ended", "classification", "captioning", "image")
"""``"image"`` is an image-generation task (TAP's reconstructions, scored by MSE): its target
image is the sample's last image, which has no ``<image>`` placeholder, and its answer is empty."""

COLUMNS = (
    "id",
    "task",
    "images",
    "prompt",
    "answer",
    "choices",
    "answer_type",
    "label",
    "domain",
    "meta",
)

@lru_cache(maxsize=1)
def features():
    """The sample schema as `datasets.Features` (imported lazily: `datasets` is slow to load)."""
    from datasets import Features, Image, List, Value

    return Features(
        {
            "id": Value("string"),
            "task": Value("string"),
            "images": List(Image()),
            "prompt": Value("string"),
            "answer": Value("string"),
            "choices": List(Value("string")),
            "answer_type": Value("string"),
            "label": Value("int64"),
            "domain": Value("string"),
            "meta": Value("string"),
        }
    )


def _where(sample: Mapping[str, Any], where: str) -> str:
    sid = sample.get("id", "<no id>")
    return f"{where}sample {sid!r}" if not where else f"{where}: sample {sid!r}"


def validate_sample(sample: Mapping[str, Any], where: str = "") -> None:
    """Check one sample against the schema and its invariants.

    Parameters
    ----------
    sample : mapping
        A row with exactly the keys in :data:`COLUMNS`. ``images`` may hold PIL images,
        encoded bytes, or ``{"bytes": ..., "path": ...}`` dicts.
    where : str
        Context for the error message, e.g. the source file.

    Raises
    ------
    SchemaError
        Naming the sample id, the field and the fix.
    """
    loc = _where(sample, where)
    keys = set(sample)
    missing = [c for c in COLUMNS if c not in keys]
    extra = sorted(keys - set(COLUMNS))
    if missing:
        raise SchemaError(f"{loc}: missing field(s) {missing}; every sample needs {list(COLUMNS)}")
    if extra:
        raise SchemaError(f"{loc}: unknown field(s) {extra}; put source details in 'meta' (JSON)")
    for name in ("id", "task", "prompt", "answer", "answer_type", "domain", "meta"):
        if not isinstance(sample[name], str):
            raise SchemaError(
                f"{loc}: field {name!r} must be a string, got {type(sample[name]).__name__}"
            )
    if not sample["id"]:
        raise SchemaError(f"{loc}: field 'id' is empty; give every sample a unique id")
    if sample["answer_type"] not in ANSWER_TYPES:
        raise SchemaError(
            f"{loc}: answer_type {sample['answer_type']!r} is not one of {list(ANSWER_TYPES)}"
        )
    label = sample["label"]
    if isinstance(label, bool) or not isinstance(label, int):
        raise SchemaError(f"{loc}: field 'label' must be an int (-1 when unused), got {label!r}")
    images = sample["images"]
    if not isinstance(images, (list, tuple)):
        raise SchemaError(f"{loc}: field 'images' must be a list, got {type(images).__name__}")
    choices = sample["choices"]
    if not isinstance(choices, (list, tuple)) or not all(isinstance(c, str) for c in choices):
        raise SchemaError(f"{loc}: field 'choices' must be a list of strings")
    kind = sample["answer_type"]
    n_tokens = sample["prompt"].count(IMAGE_TOKEN)
    if kind == "image":
        if not images:
            raise SchemaError(
                f"{loc}: field 'images' is empty, but an image sample stores its target image "
                f"as the last entry of 'images'; append the target"
            )
        if n_tokens != len(images) - 1:
            raise SchemaError(
                f"{loc}: prompt holds {n_tokens} {IMAGE_TOKEN} placeholder(s) but the image "
                f"sample has {len(images) - 1} input image(s) (its last image is the target, "
                f"with no placeholder); the counts must match"
            )
        if sample["answer"]:
            raise SchemaError(
                f"{loc}: field 'answer' is {sample['answer']!r}, but an image sample's target is "
                f"its last image; leave 'answer' empty"
            )
    elif n_tokens != len(images):
        raise SchemaError(
            f"{loc}: prompt holds {n_tokens} {IMAGE_TOKEN} placeholder(s) but the sample has "
            f"{len(images)} image(s); the counts must match"
        )
    if kind == "multiple_choice":
        if len(choices) < 2:
            raise SchemaError(f"{loc}: a multiple_choice sample needs at least 2 choices")
        if sample["answer"] not in choices:
            raise SchemaError(
                f"{loc}: answer {sample['answer']!r} is not one of its choices {list(choices)}"
            )
        if len(set(choices)) != len(choices):
            raise SchemaError(f"{loc}: choices {list(choices)} repeat an option")
    elif choices:
        article = "an" if kind[0] in "aeiou" else "a"
        raise SchemaError(f"{loc}: {article} {kind} sample must have an empty choice list")
    if kind == "classification" and label < 0:
        raise SchemaError(f"{loc}: a classification sample needs a class id >= 0 in 'label'")
    try:
        meta = json.loads(sample["meta"]) if sample["meta"] else {}
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{loc}: field 'meta' is not valid JSON ({exc.msg})") from None
    if not isinstance(meta, dict):
        raise SchemaError(f"{loc}: field 'meta' must hold a JSON object")


def encode_image(image: Any) -> dict[str, Any]:
    """Turn a PIL image, raw bytes or an encoded dict into the stored ``{"bytes", "path"}`` form.

    PIL images are encoded as PNG with fixed options, so the same pixels always give the same
    bytes (the build's byte-identical guarantee rests on this).
    """
    if isinstance(image, dict) and "bytes" in image:
        return {"bytes": image["bytes"], "path": image.get("path")}
    if isinstance(image, (bytes, bytearray)):
        return {"bytes": bytes(image), "path": None}
    save = getattr(image, "save", None)
    if save is None:
        raise SchemaError(f"cannot store an image of type {type(image).__name__}; use PIL or bytes")
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=False, compress_level=6)
    return {"bytes": buf.getvalue(), "path": None}


def to_row(sample: Mapping[str, Any]) -> dict[str, Any]:
    """Return the storage form of a validated sample (images encoded, sequences as lists)."""
    row = {name: sample[name] for name in COLUMNS}
    row["images"] = [encode_image(im) for im in sample["images"]]
    row["choices"] = list(sample["choices"])
    return row
