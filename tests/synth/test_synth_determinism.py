"""generate_sample is a function of its arguments alone; gold answers are balanced."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drake.synth import SYNTH_TASKS, generate_sample

TASK_IDS = sorted(SYNTH_TASKS)


def _fingerprint(sample: dict) -> tuple:
    fields = tuple(
        sample[k]
        for k in ("id", "task", "prompt", "answer", "answer_type", "label", "domain", "meta")
    )
    return fields + (tuple(sample["choices"]),) + tuple(im.tobytes() for im in sample["images"])


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_same_arguments_same_sample_any_call_order(task_id):
    a5 = generate_sample(task_id, "train", 5, seed=3)
    a3 = generate_sample(task_id, "train", 3, seed=3)
    b3 = generate_sample(task_id, "train", 3, seed=3)
    b5 = generate_sample(task_id, "train", 5, seed=3)
    assert _fingerprint(a5) == _fingerprint(b5)
    assert _fingerprint(a3) == _fingerprint(b3)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_seed_split_and_index_change_the_sample(task_id):
    base = _fingerprint(generate_sample(task_id, "train", 4, seed=3))
    for other in (
        generate_sample(task_id, "train", 4, seed=4),
        generate_sample(task_id, "test", 4, seed=3),
        generate_sample(task_id, "train", 5, seed=3),
    ):
        assert _fingerprint(other)[7:] != base[7:]  # beyond id/task/.../domain


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    task_id=st.sampled_from(TASK_IDS),
    split=st.sampled_from(["train", "test"]),
    index=st.integers(min_value=0, max_value=10**9),
    seed=st.integers(min_value=0, max_value=2**32),
    size=st.sampled_from([16, 32, 64, 96]),
)
def test_any_index_gives_a_valid_reproducible_sample(task_id, split, index, seed, size):
    s = generate_sample(task_id, split, index, seed, image_size=size)
    task = SYNTH_TASKS[task_id]
    target = 1 if task.answer_type == "image" else 0  # a reconstruction's target: no placeholder
    assert s["prompt"].count("<image>") == len(s["images"]) - target
    assert task.num_images[0] <= len(s["images"]) <= task.num_images[1]
    assert all(im.size == (size, size) and im.mode == "RGB" for im in s["images"])
    if task.answer_type == "multiple_choice":
        assert s["answer"] in s["choices"]
    else:
        assert s["choices"] == []
    assert _fingerprint(s) == _fingerprint(
        generate_sample(task_id, split, index, seed, image_size=size)
    )


def test_image_size_changes_resolution_not_content():
    small = generate_sample("synth-spatial", "train", 9, seed=1, image_size=32)
    large = generate_sample("synth-spatial", "train", 9, seed=1, image_size=128)
    assert small["prompt"] == large["prompt"] and small["answer"] == large["answer"]
    assert small["images"][0].size == (32, 32) and large["images"][0].size == (128, 128)


# ---------------------------------------------------------------------------------------------
# answer balance. The gold answer is drawn before any pixel is drawn, so these tests skip the
# rendering step (a blank image stands in) to count thousands of answers quickly.


@pytest.fixture
def no_render(monkeypatch):
    from PIL import Image

    import drake.synth.catalog as catalog

    monkeypatch.setattr(catalog, "render", lambda scene, size, rng: Image.new("RGB", (size, size)))


BINARY = [
    t.id
    for t in SYNTH_TASKS.values()
    if t.answer_type == "multiple_choice"
    and t.twin_of is not None
    and len(generate_sample(t.id, "train", 0, 0, image_size=16)["choices"]) == 2
]
LETTERS = [
    t.id
    for t in SYNTH_TASKS.values()
    if t.answer_type == "multiple_choice"
    and generate_sample(t.id, "train", 0, 0, image_size=16)["choices"] == ["A", "B", "C", "D"]
]
FOUR_IMAGES = [
    "synth-idiom-image",
    "synth-metaphor-image",
    "synth-odd-relation",
    "synth-step-coherence",
    "synth-step-cloze",
    "synth-near-identical-ood",
]


def _answers(task_id: str, n: int) -> Counter:
    return Counter(
        generate_sample(task_id, "train", i, seed=21, image_size=16)["answer"] for i in range(n)
    )


def test_binary_and_letter_tasks_found():
    assert "synth-spatial" in BINARY and "synth-concept-query" in BINARY
    assert len(BINARY) >= 18
    assert {"synth-motion", "synth-shape-facts", "synth-story-next", "synth-diagram"} <= set(
        LETTERS
    )


@pytest.mark.parametrize("task_id", BINARY)
def test_two_way_answers_are_balanced(task_id, no_render):
    counts = _answers(task_id, 400)
    assert len(counts) == 2
    for answer, k in counts.items():
        assert 0.35 <= k / 400 <= 0.65, (answer, k)


@pytest.mark.parametrize("task_id", LETTERS + FOUR_IMAGES)
def test_gold_letters_are_spread(task_id, no_render):
    counts = _answers(task_id, 400)
    assert len(counts) == 4
    assert min(counts.values()) / 400 >= 0.10, counts


def test_skipping_rendering_keeps_the_answers(monkeypatch):
    from PIL import Image

    import drake.synth.catalog as catalog

    tasks = ("synth-spatial", "synth-motion", "synth-concept-query")
    real = {t: [generate_sample(t, "train", i, 21)["answer"] for i in range(5)] for t in tasks}
    monkeypatch.setattr(catalog, "render", lambda scene, size, rng: Image.new("RGB", (size, size)))
    for task_id in tasks:
        assert [
            catalog.generate_sample(task_id, "train", i, 21)["answer"] for i in range(5)
        ] == real[task_id]


def test_cls_labels_and_domains_are_balanced_by_index():
    from drake.synth import DOMAINS, SYNTH_CLS_CLASSES

    n = len(SYNTH_CLS_CLASSES)
    for index in (0, 1, n - 1, n, 5 * n + 7, 6 * n + 2):
        s = generate_sample("synth-cls", "test", index, seed=0, image_size=16)
        assert s["label"] == index % n
        assert s["answer"] == SYNTH_CLS_CLASSES[index % n]
        assert s["domain"] == DOMAINS[(index // n) % len(DOMAINS)]
