"""Every drake-synth task gives valid schema samples, in its declared shape and vocabulary."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache

import pytest
from PIL import Image

from drake.schema import COLUMNS, IMAGE_TOKEN, validate_sample
from drake.synth import (
    ALL_DOMAINS,
    HELD_OUT_DOMAINS,
    SYNTH_TASKS,
    generate_sample,
    tokenize,
    vocabulary,
)

INDICES = range(30)


@cache
def _samples(task_id: str, split: str) -> tuple[dict, ...]:
    return tuple(generate_sample(task_id, split, i, seed=11) for i in INDICES)


@pytest.mark.parametrize("task_id", list(SYNTH_TASKS))
def test_samples_are_valid(task_id):
    task = SYNTH_TASKS[task_id]
    ids = set()
    for split in ("train", "test"):
        for index, s in zip(INDICES, _samples(task_id, split)):
            validate_sample(s)
            assert tuple(s) == COLUMNS or set(s) == set(COLUMNS)
            assert s["id"] == f"{task_id}-{split}-{index:06d}"
            assert s["task"] == task_id
            assert s["answer_type"] == task.answer_type
            lo, hi = task.num_images
            assert lo <= len(s["images"]) <= hi
            assert s["prompt"].count(IMAGE_TOKEN) == len(s["images"])
            for img in s["images"]:
                assert isinstance(img, Image.Image)
                assert img.mode == "RGB" and img.size == (64, 64)
            if task.answer_type == "multiple_choice":
                assert len(s["choices"]) >= 2 and s["answer"] in s["choices"]
            else:
                assert s["choices"] == []
                assert s["answer"].strip()
            if task.answer_type == "classification":
                assert s["label"] >= 0
            else:
                assert s["label"] == -1
            meta = json.loads(s["meta"])
            assert meta["twin_of"] == task.twin_of
            assert len(meta["domains"]) == len(s["images"])
            assert s["domain"] in ("", *ALL_DOMAINS)
            ids.add(s["id"])
    assert len(ids) == 2 * len(INDICES)


@pytest.mark.parametrize("task_id", list(SYNTH_TASKS))
def test_held_out_domains_only_in_unseen_domain_tasks(task_id):
    task = SYNTH_TASKS[task_id]
    seen = set()
    for s in _samples(task_id, "train") + _samples(task_id, "test"):
        seen.update(json.loads(s["meta"])["domains"])
    assert seen <= set(task.domains)
    if task.group == "unseen-domain":
        assert seen <= set(HELD_OUT_DOMAINS)
    else:
        assert not seen & set(HELD_OUT_DOMAINS)


def test_unseen_domain_tasks_use_every_held_out_domain():
    seen = set()
    for task in SYNTH_TASKS.values():
        if task.group == "unseen-domain":
            for s in _samples(task.id, "train"):
                seen.update(json.loads(s["meta"])["domains"])
    assert seen == set(HELD_OUT_DOMAINS)


def test_vocabulary_covers_prompts_choices_and_answers():
    vocab = vocabulary()
    assert vocab == sorted(set(vocab))
    words = set(vocab)
    assert {"<image>", "True", "False", "Choice", ":", "[", "]", "red", "star", "7"} <= words
    missing = Counter()
    for task_id in SYNTH_TASKS:
        for s in _samples(task_id, "train")[:12]:
            for text in (s["prompt"], s["answer"], *s["choices"]):
                missing.update(w for w in tokenize(text) if w not in words)
    assert not missing, f"words outside vocabulary(): {dict(missing)}"


def test_tokenize_rule():
    assert tokenize("Image A:<image> Choice list:[True, False]. It's 12!") == [
        "Image",
        "A",
        ":",
        "<image>",
        "Choice",
        "list",
        ":",
        "[",
        "True",
        ",",
        "False",
        "]",
        ".",
        "It",
        "'",
        "s",
        "12",
        "!",
    ]


def test_vocabulary_rejects_foreign_words():
    words = set(vocabulary())
    assert "zebras" in words  # a figurative phrase word
    assert "elephant" in words
    assert "giraffe" not in words and "Paris" not in words


def test_caption_references_and_multi_sentence_answer():
    for s in _samples("synth-caption", "train"):
        meta = json.loads(s["meta"])
        refs = meta["references"]
        assert isinstance(refs, list) and len(refs) >= 1
        assert all(isinstance(r, str) and r.endswith(".") for r in refs)
        lines = s["answer"].split("\n")
        assert len(lines) >= 2 and all(line.endswith(".") for line in lines)
        assert s["prompt"] == "<image>\nDescribe the image."


def test_public_split_covers_every_family_with_short_open_answers():
    from drake.synth.public import MULTI_FAMILIES, SINGLE_FAMILIES

    for task, families, pictures in (("synth-public-open", SINGLE_FAMILIES, (1, 1)),
                                     ("synth-public-multi", MULTI_FAMILIES, (2, 4))):
        samples = [generate_sample(task, "public", i, seed=0) for i in range(300)]
        seen = {json.loads(s["meta"])["family"] for s in samples}
        assert seen == set(families), (task, set(families) - seen)
        for s in samples:
            assert s["answer_type"] == "open_ended" and s["choices"] == []
            assert pictures[0] <= len(s["images"]) <= pictures[1]
            assert s["prompt"].count("<image>") == len(s["images"])
            # the public wording never borrows a client task's answer formats
            assert "Choice list" not in s["prompt"] and "Tell me" in s["prompt"]
            if json.loads(s["meta"])["family"] != "describe":
                assert 1 <= len(s["answer"].split()) <= 3, s["answer"]
