"""llava-tar adapter: DRAKE-style tars (written here, in the released layout) to schema samples."""

import io
import json
import tarfile
from dataclasses import replace

import pytest
from PIL import Image

from drake.adapters import AdapterOptions, adapter_class
from drake.adapters.llava_tar import LlavaTarAdapter, image_candidates
from drake.errors import BuildError, NetworkUnavailable
from drake.registry import get_benchmark
from drake.schema import validate_sample

DRAKE = get_benchmark("drake")
TF = "For a given image and phrase, decide whether the image depicts the phrase."
PICK = "Which image shows the idiom? You must choose your answer from the Choice List."


def png(colour):
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


def write_tar(path, members, mode="w"):
    with tarfile.open(path, mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def rec(sid, images, human, gpt):
    return {"id": sid, "image": images,
            "conversations": [{"from": "human", "value": human}, {"from": "gpt", "value": gpt}]}


def tf_prompt(phrase):
    return f"{TF}\n<image>\nPhrase: {phrase}\nChoice list:[True, False]. Your answer is:"


PICK_PROMPT = (f"{PICK}\nImage A: <image>, Image B: <image>, Image C: <image>, Image D: <image>"
               f"\nChoice list:[Image A, Image B, Image C, Image D]. Your answer is: ")
IMG = [f"dataset/IRFL/images/{k}.png" for k in range(6)]

# IRFL-0: one image, True/False; IRFL-1: four images, Image A-D. Rows marked BAD are planted.
TRAIN0 = [
    rec("t0", [IMG[0]], tf_prompt("spill the beans"), "True"),
    rec("t1", [IMG[1]], tf_prompt("under the weather"), "False"),
    rec("t2", ["dataset/IRFL/images/broken.jpg"], tf_prompt("break a leg"), "True"),  # BAD
    rec("t3", [IMG[2]], tf_prompt("cold feet"), "Maybe"),  # BAD: not a choice
    rec("t1", [IMG[3]], tf_prompt("hot potato"), "True"),  # a repeated id: kept as t1~2
    {"id": "t4", "image": [IMG[4]]},  # BAD: no conversations
    rec("t5", [IMG[5]], tf_prompt("piece of cake"), " "),  # BAD: empty answer
    rec("t6", ["dataset/IRFL/images/absent.png"], tf_prompt("in hot water"), "False"),  # BAD
    rec("t7", [IMG[4]], tf_prompt("on cloud nine"), "false"),  # case only: kept as 'False'
]
TEST0 = [rec("s0", [IMG[5]], tf_prompt("a blessing in disguise"), "False")]
TRAIN1 = [
    rec("m0", IMG[:4], PICK_PROMPT, "Image C"),
    rec("m1", IMG[1:5], PICK_PROMPT.replace("Image D: <image>", "Image D:"), "Image A"),  # BAD
    rec("m2", IMG[2:6], PICK_PROMPT, "Image D"),
]
TEST1 = [rec("n0", IMG[:4], PICK_PROMPT, "Image B")]


def irfl_members():
    members = {f"IRFL/images/{k}.png": png((40 * k, 0, 0)) for k in range(6)}
    members["IRFL/images/broken.jpg"] = b"\xff\xd8\xff\xe0 not really a jpeg"
    for split, subset, rows in (("train", 0, TRAIN0), ("test", 0, TEST0),
                                ("train", 1, TRAIN1), ("test", 1, TEST1)):
        members[f"IRFL/{split}/dataset-{subset}.json"] = json.dumps(rows).encode()
    return members


@pytest.fixture
def irfl_dir(tmp_path):
    write_tar(tmp_path / "IRFL.tar", irfl_members())
    return tmp_path


def adapter(source_dir=None, **kw):
    return LlavaTarAdapter(AdapterOptions(source_dir=source_dir, **kw))


def samples(ad, task, split):
    conv = ad.convert(task, split)
    return conv, [ad.sample(task, split, r, i) for i, r in enumerate(conv.kept)]


def test_registered_for_its_kind():
    assert adapter_class("llava-tar") is LlavaTarAdapter


def test_single_image_subset_converts_to_exactly_the_expected_samples(irfl_dir):
    ad, task = adapter(irfl_dir), DRAKE.task("IRFL-0")
    conv, got = samples(ad, task, "train")
    assert [s["id"] for s in got] == ["IRFL-0-train-t0", "IRFL-0-train-t1",
                                      "IRFL-0-train-t1~2", "IRFL-0-train-t7"]
    assert [s["prompt"] for s in got] == [tf_prompt("spill the beans"),
                                          tf_prompt("under the weather"),
                                          tf_prompt("hot potato"),
                                          tf_prompt("on cloud nine")]
    assert [s["answer"] for s in got] == ["True", "False", "True", "False"]
    assert all(s["choices"] == ["True", "False"] for s in got)
    assert all(len(s["images"]) == 1 and s["answer_type"] == "multiple_choice" for s in got)
    assert got[0]["images"][0]["bytes"] == png((0, 0, 0))  # original bytes, not re-encoded
    meta = json.loads(got[3]["meta"])
    assert meta["source_id"] == "t7" and meta["answer_as_released"] == "false"
    assert json.loads(got[2]["meta"])["source_id"] == "t1"
    assert meta["source_file"] == "IRFL.tar:IRFL/train/dataset-0.json"
    for s in got:
        validate_sample(s)
    conv_t, test = samples(ad, task, "test")
    assert [(s["id"], s["answer"], len(s["images"])) for s in test] == [("IRFL-0-test-s0",
                                                                         "False", 1)]
    assert conv.reconciles() and conv_t.reconciles()


def test_multi_image_subset_converts_to_exactly_the_expected_samples(irfl_dir):
    ad, task = adapter(irfl_dir), DRAKE.task("IRFL-1")
    conv, got = samples(ad, task, "train")
    assert [(s["id"], s["answer"], len(s["images"])) for s in got] == [
        ("IRFL-1-train-m0", "Image C", 4), ("IRFL-1-train-m2", "Image D", 4)]
    assert got[0]["choices"] == ["Image A", "Image B", "Image C", "Image D"]
    assert got[0]["prompt"] == PICK_PROMPT and got[0]["prompt"].count("<image>") == 4
    assert [im["path"] for im in got[1]["images"]] == IMG[2:6]
    _, test = samples(ad, task, "test")
    assert [(s["id"], s["answer"]) for s in test] == [("IRFL-1-test-n0", "Image B")]


def test_every_planted_problem_is_rejected_with_its_reason(irfl_dir):
    conv = adapter(irfl_dir).convert(DRAKE.task("IRFL-0"), "train")
    got = [(r.source_id, r.reason) for r in conv.rejected]
    assert got == [("t2", "unreadable-image"), ("t3", "choice-not-found"),
                   ("t4", "missing-field"), ("t5", "empty-answer"), ("t6", "unreadable-image")]
    assert all(r.where == "IRFL.tar:IRFL/train/dataset-0.json" for r in conv.rejected)
    assert "absent.png" in conv.rejected[-1].detail and "broken.jpg" in conv.rejected[0].detail
    assert conv.counts() == {"source_rows": 9, "kept": 4, "dropped": {},
                             "rejected": {"choice-not-found": 1,
                                          "empty-answer": 1, "missing-field": 1,
                                          "unreadable-image": 2}}
    mismatch = adapter(irfl_dir).convert(DRAKE.task("IRFL-1"), "train").rejected
    assert [(r.source_id, r.reason) for r in mismatch] == [("m1", "image-token-mismatch")]
    assert "3 <image> token(s)" in mismatch[0].detail and "4 path(s)" in mismatch[0].detail


def test_unpacked_folder_and_gzipped_tar_give_the_same_samples(irfl_dir, tmp_path):
    task = DRAKE.task("IRFL-1")
    _, from_tar = samples(adapter(irfl_dir), task, "train")
    unpacked = tmp_path / "unpacked"
    with tarfile.open(irfl_dir / "IRFL.tar") as tf:
        tf.extractall(unpacked, filter="data")
    _, from_dir = samples(adapter(unpacked), task, "train")
    gz = tmp_path / "gz"
    gz.mkdir()
    write_tar(gz / "IRFL.tar", irfl_members(), mode="w:gz")
    _, from_gz = samples(adapter(gz), task, "train")
    strip = [{k: v for k, v in s.items() if k != "meta"} for s in from_tar]
    assert [{k: v for k, v in s.items() if k != "meta"} for s in from_dir] == strip
    assert [{k: v for k, v in s.items() if k != "meta"} for s in from_gz] == strip


def test_caps_keep_a_seeded_subset_in_source_order(tmp_path):
    rows = [rec(f"r{k}", [IMG[0]], tf_prompt(f"p{k}"), "True") for k in range(12)]
    members = {"IRFL/images/0.png": png((1, 2, 3)),
               "IRFL/train/dataset-0.json": json.dumps(rows).encode()}
    write_tar(tmp_path / "IRFL.tar", members)
    task = replace(DRAKE.task("IRFL-0"), caps={"train": 5, "test": 1})

    def kept(seed):
        conv = adapter(tmp_path, seed=seed).convert(task, "train")
        assert conv.counts()["dropped"] == {"cap": 7} and conv.reconciles()
        return [r["id"] for r in conv.kept]

    a, b = kept(0), kept(0)
    assert a == b and len(a) == 5 and a == sorted(a, key=lambda s: int(s[1:]))
    assert any(kept(s) != a for s in (1, 2, 3))


def test_bongard_hoi_subsets_are_matched_by_their_image_count(tmp_path):
    image = "dataset/Bongard-HOI/images/0.png"

    def rows(n, prefix):
        return [rec(f"{prefix}{k}", [image] * n, "<image>" * n + "\nChoice list:[Positive, "
                    "Negative]. Your answer is:", "Positive") for k in range(2)]

    members = {"Bongard-HOI/images/0.png": png((9, 9, 9))}
    # the released files may number the three tasks differently from the task list
    for split in ("train", "test"):
        for subset, n in (("0", 6), ("1", 7), ("2", 4)):
            members[f"Bongard-HOI/{split}/dataset-{subset}.json"] = json.dumps(
                rows(n, f"s{subset}-")).encode()
    write_tar(tmp_path / "Bongard-HOI.tar", members)
    ids = ("Bongard-HOI-0", "Bongard-HOI-1", "Bongard-HOI-2")
    # by default each task opens the file its id names, as the released scenarios do
    released = adapter(tmp_path)
    assert {t: released.describe(DRAKE.task(t))["subset"] for t in ids} == {
        "Bongard-HOI-0": "0", "Bongard-HOI-1": "1", "Bongard-HOI-2": "2"}
    conv = released.convert(DRAKE.task("Bongard-HOI-0"), "test")
    assert [r["id"] for r in conv.kept] == ["s0-0", "s0-1"]
    ad = adapter(tmp_path, subsets="by-content")
    resolved = {tid: ad.describe(DRAKE.task(tid))["subset"] for tid in ids}
    assert resolved == {"Bongard-HOI-0": "1", "Bongard-HOI-1": "0", "Bongard-HOI-2": "2"}
    task = DRAKE.task("Bongard-HOI-0")
    conv = ad.convert(task, "test")
    assert [r["id"] for r in conv.kept] == ["s1-0", "s1-1"]
    sample = ad.sample(task, "test", conv.kept[0], 0)
    assert len(sample["images"]) == 7 and json.loads(sample["meta"])["subset"] == "1"


def test_an_unresolvable_subset_is_an_error_naming_the_counts(tmp_path):
    rows = [rec("a", [IMG[0]] * 5, "<image>" * 5 + " Choice list:[Positive, Negative]",
                "Positive")]
    write_tar(tmp_path / "Bongard-HOI.tar",
              {"Bongard-HOI/train/dataset-0.json": json.dumps(rows).encode()})
    with pytest.raises(BuildError, match=r"Bongard-HOI-0.*expected 7-7 images.*'0': \[5\]"):
        adapter(tmp_path, subsets="by-content").describe(DRAKE.task("Bongard-HOI-0"))


def test_image_paths_resolve_with_or_without_the_dataset_prefix():
    assert image_candidates("dataset/VSR/images/1.jpg", "VSR")[:2] == ["dataset/VSR/images/1.jpg",
                                                                       "VSR/images/1.jpg"]
    assert "VSR/images/1.jpg" in image_candidates("/data/x/VSR/images/1.jpg", "VSR")
    assert "VSR/images/1.jpg" in image_candidates("images/1.jpg", "VSR")


def test_missing_source_file_names_both_layouts_and_the_download(tmp_path):
    with pytest.raises(BuildError, match=r"neither IRFL.tar nor an unpacked IRFL/.*hf download "
                                         r"SNUMPR/DRAKE IRFL.tar"):
        adapter(tmp_path).convert(DRAKE.task("IRFL-0"), "train")


def test_reads_the_tar_from_a_populated_hub_cache_offline(tmp_path, monkeypatch):
    from drake.hub import populate_cache

    tar = write_tar(tmp_path / "IRFL.tar", irfl_members())
    cache = tmp_path / "hub"
    populate_cache("SNUMPR/DRAKE", {"IRFL.tar": tar}, cache_dir=cache, commit="a" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ad = adapter(cache_dir=cache)
    conv = ad.convert(DRAKE.task("IRFL-1"), "test")
    assert [r["id"] for r in conv.kept] == ["n0"]
    assert ad.describe(DRAKE.task("IRFL-1"))["revision"] == "a" * 40
    with pytest.raises(NetworkUnavailable, match="drake-synth.*--source-dir.*HF_HOME"):
        adapter(cache_dir=cache).convert(DRAKE.task("VSR-0"), "train")


def test_every_drake_and_hflb_task_reads_a_llava_tar():
    for spec in (DRAKE, get_benchmark("hflb")):
        # the public alignment set is a Hub dataset of LLaVA conversations
        assert [spec.task(t).source for t in spec.public_tasks] == ["hf-llava-conversations"]
        for task in spec.tasks:
            if task.id in spec.public_tasks:
                continue
            args = task.source_args
            assert task.source == "llava-tar"
            assert task.id == f"{args['dataset']}-{args['subset']}"
            assert args["file"] == f"{args['dataset']}.tar"
    assert get_benchmark("hflb").task("GQA-21").source_args["subset"] == "21"
