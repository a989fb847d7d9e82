"""Hostile sources (issue 23, items 3-4): every read from an archive or folder is size-capped and
stays inside its root. A record naming ``../outside/secret.png``, a link to a file outside, a
split file pointing out of the folder, a row whose image path is ``/etc/...``, and a 1 kB gzip tar
declaring a 1 GiB member: none may put an outside byte into a sample or exhaust memory."""

from __future__ import annotations

import io
import json
import os
import subprocess

import pytest
from PIL import Image

from drake.adapters.base import AdapterOptions
from drake.adapters.confine import UnsafeSource, check_name, confined, read_capped
from drake.adapters.folders import ImageFolderAdapter
from drake.adapters.hubdata import image_bytes
from drake.adapters.llava_tar import LlavaTarAdapter
from drake.errors import BuildError
from drake.registry import get_benchmark

TASK = get_benchmark("drake").task("IRFL-0")
PROMPT = ("For a given image and phrase, decide whether the image depicts the phrase.\n<image>\n"
          "Phrase: x\nChoice list:[True, False]. Your answer is:")


def png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


def row(sid: str, image: str) -> dict:
    return {"id": sid, "image": [image], "conversations": [
        {"from": "human", "value": PROMPT}, {"from": "gpt", "value": "True"}]}


SECRET = png((1, 2, 3)) + b"SECRET-BYTES"


@pytest.fixture
def unpacked(tmp_path):
    """--source-dir holding an unpacked IRFL/ folder, with a secret file beside it."""
    src = tmp_path / "src"
    images = src / "IRFL" / "images"
    images.mkdir(parents=True)
    (images / "ok.png").write_bytes(png((9, 9, 9)))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.png").write_bytes(SECRET)
    os.symlink(tmp_path / "outside" / "secret.png", images / "link.png")
    rows = [row("a", "dataset/IRFL/images/ok.png"),
            row("b", "../outside/secret.png"),
            row("c", "dataset/IRFL/images/../../../outside/secret.png"),
            row("d", "dataset/IRFL/images/link.png"),
            row("e", str(tmp_path / "outside" / "secret.png"))]
    for split in ("train", "test"):
        (src / "IRFL" / split).mkdir()
        (src / "IRFL" / split / "dataset-0.json").write_text(json.dumps(rows))
    return src


def test_an_unpacked_folder_never_gives_a_byte_from_outside_it(unpacked):
    ad = LlavaTarAdapter(AdapterOptions(source_dir=unpacked))
    conv = ad.convert(TASK, "train")
    assert [r["id"] for r in conv.kept] == ["a"] and conv.reconciles()
    why = {r.source_id: (r.reason, r.detail) for r in conv.rejected}
    assert set(why) == {"b", "c", "d", "e"}
    assert all(reason == "unreadable-image" for reason, _ in why.values())
    assert "points outside" in why["b"][1] and "points outside" in why["c"][1]
    assert "outside" in why["d"][1] and "points outside" in why["e"][1]
    samples = [ad.sample(TASK, "train", r, i) for i, r in enumerate(conv.kept)]
    assert all(b"SECRET" not in im["bytes"] for s in samples for im in s["images"])


def test_a_folder_adapter_refuses_links_and_split_entries_leaving_the_folder(tmp_path, unpacked):
    frames = tmp_path / "frames"
    for cls in ("A", "B"):
        (frames / cls).mkdir(parents=True)
        (frames / cls / "0.jpg").write_bytes(png((5, 5, 5)))
    os.symlink(tmp_path / "outside" / "secret.png", frames / "A" / "1.jpg")
    split = {"train": [["A/0.jpg", 0, "A"], ["A/1.jpg", 0, "A"], ["../outside/secret.png", 1, "B"],
                       ["B/0.jpg", 1, "B"]], "test": [["B/0.jpg", 1, "B"]]}
    (tmp_path / "split.json").write_text(json.dumps(split))
    d = get_benchmark("clip-base2novel/ucf101").tasks[0].to_dict()
    d["source_args"] = {**d["source_args"], "num_classes": 2, "split_file": "split.json",
                        "image_dir": "frames"}
    d["num_images"], d["metrics"] = tuple(d["num_images"]), tuple(d["metrics"])
    from drake.specs import TaskSpec

    task = TaskSpec(**d)
    ad = ImageFolderAdapter(AdapterOptions(source_dir=tmp_path))
    conv = ad.convert(task, "train")
    assert sorted(r["path"] for r in conv.kept) == ["A/0.jpg", "B/0.jpg"] and conv.reconciles()
    details = sorted(r.detail for r in conv.rejected)
    assert "points outside" in details[0] and "outside" in details[1] and "1.jpg" in details[1]


