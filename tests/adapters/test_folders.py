"""Folder adapters on native layouts written by the tests: FedBN's office_caltech_10 folder and
CoOp's UCF-101-midframes folder with its split_zhou_UCF101.json."""

from __future__ import annotations

import json

import pytest

from drake.adapters import adapter_class
from drake.adapters.base import AdapterOptions
from drake.adapters.folders import FedBNFolderAdapter, ImageFolderAdapter
from drake.catalog.others import OFFICE_CLASSES, OFFICE_DOMAINS
from drake.errors import BuildError
from drake.registry import get_benchmark
from drake.schema import validate_sample
from drake.specs import TaskSpec


def _with_args(task: TaskSpec, **args) -> TaskSpec:
    d = task.to_dict()
    d["source_args"] = {**d["source_args"], **args}
    d["num_images"], d["metrics"] = tuple(d["num_images"]), tuple(d["metrics"])
    return TaskSpec(**d)


def _all(adapter, task, split):
    conv = adapter.convert(task, split)
    samples = [adapter.sample(task, split, r, i) for i, r in enumerate(conv.kept)]
    for s in samples:
        validate_sample(s)
    return conv, samples


@pytest.fixture
def office(tmp_path, hub):
    """data/office_caltech_10/<domain>/<class>/*.jpg, 5 images for two classes per domain."""
    root = tmp_path / "data" / "office_caltech_10"
    for d, domain in enumerate(OFFICE_DOMAINS):
        for c, cls in enumerate(OFFICE_CLASSES):
            folder = root / domain / cls
            folder.mkdir(parents=True)
            if cls in ("back_pack", "mug"):
                for k in range(5):
                    (folder / f"frame_{k:04d}.jpg").write_bytes(
                        hub.jpeg((40 * d, 20 * c, 10 * k)))
        (root / domain / "back_pack" / "notes.txt").write_text("not an image")
    (root / "amazon" / "mug" / "frame_0002.jpg").write_bytes(hub.corrupt)
    (root / "webcam" / "tripod").mkdir()
    (root / "webcam" / "tripod" / "t.jpg").write_bytes(hub.jpeg())
    return tmp_path / "data"


def test_kinds_are_registered():
    assert adapter_class("fedbn-folder") is FedBNFolderAdapter
    assert adapter_class("local-image-folder") is ImageFolderAdapter


def test_office_caltech10_converts_with_a_seeded_stratified_split(office):
    task = get_benchmark("office-caltech10").tasks[0]
    adapter = FedBNFolderAdapter(AdapterOptions(source_dir=office))
    train, train_s = _all(adapter, task, "train")
    test, test_s = _all(adapter, task, "test")
    assert train.reconciles() and test.reconciles()
    assert train.source_rows + test.source_rows == 4 * 2 * 5 + 1
    # 1 of every 5 images per (domain, class) is test; the single tripod image stays in train
    assert test.source_rows == 8 and train.dropped == {"class-not-in-subset": 1}
    bad = train.rejected + test.rejected
    assert [r.reason for r in bad] == ["unreadable-image"]
    assert bad[0].source_id == "amazon/mug/frame_0002.jpg" and bad[0].where.endswith(".jpg")
    s = train_s[0]
    assert s["id"] == "office-caltech10-amazon-back_pack-frame_0000"
    assert (s["prompt"], s["answer"], s["label"], s["domain"], s["choices"]) == \
        ("<image>", "back pack", 0, "amazon", [])
    assert s["images"] == [(office / "office_caltech_10" / "amazon/back_pack/frame_0000.jpg")
                           .read_bytes()]
    assert json.loads(s["meta"])["text"] == "a photo of a back pack."
    assert {x["domain"] for x in test_s} == set(OFFICE_DOMAINS)
    assert {x["answer"] for x in test_s} == {"back pack", "mug"}
    assert adapter.class_names(task)[5] == "laptop computer"
    other = FedBNFolderAdapter(AdapterOptions(source_dir=office / "office_caltech_10"))
    assert other.convert(task, "test").kept == test.kept  # same seed, same records


def test_office_missing_folder_says_where_to_get_it(tmp_path):
    task = get_benchmark("office-caltech10").tasks[0]
    with pytest.raises(BuildError, match="--source-dir.*github.com/med-air/FedBN"):
        FedBNFolderAdapter(AdapterOptions()).convert(task, "train")
    (tmp_path / "amazon").mkdir()
    with pytest.raises(BuildError, match=r"missing \['caltech', 'dslr', 'webcam'\].*FedBN"):
        FedBNFolderAdapter(AdapterOptions(source_dir=tmp_path)).convert(task, "train")


