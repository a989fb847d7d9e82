"""The drake-synth task table: twins of the released DRAKE clients, groups, unseen tasks, API."""

from __future__ import annotations

import pytest

from drake.errors import UnknownNameError
from drake.synth import (
    DOMAINS,
    GROUPS,
    HELD_OUT_DOMAINS,
    SYNTH_CLS_CLASSES,
    SYNTH_TASKS,
    Knobs,
    default_knobs,
    generate_sample,
    stable_task_hash,
)

# Released DRAKE_hetero_llava_llama_1B_3B client order: client k holds tasks 4k..4k+3.
REAL_CLIENT_TASKS = (
    "Fashion200K-0",
    "MagicBrush-0",
    "VISION-0",
    "FashionIQ-0",
    "VSR-0",
    "VISION-1",
    "Fashion200K-2",
    "NLVR2-0",
    "SEED-Bench-2-2",
    "Fashion200K-1",
    "NLVR2-1",
    "CIRR-0",
    "VizWiz-0",
    "IRFL-2",
    "Bongard-HOI-1",
    "MIT-States-0",
    "IRFL-1",
    "Bongard-OpenWorld-1",
    "COMICS_Dialogue-0",
    "IRFL-0",
    "Bongard-HOI-2",
    "Bongard-OpenWorld-0",
    "IRFL-3",
    "Bongard-HOI-0",
    "WCVQA-0",
    "iconqa-2",
    "Co-Instruct-DB-2",
    "SEED-Bench-2-1",
    "TQA-0",
    "WCVQA-3",
    "iconqa-1",
    "Co-Instruct-DB-1",
    "Co-Instruct-DB-0",
    "dvqa-0",
    "WCVQA-1",
    "iconqa-3",
    "iconqa-0",
    "Co-Instruct-DB-3",
    "SEED-Bench-2-0",
    "WCVQA-2",
)
UNSEEN_TASK_TYPE = (
    "RecipeQA_ImageCoherence-0",
    "RecipeQA_VisualCloze-0",
    "Mantis_contrastive_caption-1",
    "HQ_Edit-0",
)
UNSEEN_DOMAIN = ("DreamSim-0", "Mantis_contrastive_caption-0", "imagecode-0")
OPEN_ENDED_REAL = {"iconqa-2", "iconqa-3"}


def _subgroup(client: int) -> str:
    return "relation" if client <= 2 else "reasoning" if client <= 5 else "vqa"


def _by_twin():
    """DRAKE's twins (tap-synth's twins of TAP's datasets have tests of their own)."""
    return {t.twin_of: t for t in SYNTH_TASKS.values()
            if t.twin_of is not None and t.group != "tap"}


def test_every_client_task_has_exactly_one_twin_in_its_subgroup():
    by_twin = _by_twin()
    twins = [t for t in SYNTH_TASKS.values() if t.group in ("relation", "reasoning", "vqa")]
    assert len(twins) == 40
    assert len({t.twin_of for t in twins}) == 40
    for position, real in enumerate(REAL_CLIENT_TASKS):
        assert real in by_twin, f"no twin for {real}"
        assert by_twin[real].group == _subgroup(position // 4), real


def test_the_client_twins_are_listed_in_released_client_order():
    order = [t.twin_of for t in SYNTH_TASKS.values() if t.group in ("relation", "reasoning", "vqa")]
    assert tuple(order) == REAL_CLIENT_TASKS


def test_unseen_twins():
    by_twin = _by_twin()
    for real in UNSEEN_TASK_TYPE:
        assert by_twin[real].group == "unseen-task"
    for real in UNSEEN_DOMAIN:
        task = by_twin[real]
        assert task.group == "unseen-domain"
        assert set(task.domains) <= set(HELD_OUT_DOMAINS)
    assert len(by_twin) == 47


def test_answer_types_and_metrics_follow_the_real_tasks():
    for real, task in _by_twin().items():
        if real in OPEN_ENDED_REAL:
            assert (task.answer_type, task.metric) == ("open_ended", "token_f1")
        else:
            assert (task.answer_type, task.metric) == ("multiple_choice", "accuracy")
    assert SYNTH_TASKS["synth-cls"].answer_type == "classification"
    assert (SYNTH_TASKS["synth-caption"].answer_type, SYNTH_TASKS["synth-caption"].metric) == (
        "captioning",
        "caption",
    )
    assert {t.group for t in SYNTH_TASKS.values() if t.twin_of is None} == {
        "public",
        "cls",
        "caption",
    }


def test_task_fields_are_well_formed():
    assert set(GROUPS) == {t.group for t in SYNTH_TASKS.values()}
    for task_id, task in SYNTH_TASKS.items():
        assert task.id == task_id
        prefix = "tap-synth-" if task.group == "tap" else "synth-"
        assert task_id.startswith(prefix) and "/" not in task_id and task_id == task_id.lower()
        lo, hi = task.num_images
        assert (0 if task.group == "tap" else 1) <= lo <= hi <= 8  # TAP has text-only tasks
        assert task.description and "\n" not in task.description
        assert task.domains and set(task.domains) <= set(DOMAINS) | set(HELD_OUT_DOMAINS)
        assert isinstance(default_knobs(task_id), Knobs)
    assert not set(DOMAINS) & set(HELD_OUT_DOMAINS)
    assert {"plain", "noise", "stripes", "gradient", "sketch", "texture"} <= set(DOMAINS)


def test_single_and_multi_image_twins_exist():
    images = {t.num_images for t in SYNTH_TASKS.values() if t.twin_of}
    assert (1, 1) in images
    assert any(lo >= 2 for lo, _ in images)
    assert any(hi > lo for lo, hi in images)


def test_cls_classes_are_sorted_combinations():
    assert len(SYNTH_CLS_CLASSES) == 8 * 8 * 3 >= 100
    assert list(SYNTH_CLS_CLASSES) == sorted(SYNTH_CLS_CLASSES)
    assert len(set(SYNTH_CLS_CLASSES)) == len(SYNTH_CLS_CLASSES)
    assert "red striped star" in SYNTH_CLS_CLASSES


def test_stable_task_hash_is_crc32():
    # zlib.crc32(b"synth-spatial"), fixed across processes and Python versions
    import zlib

    assert stable_task_hash("synth-spatial") == zlib.crc32(b"synth-spatial")
    assert stable_task_hash("synth-spatial") != stable_task_hash("synth-motion")


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"task_id": "synth-nope"}, UnknownNameError, "synth-nope"),
        ({"split": "validation"}, ValueError, "validation"),
        ({"split": "public"}, ValueError, "public"),
        ({"index": -1}, ValueError, "index"),
        ({"seed": -3}, ValueError, "seed"),
        ({"image_size": 8}, ValueError, "image_size"),
        ({"knobs": {"closeness": 0.5}}, TypeError, "Knobs"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, needle):
    args = {"task_id": "synth-spatial", "split": "train", "index": 0, "seed": 0, **kwargs}
    with pytest.raises(error, match=needle):
        generate_sample(**args)


def test_public_tasks_accept_the_public_split():
    public = [t for t in SYNTH_TASKS.values() if t.group == "public"]
    assert public
    for task in public:
        sample = generate_sample(task.id, "public", 3, seed=0)
        assert sample["id"] == f"{task.id}-public-000003"


@pytest.mark.parametrize(
    "kwargs",
    [{"closeness": 1.5}, {"degradation": -0.1}, {"objects": (3, 2)}, {"objects": (1, 12)}],
)
def test_knobs_validate(kwargs):
    with pytest.raises(ValueError, match="Knobs"):
        Knobs(**kwargs)
