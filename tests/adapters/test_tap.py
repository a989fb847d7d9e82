"""TapAdapter on native-format fixtures of TAP's Hub datasets (cached snapshot, HF_HUB_OFFLINE=1):
TAP's Tab. 23 templates, its split rules, FashionMNIST as 64x64 RGB, and the rejections."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from drake.adapters import adapter_class
from drake.adapters.tap import TapAdapter
from drake.errors import BuildError
from drake.registry import get_benchmark
from drake.schema import validate_sample
from drake.specs import TaskSpec


def _task(tid: str, **args) -> TaskSpec:
    task = get_benchmark("tap").task(tid)
    if not args:
        return task
    d = task.to_dict()
    d["source_args"] = {**d["source_args"], **args}
    d["num_images"], d["metrics"] = tuple(d["num_images"]), tuple(d["metrics"])
    return TaskSpec(**d)


def _all(adapter, task, split):
    conv = adapter.convert(task, split)
    assert conv.reconciles()
    samples = [adapter.sample(task, split, r, i) for i, r in enumerate(conv.kept)]
    for s in samples:
        validate_sample(s)
    return conv, samples


def test_kind_is_registered():
    assert adapter_class("hf-tap") is TapAdapter


@pytest.fixture
def mmlu(hub):
    from datasets import ClassLabel, Dataset, Features, List, Value

    feats = Features({"question": Value("string"), "subject": Value("string"),
                      "choices": List(Value("string")),
                      "answer": ClassLabel(names=["A", "B", "C", "D"])})

    def part(cfg, n, bad=False):
        rows = {"question": [f"{cfg} question {k}?" for k in range(n)],
                "subject": [cfg] * n,
                "choices": [["first", "second", "third", "fourth"]] * n,
                "answer": [k % 4 for k in range(n)]}
        if bad:
            rows["choices"][-1] = ["only", "three", "options"]
            rows["answer"][-1] = 3
        return Dataset.from_dict(rows, features=feats)

    configs = {cfg: {"test": part(cfg, 3, bad=cfg == "moral_scenarios"),
                     "validation": part(cfg, 1), "dev": part(cfg, 1)}
               for cfg in ("professional_law", "professional_medicine", "moral_scenarios")}
    configs["anatomy"] = {"test": part("anatomy", 1)}  # the real repo has 57 configs
    hub.publish("cais/mmlu", {}, configs=configs)


def test_mmlu_uses_tap_template_and_splits(hub, mmlu):
    task = _task("mmlu")
    adapter = TapAdapter(hub.options())
    train, samples = _all(adapter, task, "train")  # MMLU's test split trains, as in TAP
    assert train.counts() == {"source_rows": 9, "kept": 8, "dropped": {},
                              "rejected": {"choice-not-found": 1}}
    assert train.rejected[0].source_id == "moral_scenarios-test-2"
    s = samples[1]
    assert s["id"] == "mmlu-professional_law-test-1"
    assert s["prompt"] == (
        "The following is a multiple-choice question about law. Choose the correct answer from "
        "the options below.\n\nQuestion: professional_law question 1?\nOptions:\nA. first\n"
        "B. second\nC. third\nD. fourth")
    assert s["answer"] == "Correct answer on law: B. second"
    assert (s["answer_type"], s["choices"], s["images"], s["label"]) == \
        ("open_ended", [], [], -1)
    meta = json.loads(s["meta"])
    assert meta["short_answer"] == "second" and meta["gold_letter"] == "B"
    assert {json.loads(x["meta"])["subject"] for x in samples} == {"law", "medicine", "ethics"}
    test, _ = _all(adapter, task, "test")
    assert test.source_rows == 3 and {r["split"] for r in test.kept} == {"validation"}


@pytest.fixture
def vqa(hub):
    from datasets import Dataset, Features, Image, Value

    feats = Features({"multiple_choice_answer": Value("string"), "question": Value("string"),
                      "image": Image()})
    n = 8
    answers = ["red", "2", "yes", "", "no", "blue", "cat", "1"]
    images = [{"bytes": hub.jpeg((30 * k, 0, 0)), "path": None} for k in range(n)]
    images[5] = {"bytes": hub.corrupt, "path": None}
    ds = Dataset.from_dict({"multiple_choice_answer": answers,
                            "question": [f"What is {k}?" for k in range(n)], "image": images},
                           features=feats)
    hub.publish("merve/vqav2-small", {"validation": ds})
    return ds


def test_vqav2_split_reproduces_tap_shuffle_and_template(hub, vqa):
    task = _task("vqav2-small", derive_test={"from": "validation", "train_count": 5, "seed": 42})
    adapter = TapAdapter(hub.options())
    train, train_s = _all(adapter, task, "train")
    test, test_s = _all(adapter, task, "test")
    order = vqa.shuffle(seed=42)._indices.column(0).to_pylist()  # TAP: .shuffle(seed=42)
    assert sorted(order[:5]) == sorted([r["row"] for r in train.kept] + [
        int(r.source_id.split("-")[1]) for r in train.rejected])
    assert train.source_rows + test.source_rows == 8
    rejected = {r.source_id: r.reason for r in train.rejected + test.rejected}
    assert rejected == {"validation-3": "empty-answer", "validation-5": "unreadable-image"}
    s = next(x for x in train_s + test_s if x["id"] == "vqav2-small-validation-0")
    assert s["prompt"] == ("<image>\nAnswer the question based on the image.\n\n"
                           "Question: What is 0?")
    assert s["answer"] == "Answer: red" and json.loads(s["meta"])["short_answer"] == "red"
    assert s["images"] == [vqa.cast_column("image", type(vqa.features["image"])(decode=False))
                           [0]["image"]["bytes"]]


def test_commongen_template(hub):
    from datasets import Dataset, Features, List, Value

    feats = Features({"concept_set_idx": Value("int32"), "concepts": List(Value("string")),
                      "target": Value("string")})
    train = Dataset.from_dict({"concept_set_idx": [0, 0, 1],
                               "concepts": [["ski", "mountain", "skier"]] * 2 + [["dog"]],
                               "target": ["A skier skis down the mountain.", "Skiing.", ""]},
                              features=feats)
    hub.publish("allenai/common_gen", {"train": train, "validation": train, "test": train})
    conv, samples = _all(TapAdapter(hub.options()), _task("common-gen"), "train")
    assert [r.reason for r in conv.rejected] == ["empty-answer"]
    assert samples[0]["prompt"] == ("Generate an appropriate description from the concepts "
                                    "below.\n\nConcepts: ski, mountain, skier")
    assert samples[0]["answer"] == "Description: A skier skis down the mountain."
    _, test = _all(TapAdapter(hub.options()), _task("common-gen"), "test")
    assert test[0]["id"] == "common-gen-validation-0"


def test_fashion_mnist_becomes_64x64_rgb_png_deterministically(hub):
    from datasets import ClassLabel, Dataset, Features, Image
    from PIL import Image as PILImage

    names = ["T - shirt / top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
             "Sneaker", "Bag", "Ankle boot"]
    feats = Features({"image": Image(), "label": ClassLabel(names=names)})
    gray = [hub.png(k * 20, (28, 28), mode="L") for k in range(3)]
    ds = Dataset.from_dict({"image": [{"bytes": b, "path": None} for b in gray],
                            "label": [9, 1, 0]}, features=feats)
    hub.publish("zalando-datasets/fashion_mnist", {"train": ds, "test": ds})
    task = _task("fashion-mnist")
    conv, samples = _all(TapAdapter(hub.options()), task, "test")
    s = samples[0]
    assert (s["prompt"], s["answer"], s["label"], s["answer_type"]) == \
        ("<image>", "", -1, "image")
    # [input, target]: the target, stored last, is the input picture (TAP reconstructs it)
    source, target = (PILImage.open(io.BytesIO(b)) for b in s["images"])
    for img in (source, target):
        assert (img.format, img.mode, img.size) == ("PNG", "RGB", (64, 64))
    assert np.array_equal(np.asarray(source), np.asarray(target))
    assert np.asarray(target)[0, 0].tolist() == [0, 0, 0]
    assert json.loads(s["meta"])["class_name"] == "Ankle boot"
    again = TapAdapter(hub.options())
    assert again.sample(task, "test", again.convert(task, "test").kept[0], 0) == s


def test_caltech256_keeps_its_bytes_as_input_and_target(hub):
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"image": Image(), "label": ClassLabel(names=["001.ak47", "002.bat"])})
    pictures = [hub.jpeg((40 * k, 90, 10), (12, 9)) for k in range(2)]
    ds = Dataset.from_dict({"image": [{"bytes": b, "path": None} for b in pictures],
                            "label": [0, 1]}, features=feats)
    hub.publish("ilee0022/Caltech-256", {"train": ds, "test": ds})
    _, samples = _all(TapAdapter(hub.options()), _task("caltech256"), "train")
    assert [s["images"] for s in samples] == [[b, b] for b in pictures]
    assert {(s["prompt"], s["answer"], s["answer_type"]) for s in samples} == \
        {("<image>", "", "image")}


def test_a_reconstruction_declared_as_text_is_refused(hub):
    from datasets import Dataset, Features, Image

    ds = Dataset.from_dict({"image": [{"bytes": hub.png(), "path": None}]},
                           features=Features({"image": Image()}))
    hub.publish("ilee0022/Caltech-256", {"train": ds, "test": ds})
    d = _task("caltech256").to_dict()
    d.update(answer_type="captioning", num_images=(1, 1), metrics=("mse",))
    with pytest.raises(BuildError, match="declare answer_type 'image' \\(not 'captioning'\\)"):
        TapAdapter(hub.options()).convert(TaskSpec(**d), "train")
    with pytest.raises(BuildError, match="remove the 'answer' template"):
        TapAdapter(hub.options()).convert(_task("caltech256", answer="{answer}"), "train")


def test_ag_news_text_classification(hub):
    from datasets import Dataset, Features, Value

    feats = Features({"label": Value("int64"), "title": Value("string"),
                      "description": Value("string")})
    ds = Dataset.from_dict({"label": [2, 4, 1], "title": ["Cup final", "New chip", ""],
                            "description": ["A late goal.", "Faster and cooler.", "x"]},
                           features=feats)
    hub.publish("sh0416/ag_news", {"train": ds, "test": ds})
    conv, samples = _all(TapAdapter(hub.options()), _task("ag-news"), "train")
    assert [(s["prompt"], s["answer"], s["label"], s["images"]) for s in samples] == [
        ("Cup final\nA late goal.", "Sports", 1, []),
        ("New chip\nFaster and cooler.", "Sci/Tech", 3, [])]
    assert [(r.reason, r.source_id) for r in conv.rejected] == [("missing-field", "train-2")]


def test_tiny_imagenet_reads_valid_as_test(hub):
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"image": Image(), "label": ClassLabel(names=["n01443537", "n01629819"])})
    ds = Dataset.from_dict({"image": [{"bytes": hub.jpeg(), "path": None}], "label": [1]},
                           features=feats)
    hub.publish("zh-plus/tiny-imagenet", {"train": ds, "valid": ds})
    _, samples = _all(TapAdapter(hub.options()), _task("tiny-imagenet"), "test")
    assert (samples[0]["id"], samples[0]["answer"], samples[0]["label"]) == \
        ("tiny-imagenet-valid-0", "n01629819", 1)


def test_unknown_format_is_clear(hub):
    with pytest.raises(BuildError, match=r"\['format'\] is 'bogus'; use one of"):
        TapAdapter(hub.options()).convert(_task("mmlu", format="bogus"), "train")


def test_describe_names_configs_and_commit(hub, mmlu):
    task = _task("mmlu")
    adapter = TapAdapter(hub.options())
    origin = adapter.describe(task)
    assert origin["revision"] == hub.sha and origin["format"] == "mmlu"
    assert origin["configs"] == ["professional_law", "professional_medicine", "moral_scenarios"]
