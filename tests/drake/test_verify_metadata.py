"""Issue 23, item 9: `drake verify` covers the manifest's own metadata (seed, spec, total_rows),
the dataset card and every file in the folder, and never opens a file the manifest places
outside it."""

from __future__ import annotations

import json
import shutil

import pytest

from drake.build import MANIFEST, build, manifest_digest, write_manifest
from drake.registry import get_benchmark
from drake.verify import verify


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build(get_benchmark("drake-synth", size="tiny"), tmp_path_factory.mktemp("v"), seed=5)


@pytest.fixture
def copy(built, tmp_path):
    folder = tmp_path / "drake-synth"
    shutil.copytree(built, folder)
    return folder


def edit(folder, change, reseal: bool):
    manifest = json.loads((folder / MANIFEST).read_text())
    change(manifest)
    if reseal:
        write_manifest(folder, manifest)  # as a careful forger would: the digest matches
    else:
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def problems(folder) -> str:
    report = verify(folder)
    assert not report.ok
    return "\n".join(report.problems)


def test_a_fresh_build_verifies_and_is_sealed(built):
    manifest = json.loads((built / MANIFEST).read_text())
    assert verify(built).ok and manifest["digest"] == manifest_digest(manifest)
    assert manifest["builder_version"] == "2" and manifest["card"]["file"] == "README.md"


@pytest.mark.parametrize("field,value", [("seed", 6), ("total_rows", 1), ("image_size", 32)])
def test_an_edited_metadata_field_is_caught_by_the_digest(copy, field, value):
    edit(copy, lambda m: m.__setitem__(field, value), reseal=False)
    assert "digest does not match" in problems(copy)


def test_a_resealed_seed_is_caught_by_regenerating_a_shard(copy):
    edit(copy, lambda m: m.__setitem__("seed", 6), reseal=True)
    assert "seed 6 does not regenerate this shard" in problems(copy)


def test_resealed_counts_and_spec_are_caught(copy, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(copy, other)
    edit(copy, lambda m: m.__setitem__("total_rows", m["total_rows"] + 1), reseal=True)
    assert "total_rows" in problems(copy) and "sum of its task splits" in problems(copy)
    edit(other, lambda m: m["spec"].__setitem__("description", "changed"), reseal=True)
    assert "spec_sha256 is not the sha256 of its spec" in problems(other)


def test_an_edited_card_and_stray_files_are_caught(copy):
    (copy / "README.md").write_text("# a different card\n")
    (copy / "tasks" / "notes.json").write_text("{}")
    (copy / ".hidden").write_text("x")
    found = problems(copy)
    assert "README.md: sha256 differs" in found and "dataset card was changed" in found
    assert "notes.json: not in the manifest" in found and ".hidden: not in the manifest" in found


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside.parquet", "tasks/../../x.parquet"])
def test_a_manifest_entry_outside_the_folder_is_refused_without_opening_it(copy, bad,
                                                                           monkeypatch):
    def first_shard(m):
        task = next(iter(m["tasks"].values()))
        task["train"]["shards"][0]["file"] = bad

    edit(copy, first_shard, reseal=True)
    opened = []
    real_sha = __import__("drake.verify", fromlist=["sha256_file"]).sha256_file
    monkeypatch.setattr("drake.verify.sha256_file",
                        lambda p, *a: opened.append(str(p)) or real_sha(p, *a))
    assert "points outside" in problems(copy)
    assert not any(bad.lstrip("./") in p and "tasks/synth" not in p for p in opened)