@pytest.fixture
def ucf(tmp_path, hub):
    base = tmp_path / "ucf101"
    frames = base / "UCF-101-midframes"
    classes = ["Apply_Eye_Makeup", "Archery", "Baby_Crawling"]
    items = []
    for label, cls in enumerate(classes):
        (frames / cls).mkdir(parents=True)
        for k in range(4):
            rel = f"{cls}/v_{cls.replace('_', '')}_g0{k}_c01.jpg"
            (frames / rel).write_bytes(hub.jpeg((60 * label, 10 * k, 0)))
            items.append([rel, label, cls])
    split = {"train": items[0:2] + items[4:6] + items[8:10], "val": items[2:3],
             "test": [items[3], items[7], items[11], ["Archery/v_gone.jpg", 1, "Archery"]]}
    (base / "split_zhou_UCF101.json").write_text(json.dumps(split))
    return base


def _ucf_task():
    return _with_args(get_benchmark("clip-base2novel/ucf101").tasks[0], num_classes=3)


def test_ucf101_follows_coop_split_file(ucf):
    task = _ucf_task()
    adapter = ImageFolderAdapter(AdapterOptions(source_dir=ucf))
    train, train_s = _all(adapter, task, "train")
    test, test_s = _all(adapter, task, "test")
    assert train.counts() == {"source_rows": 6, "kept": 6, "dropped": {}, "rejected": {}}
    assert test.reconciles() and test.counts()["kept"] == 3
    assert [(r.reason, r.detail) for r in test.rejected] == [("unreadable-image",
                                                              "file not found")]
    s = test_s[0]
    assert (s["answer"], s["label"], s["prompt"]) == ("Apply Eye Makeup", 0, "<image>")
    assert json.loads(s["meta"])["text"] == "a photo of a Apply Eye Makeup."
    assert s["images"] == [(ucf / "UCF-101-midframes" / test.kept[0]["path"]).read_bytes()]
    assert adapter.class_names(task) == ["Apply Eye Makeup", "Archery", "Baby Crawling"]


def test_ucf101_without_split_file_uses_a_seeded_stratified_split(ucf):
    (ucf / "split_zhou_UCF101.json").unlink()
    task = _ucf_task()
    adapter = ImageFolderAdapter(AdapterOptions(source_dir=ucf / "UCF-101-midframes"))
    train, test = adapter.convert(task, "train"), adapter.convert(task, "test")
    assert train.source_rows + test.source_rows == 12
    # floor(0.3 * 4 + 0.5) = 1 test image per class
    assert sorted(r["label"] for r in test.kept) == [0, 1, 2]
    assert not {r["path"] for r in train.kept} & {r["path"] for r in test.kept}
    assert ImageFolderAdapter(AdapterOptions(source_dir=ucf)).convert(task, "test").kept \
        == test.kept


def test_ucf101_bad_split_file_and_class_count_are_clear(ucf):
    (ucf / "split_zhou_UCF101.json").write_text('{"train": [["a.jpg", "x", "A"]], "test": []}')
    with pytest.raises(BuildError, match=r"train\[0\].*\[impath, label, classname\]"):
        ImageFolderAdapter(AdapterOptions(source_dir=ucf)).convert(_ucf_task(), "train")
    (ucf / "split_zhou_UCF101.json").unlink()
    task = get_benchmark("clip-base2novel/ucf101").tasks[0]  # declares 101 classes
    with pytest.raises(BuildError, match="num_classes=101 but the folder has 3"):
        ImageFolderAdapter(AdapterOptions(source_dir=ucf)).convert(task, "train")


def test_describe_has_layout_rule_and_classes_but_no_local_path(office):
    task = get_benchmark("office-caltech10").tasks[0]
    adapter = FedBNFolderAdapter(AdapterOptions(source_dir=office))
    adapter.prefetch([task])
    origin = adapter.describe(task)
    assert origin["from"] == "source-dir" and "office_caltech_10" in origin["layout"]
    assert origin["classes"][0] == "back pack" and "stratified" in origin["split_rule"]
    assert str(office) not in json.dumps(origin)
