"""HubClassificationAdapter on native-format fixtures: a cached Hub snapshot of parquet shards with
the real repos' column names, ClassLabel features and image encodings, read with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import json
import time

import pytest

from drake.adapters import adapter_class
from drake.adapters.classification import HubClassificationAdapter
from drake.errors import BuildError, NetworkUnavailable
from drake.registry import get_benchmark
from drake.schema import validate_sample
from drake.specs import TaskSpec

CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck"]


def _task(benchmark: str) -> TaskSpec:
    return get_benchmark(benchmark).tasks[0]


def _with(task: TaskSpec, **changes) -> TaskSpec:
    d = task.to_dict()
    d.update(changes)
    d["num_images"], d["metrics"] = tuple(d["num_images"]), tuple(d["metrics"])
    return TaskSpec(**d)


def _samples(adapter, task, split):
    conv = adapter.convert(task, split)
    out = [adapter.sample(task, split, r, i) for i, r in enumerate(conv.kept)]
    for s in out:
        validate_sample(s)
    return conv, out


@pytest.fixture
def cifar10(hub):
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"img": Image(), "label": ClassLabel(names=CIFAR10)})
    img = [hub.png((i * 20, 0, 0), (32, 32)) for i in range(5)]
    train = Dataset.from_dict({"img": [{"bytes": b, "path": None} for b in img[:3]]
                               + [{"bytes": hub.corrupt, "path": None}, None],
                               "label": [3, 0, 9, 1, 2]}, features=feats)
    test = Dataset.from_dict({"img": [{"bytes": b, "path": None} for b in img[3:]],
                              "label": [5, None]}, features=feats)
    hub.publish("uoft-cs/cifar10", {"train": train, "test": test}, config="plain_text",
                data_dir="plain_text")
    return img


def test_kind_is_registered():
    assert adapter_class("hf-classification") is HubClassificationAdapter


def test_cifar10_converts_to_exact_samples(hub, cifar10):
    task = _task("cifar10-dir")
    adapter = HubClassificationAdapter(hub.options())
    conv, samples = _samples(adapter, task, "train")
    assert conv.reconciles() and conv.counts() == {
        "source_rows": 5, "kept": 3, "dropped": {},
        "rejected": {"missing-field": 1, "unreadable-image": 1}}
    bad = {r.source_id: r for r in conv.rejected}
    assert bad["train-3"].reason == "unreadable-image" and "uoft-cs/cifar10" in bad["train-3"].where
    assert bad["train-4"].reason == "missing-field" and "'img'" in bad["train-4"].detail
    first = samples[0]
    assert first["id"] == "cifar10-train-0" and first["task"] == "cifar10"
    assert first["prompt"] == "<image>" and first["answer"] == "cat" and first["label"] == 3
    assert first["choices"] == [] and first["answer_type"] == "classification"
    assert first["images"] == [cifar10[0]]  # the source PNG bytes, untouched
    meta = json.loads(first["meta"])
    assert meta["text"] == "a photo of a cat." and meta["source_split"] == "train"
    assert [s["answer"] for s in samples] == ["cat", "airplane", "truck"]
    assert adapter.class_names(task) == CIFAR10
    conv, samples = _samples(adapter, task, "test")
    assert conv.counts()["kept"] == 1 and samples[0]["answer"] == "dog"
    assert [r.reason for r in conv.rejected] == ["missing-field"]


def test_same_seed_same_records_and_bytes(hub, cifar10):
    task = _task("cifar10-dir")
    a, b = HubClassificationAdapter(hub.options()), HubClassificationAdapter(hub.options())
    ca, cb = a.convert(task, "train"), b.convert(task, "train")
    assert ca.kept == cb.kept
    assert [a.sample(task, "train", r, i) for i, r in enumerate(ca.kept)] == \
        [b.sample(task, "train", r, i) for i, r in enumerate(cb.kept)]


def test_cap_drops_a_seeded_subset(hub, cifar10):
    task = _with(_task("cifar10-dir"), caps={"train": 2})
    conv = HubClassificationAdapter(hub.options(seed=3)).convert(task, "train")
    again = HubClassificationAdapter(hub.options(seed=3)).convert(task, "train")
    assert conv.reconciles() and conv.dropped == {"cap": 1} and len(conv.kept) == 2
    assert conv.kept == again.kept
    assert [r["row"] for r in conv.kept] == sorted(r["row"] for r in conv.kept)


def test_cifar100_fine_label_and_coarse_meta(hub):
    from datasets import ClassLabel, Dataset, Features, Image

    fine = [f"fine{i}" for i in range(100)]
    fine[4] = "beaver"
    feats = Features({"img": Image(), "fine_label": ClassLabel(names=fine),
                      "coarse_label": ClassLabel(names=[f"c{i}" for i in range(19)]
                                                 + ["aquatic_mammals"])})
    rows = {"img": [{"bytes": hub.png(), "path": None}], "fine_label": [4],
            "coarse_label": [19]}
    ds = Dataset.from_dict(rows, features=feats)
    hub.publish("uoft-cs/cifar100", {"train": ds, "test": ds})
    task = _task("cifar100-dir")
    conv, samples = _samples(HubClassificationAdapter(hub.options()), task, "test")
    meta = json.loads(samples[0]["meta"])
    assert samples[0]["answer"] == "beaver" and samples[0]["label"] == 4
    assert meta["coarse_label"] == 19 and meta["coarse_name"] == "aquatic_mammals"


def _domainnet_names():
    return sorted(["airplane", "bird", "feather", "headphones", "ice_cream", "teapot", "tiger",
                   "whale", "windmill", "wine_glass", "zebra", "zigzag"])


def test_domainnet_keeps_six_domains_by_ten_classes(hub):
    from datasets import ClassLabel, Dataset, Features, Image, Value

    names = _domainnet_names()
    feats = Features({"image": Image(), "label": ClassLabel(names=names),
                      "domain": Value("string")})
    jpg = hub.jpeg()
    rows = [("ice_cream", "clipart"), ("airplane", "real"), ("zebra", "sketch"),
            ("bird", "photo"), ("bird", "quickdraw")]
    ds = Dataset.from_dict({"image": [{"bytes": jpg, "path": None}] * len(rows),
                            "label": [names.index(c) for c, _ in rows],
                            "domain": [d for _, d in rows]}, features=feats)
    hub.publish("wltjr1007/DomainNet", {"train": ds, "test": ds})
    task = _task("domainnet")
    adapter = HubClassificationAdapter(hub.options())
    conv, samples = _samples(adapter, task, "train")
    assert conv.reconciles() and conv.counts() == {
        "source_rows": 5, "kept": 3,
        "dropped": {"class-not-in-subset": 1, "domain-not-in-subset": 1}, "rejected": {}}
    assert [(s["answer"], s["label"], s["domain"]) for s in samples] == [
        ("ice cream", 3, "clipart"), ("zebra", 9, "sketch"), ("bird", 0, "quickdraw")]
    assert samples[0]["images"] == [jpg]  # JPEG stays JPEG
    assert json.loads(samples[0]["meta"])["source_class"] == "ice_cream"
    assert adapter.class_names(task)[3] == "ice cream"


def test_domainnet_domain_from_image_path_when_no_domain_column(hub):
    from datasets import ClassLabel, Dataset, Features, Image

    names = _domainnet_names()
    feats = Features({"image": Image(), "label": ClassLabel(names=names)})
    paths = ["painting/tiger/painting_1.jpg", "infograph/whale/i_2.jpg", "tiger_3.jpg"]
    ds = Dataset.from_dict({"image": [{"bytes": hub.jpeg(), "path": p} for p in paths],
                            "label": [names.index("tiger"), names.index("whale"),
                                      names.index("tiger")]}, features=feats)
    hub.publish("wltjr1007/DomainNet", {"train": ds, "test": ds})
    conv, samples = _samples(HubClassificationAdapter(hub.options()), _task("domainnet"),
                             "test")
    assert [s["domain"] for s in samples] == ["painting", "infograph"]
    assert conv.reconciles() and [r.reason for r in conv.rejected] == ["missing-field"]


def test_food101_reads_validation_as_test_and_pets_lowercase(hub):
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"image": Image(), "label": ClassLabel(
        names=["apple_pie"] + [f"food_{i}" for i in range(100)])})
    one = Dataset.from_dict({"image": [{"bytes": hub.jpeg(), "path": None}], "label": [0]},
                            features=feats)
    hub.publish("ethz/food101", {"train": one, "validation": one})
    task = _task("clip-base2novel/food101")
    conv, samples = _samples(HubClassificationAdapter(hub.options()), task, "test")
    assert samples[0]["id"] == "food101-validation-0" and samples[0]["answer"] == "apple pie"
    # pFedMMA's prompt for every dataset; CoOp's per-dataset template is kept in the spec
    assert json.loads(samples[0]["meta"])["text"] == "a photo of a apple pie."
    assert task.source_args["coop_template"] == "a photo of {}, a type of food."

    pets = Features({"image": Image(), "label": ClassLabel(
        names=["Abyssinian"] + [f"breed_{i}" for i in range(36)])})
    hub.publish("timm/oxford-iiit-pet", {s: Dataset.from_dict(
        {"image": [{"bytes": hub.jpeg(), "path": None}], "label": [0]}, features=pets)
        for s in ("train", "test")})
    _, samples = _samples(HubClassificationAdapter(hub.options()),
                          _task("clip-base2novel/oxford_pets"), "train")
    assert json.loads(samples[0]["meta"])["text"] == "a photo of a abyssinian."


def test_caltech101_seeded_stratified_split_excludes_and_renames(hub):
    from datasets import ClassLabel, Dataset, Features, Image

    names = ["accordion", "airplanes", "background_google", "faces", "faces_easy"] + \
        [f"class_{i:02d}" for i in range(97)]
    feats = Features({"image": Image(), "label": ClassLabel(names=names)})
    labels = [1] * 10 + [3] * 10 + [2] * 3 + [4] * 2 + [0] * 5
    ds = Dataset.from_dict({"image": [{"bytes": hub.png((i, i, i)), "path": None}
                                      for i in range(len(labels))], "label": labels},
                           features=feats)
    hub.publish("flwrlabs/caltech101", {"train": ds})
    task = _task("clip-base2novel/caltech101")
    adapter = HubClassificationAdapter(hub.options())
    train, train_s = _samples(adapter, task, "train")
    test, test_s = _samples(adapter, task, "test")
    assert train.reconciles() and test.reconciles()
    assert train.source_rows + test.source_rows == len(labels)
    assert train.dropped["excluded-class"] + test.dropped["excluded-class"] == 5
    rows_train = {r["row"] for r in train.kept}
    rows_test = {r["row"] for r in test.kept}
    assert not rows_train & rows_test
    # 30% of each kept class goes to test: 3 of 10 airplanes, 3 of 10 faces, 2 of 5 accordions
    assert sorted(s["answer"] for s in test_s).count("airplane") == 3
    assert sorted(s["answer"] for s in test_s).count("face") == 3
    assert sorted(s["answer"] for s in test_s).count("accordion") == 2
    again = HubClassificationAdapter(hub.options(seed=99)).convert(task, "test")
    assert again.kept == test.kept  # the rule's own seed, not the build seed


def test_declared_class_count_must_match(hub, cifar10):
    task = _with(_task("cifar10-dir"), source_args={**_task("cifar10-dir").source_args,
                                                     "num_classes": 11})
    with pytest.raises(BuildError, match="num_classes=11.*drake/catalog/others.py"):
        HubClassificationAdapter(hub.options()).convert(task, "train")


def test_unknown_column_and_missing_split_are_clear(hub, cifar10):
    base = _task("cifar10-dir")
    task = _with(base, source_args={**base.source_args, "image_column": "picture"})
    with pytest.raises(BuildError, match="'picture'.*\\['img', 'label'\\]"):
        HubClassificationAdapter(hub.options()).convert(task, "train")
    task = _with(base, source_args={**base.source_args, "splits": {"test": "valid"}})
    with pytest.raises(BuildError, match="no split 'valid'.*\\['test', 'train'\\]"):
        HubClassificationAdapter(hub.options()).convert(task, "test")


def test_offline_without_cache_fails_fast_with_the_alternatives(hub):
    start = time.monotonic()
    with pytest.raises(NetworkUnavailable, match="not in the Hugging Face cache.*HF_HUB_OFFLINE is set.*drake-synth"):
        HubClassificationAdapter(hub.options()).convert(_task("clip-base2novel/dtd"), "train")
    assert time.monotonic() - start < 10


def test_describe_names_the_commit_and_classes(hub, cifar10):
    task = _task("cifar10-dir")
    adapter = HubClassificationAdapter(hub.options())
    adapter.prefetch([task])
    origin = adapter.describe(task)
    assert origin["repo"] == "uoft-cs/cifar10" and origin["revision"] == hub.sha
    assert origin["classes"] == CIFAR10 and origin["split_rule"] == "official"


def test_builds_and_verifies_through_drake_build(hub, cifar10, tmp_path):
    from dataclasses import replace

    from datasets import load_dataset

    from drake.build import build
    from drake.verify import verify

    spec = replace(get_benchmark("cifar10-dir"), scenarios=())
    out = build(spec, tmp_path / "out", cache_dir=hub.cache)
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["sources"]["cifar10"]["splits"]["train"]
    assert counts == {"source_rows": 5, "kept": 3, "dropped": {},
                      "rejected": {"missing-field": 1, "unreadable-image": 1}}
    assert manifest["sources"]["cifar10"]["origin"]["classes"] == CIFAR10
    assert not verify(out).problems
    rows = load_dataset(str(out), "cifar10", split="train")
    assert rows[0]["answer"] == "cat" and rows[0]["label"] == 3
