"""Every drake-synth task gives valid schema samples, in its declared shape and vocabulary."""

from __future__ import annotations

import json
import re
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
            # an image task's target (its last image) has no placeholder
            targets = 1 if task.answer_type == "image" else 0
            assert s["prompt"].count(IMAGE_TOKEN) == len(s["images"]) - targets
            for img in s["images"]:
                assert isinstance(img, Image.Image)
                assert img.mode == "RGB" and img.size == (64, 64)
            if task.answer_type == "multiple_choice":
                assert len(s["choices"]) >= 2 and s["answer"] in s["choices"]
            else:
                assert s["choices"] == []
                # a reconstruction's target is its last picture, not an answer
                assert bool(s["answer"].strip()) == (task.metric != "mse")
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


def _formats_samples(count: int = 600) -> list[dict]:
    return [generate_sample("synth-public-formats", "public", i, seed=0) for i in range(count)]


def _options_of(prompt: str, fmt: str) -> list[str]:
    """The displayed options of a synth-public-formats prompt, in order."""
    if fmt in ("choice", "verdict"):
        return prompt.rsplit("Choice list:[", 1)[1].split("]. Your answer is:")[0].split(", ")
    marker = re.compile(r"^([A-E]|[1-5])\. (.+)$")
    return [m.group(2) for line in prompt.split("\n") if (m := marker.match(line))]


def test_public_formats_cover_every_format_and_family_with_consistent_gold():
    from drake.synth.public import FORMAT_FAMILIES, FORMATS

    samples = _formats_samples()
    metas = [json.loads(s["meta"]) for s in samples]
    assert {m["format"] for m in metas} == set(FORMATS)
    assert {m["family"] for m in metas} == set(FORMAT_FAMILIES)
    for s, m in zip(samples, metas):
        prompt, gold, fmt = s["prompt"], s["answer"], m["format"]
        assert prompt.count("<image>") == len(s["images"]) and "Tell me" not in prompt
        assert re.search(r"^Question: [^?\n]+\?", prompt, flags=re.M), prompt
        options = _options_of(prompt, fmt)
        if fmt == "choice":
            assert gold in options and len(options) == len(set(options)) >= 2
        elif fmt == "letter":
            assert gold in "ABCDE"[: len(options)] and len(options) >= 2
        elif fmt == "id":
            assert 1 <= int(gold) <= len(options) and f"({','.join(str(i + 1) for i in range(len(options)))})" in prompt
        elif fmt == "verdict":
            assert options in (["True", "False"], ["Yes", "No"], ["Positive", "Negative"])
            assert gold in options
        if m["family"] in ("multi_which", "multi_more") and fmt == "choice":
            # a picture answer is one of the pictures' labels as the prompt shows them
            labelled = re.findall(r"^Image (\w):<image>$", prompt, flags=re.M)
            if labelled and gold != "equal":
                assert gold in [f"Image {k}" for k in labelled]


def test_public_formats_gold_reads_the_scene():
    """Colour questions in every format: the gold picks the colour of the named shape."""
    from drake.synth.scene import Scene

    checked = 0
    for s in _formats_samples(900):
        m = json.loads(s["meta"])
        if m["family"] != "colour":
            continue
        shape = re.search(r"Question: Which colour does the (\w+) have\?", s["prompt"]).group(1)
        (scene,) = [Scene.from_summary(r) for r in m["scenes"]]
        truth = next(o.colour for o in scene.objects if o.shape == shape)
        options, gold, fmt = _options_of(s["prompt"], m["format"]), s["answer"], m["format"]
        if fmt == "letter":
            assert options["ABCDE".index(gold)] == truth
        elif fmt == "id":
            assert options[int(gold) - 1] == truth
        elif fmt == "verdict":
            proposed = re.search(r"(?:Proposed answer|the answer is):? (\w+)\.", s["prompt"]).group(1)
            assert (gold in ("True", "Yes", "Positive")) == (proposed == truth)
        else:
            assert gold == truth
        checked += 1
    assert checked >= 20


def test_public_questions_never_repeat_a_client_or_unseen_question():
    """The public split re-uses the client tasks' answer formats, never their questions."""
    from drake.synth import SYNTH_TASKS
    from drake.synth.scene import COLOURS, SHAPES

    words = "|".join([*SHAPES, *COLOURS, "crosse"])
    named = re.compile(rf"\b(?:{words})s?\b|\b\d+\b")

    def questions(prompt: str) -> set[str]:
        """Question sentences with colours, shapes and numbers masked (templates, not fills)."""
        return {named.sub("_", q) for q in re.findall(r"[A-Z][^?.:\n]*\?", prompt)}

    public = set()
    for task in ("synth-public-open", "synth-public-multi", "synth-public-formats"):
        for i in range(300):
            public |= questions(generate_sample(task, "public", i, seed=0)["prompt"])
    assert len(public) > 25
    for task, spec in SYNTH_TASKS.items():
        if spec.group in ("public",):
            continue
        for i in range(40):
            shared = public & questions(generate_sample(task, "train", i, seed=0)["prompt"])
            assert not shared, (task, shared)