def test_a_row_image_path_is_read_only_inside_the_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "img.png").write_bytes(png((4, 4, 4)))
    outside = tmp_path / "secret.png"
    outside.write_bytes(SECRET)
    assert image_bytes({"bytes": None, "path": str(outside)}) is None
    assert image_bytes({"bytes": None, "path": str(tmp_path / "cache" / ".." / "secret.png")}) \
        is None
    assert image_bytes({"bytes": None, "path": "secret.png"}) is None  # relative: never read
    assert image_bytes({"bytes": None, "path": str(tmp_path / "cache" / "img.png")}) == \
        png((4, 4, 4))


def _sparse_gzip_tar(tmp_path, member: str, size: int):
    """A gzip tar of a few kB whose ``member`` is a GNU sparse file declared at ``size`` bytes,
    written with GNU tar's --sparse (Python's tarfile cannot write sparse members)."""
    staging = tmp_path / "staging"
    (staging / os.path.dirname(member)).mkdir(parents=True, exist_ok=True)
    with open(staging / member, "wb") as handle:
        handle.truncate(size)
    out = tmp_path / "src" / "IRFL.tar"
    out.parent.mkdir(exist_ok=True)
    subprocess.run(["tar", "--sparse", "-czf", str(out), "-C", str(staging), "IRFL"],
                   check=True, timeout=60)
    return out


def test_a_tiny_gzip_tar_declaring_a_huge_image_is_refused_without_reading_it(tmp_path):
    staging = tmp_path / "staging" / "IRFL"
    for split in ("train", "test"):
        (staging / split).mkdir(parents=True)
        (staging / split / "dataset-0.json").write_text(json.dumps(
            [row("big", "dataset/IRFL/images/big.png"), row("ok", "dataset/IRFL/images/ok.png")]))
    (staging / "images").mkdir()
    (staging / "images" / "ok.png").write_bytes(png((7, 7, 7)))
    tar = _sparse_gzip_tar(tmp_path, "IRFL/images/big.png", 1 << 30)
    assert tar.stat().st_size < 64 * 1024
    conv = LlavaTarAdapter(AdapterOptions(source_dir=tar.parent)).convert(TASK, "train")
    assert [r["id"] for r in conv.kept] == ["ok"] and conv.reconciles()
    (bad,) = conv.rejected
    assert bad.source_id == "big" and "1024.0 MiB" in bad.detail and "cap" in bad.detail


def test_a_huge_annotation_file_is_a_one_line_build_error(tmp_path):
    tar = _sparse_gzip_tar(tmp_path, "IRFL/train/dataset-0.json", 1 << 30)
    with pytest.raises(BuildError, match=r"IRFL/train/dataset-0.json.*1024.0 MiB.*cap"):
        LlavaTarAdapter(AdapterOptions(source_dir=tar.parent)).convert(TASK, "train")


def test_confinement_helpers(tmp_path):
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "root" / "a" / "f").write_bytes(b"12345")
    root = tmp_path / "root"
    assert confined(root, "a/f").read_bytes() == b"12345"
    assert confined(root, str(root / "a" / "f")) == confined(root, "a/f")
    for bad in ("../x", "a/../../x", "/etc/passwd", "C:/x"):
        with pytest.raises(UnsafeSource, match="points outside"):
            check_name(bad, "root")
    os.symlink(root / "a" / "f", root / "inner-link")
    with pytest.raises(UnsafeSource, match="symbolic link"):
        confined(root, "inner-link")
    assert confined(root, "inner-link", links=True) == root / "inner-link"  # target inside
    (tmp_path / "other").write_bytes(b"outside")
    os.symlink(tmp_path, root / "up")
    with pytest.raises(UnsafeSource, match="outside"):
        confined(root, "up/other", links=True)
    assert read_capped(root / "a" / "f", 5) == b"12345"
    with pytest.raises(UnsafeSource, match="5 bytes, over the 4 bytes cap"):
        read_capped(root / "a" / "f", 4)
    assert isinstance(UnsafeSource("x"), OSError) and isinstance(UnsafeSource("x"), BuildError)
