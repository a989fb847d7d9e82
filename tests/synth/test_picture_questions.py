"""drake.synth.public.picture_question: which picture is which (the picture stage's questions)."""

from __future__ import annotations

import json

import numpy as np

from drake.synth.public import (
    _P,
    COMPARE_FAMILIES,
    PICTURE_FAMILIES,
    PICTURE_TOKENS,
    QUALITY_WORDS,
    picture_question,
)


def _scenes(sample: dict) -> list:
    from drake.synth.scene import Scene

    return [Scene.from_summary(s) for s in json.loads(sample["meta"])["scenes"]]


def test_picture_questions_answer_from_the_asked_picture() -> None:
    rng = np.random.default_rng(3)
    made = [picture_question(rng, f"p-{i}") for i in range(200)]
    again = np.random.default_rng(3)
    assert [picture_question(again, f"p-{i}")[0]["prompt"] for i in range(200)] == \
        [s["prompt"] for s, _ in made]
    families = set()
    for sample, tokens in made:
        meta = json.loads(sample["meta"])
        scenes = _scenes(sample)
        n = len(scenes)
        assert 2 <= n <= 4 and len(sample["images"]) == n == sample["prompt"].count("<image>")
        k = meta["picture"]
        assert tokens == list(range(k * PICTURE_TOKENS, (k + 1) * PICTURE_TOKENS)) and k < n
        family = meta["family"]
        families.add(family)
        looks = [QUALITY_WORDS[s.effects[0][0] if s.effects else ""] for s in scenes]
        if family == "which_background":
            asked = scenes[k].domain
            assert f"the {asked} background" in sample["prompt"]
            assert sample["answer"] == str(k + 1)
            assert [s.domain for s in scenes].count(asked) == 1
        elif family == "background_at":
            assert f"in picture {k + 1}." in sample["prompt"]
            assert sample["answer"] == scenes[k].domain
        elif family == "which_look":
            assert sample["answer"] == str(k + 1)
            assert f"looks {looks[k]}." in sample["prompt"] and looks[k] != "clean"
            assert looks.count("clean") == n - 1
        else:
            assert family == "look_at" and f"how picture {k + 1} looks" in sample["prompt"]
            assert sample["answer"] == looks[k]
    assert families == set(PICTURE_FAMILIES)


def test_picture_questions_ask_no_client_question() -> None:
    from drake.registry import get_benchmark
    from drake.synth.catalog import generate_sample

    spec = get_benchmark("drake-synth")
    tasks = [t for c in spec.clients for t in c.tasks] + list(spec.unseen_tasks)
    prompts = " ".join(generate_sample(t, "train", i, 0)["prompt"] for t in tasks
                       for i in range(5))
    for template in _P.values():
        fixed = template.split("{")[0]
        assert len(fixed) > 10 and fixed not in prompts


def test_picture_questions_use_known_words_only() -> None:
    """Every word of a picture question is in the tiny models' vocabulary (no unknown token)."""
    from drake.models import load_model

    tokenizer = load_model("tiny-llava-qwen").tokenizer
    rng = np.random.default_rng(0)
    for i in range(60):
        sample, _ = picture_question(rng, f"p-{i}",
                                     families=PICTURE_FAMILIES + COMPARE_FAMILIES)
        text = sample["prompt"].replace("<image>", "") + " " + sample["answer"]
        ids = tokenizer(text)["input_ids"]
        assert tokenizer.unk_token_id not in ids, (text, tokenizer.convert_ids_to_tokens(ids))


def test_compare_questions_answer_from_both_pictures() -> None:
    import re

    rng = np.random.default_rng(5)
    seen = set()
    for i in range(200):
        sample, tokens = picture_question(rng, f"c-{i}", families=COMPARE_FAMILIES)
        meta = json.loads(sample["meta"])
        scenes = _scenes(sample)
        a, b = (int(x) - 1 for x in re.findall(r"picture (\d)", sample["prompt"]))
        assert a < b < len(scenes) and meta["picture"] in (a, b)
        assert tokens == [*range(9 * a, 9 * a + 9), *range(9 * b, 9 * b + 9)]
        if meta["family"] == "same_background":
            alike = scenes[a].domain == scenes[b].domain
        else:
            kinds = [s.effects[0][0] if s.effects else "" for s in scenes]
            alike = kinds[a] == kinds[b]
        assert sample["answer"] == ("yes" if alike else "no")
        seen.add((meta["family"], sample["answer"]))
    assert seen == {(f, y) for f in COMPARE_FAMILIES for y in ("yes", "no")}
