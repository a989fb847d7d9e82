"""Build pipeline: determinism, verify, atomicity and resume, on drake-synth at the tiny size."""

import json
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from drake.build import MANIFEST, build
from drake.errors import BuildError
from drake.registry import get_benchmark
from drake.schema import IMAGE_TOKEN
from drake.verify import verify


@pytest.fixture(scope="module")
def tiny():
    return get_benchmark("drake-synth", size="tiny")


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny):
    return build(tiny, tmp_path_factory.mktemp("a"), seed=7, shard_rows=16)


def manifest(folder):
    return json.loads((folder / MANIFEST).read_text())


def test_same_seed_gives_identical_manifest(built, tiny, tmp_path):
    again = build(tiny, tmp_path, seed=7, shard_rows=16, num_proc=2)
    assert (again / MANIFEST).read_bytes() == (built / MANIFEST).read_bytes()


def test_different_seed_gives_different_shards(built, tiny, tmp_path):
    other = manifest(build(tiny, tmp_path, seed=8, shard_rows=16))
    ref = manifest(built)
    task = tiny.clients[0].tasks[0]
    a = [s["sha256"] for s in ref["tasks"][task]["train"]["shards"]]
    b = [s["sha256"] for s in other["tasks"][task]["train"]["shards"]]
    assert a != b and other["total_rows"] == ref["total_rows"]


def test_structure_and_counts(built, tiny):
    m = manifest(built)
    assert len(m["tasks"]) == len(tiny.tasks)
    for task in tiny.tasks:
        for split, rows in task.caps.items():
            info = m["tasks"][task.id][split]
            assert info["rows"] == rows
            assert sum(s["rows"] for s in info["shards"]) == rows
            for shard in info["shards"]:
                assert (built / shard["file"]).is_file()
    assert (built / "README.md").read_text().startswith("---\n")
    assert not list(built.glob(".journal*"))


def test_every_row_passes_schema_and_has_single_and_multi_image(built, tiny):
    from drake.schema import validate_sample

    counts = set()
    for path in sorted((built / "tasks").rglob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            validate_sample(row)
            assert row["prompt"].count(IMAGE_TOKEN) == len(row["images"])
            counts.add(len(row["images"]))
    assert 1 in counts and max(counts) >= 4


def test_loads_with_datasets(built, tiny):
    import datasets

    task = tiny.clients[1].tasks[0]
    ds = datasets.load_dataset(str(built / "tasks" / task))
    assert ds["train"].num_rows == tiny.task(task).caps["train"]
    first = ds["test"][0]
    assert first["task"] == task and first["images"][0].size == (64, 64)


def test_verify_passes_then_names_a_changed_byte(built, tmp_path):
    copy = shutil.copytree(built, tmp_path / "copy")
    assert verify(copy).ok
    shard = sorted((copy / "tasks").rglob("*.parquet"))[3]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    report = verify(copy)
    assert not report.ok and str(shard) in report.problems[0] and "sha256" in report.problems[0]


def test_verify_names_a_deleted_shard_and_an_extra_file(built, tmp_path):
    copy = shutil.copytree(built, tmp_path / "copy")
    shard = sorted((copy / "tasks").rglob("*.parquet"))[0]
    extra = shard.with_name("train-99999-of-99999.parquet")
    shutil.copy(shard, extra)
    shard.unlink()
    problems = verify(copy).problems
    assert any(str(shard) in p and "missing" in p for p in problems)
    assert any(str(extra) in p and "not in the manifest" in p for p in problems)


def test_killed_build_leaves_nothing_complete_and_resumes(tiny, tmp_path, built):
    with pytest.raises(BuildError, match="stopped after 5"):
        build(tiny, tmp_path, seed=7, shard_rows=16, _stop_after=5)
    final = tmp_path / tiny.name
    assert not (final / MANIFEST).exists()
    partial = tmp_path / f".{tiny.name}.partial"
    assert len(list((partial / "tasks").rglob("*.parquet"))) == 5
    done = build(tiny, tmp_path, seed=7, shard_rows=16)
    assert (done / MANIFEST).read_bytes() == (built / MANIFEST).read_bytes()
    assert not partial.exists()


def test_resume_rebuilds_a_corrupted_finished_shard(tiny, tmp_path, built):
    with pytest.raises(BuildError):
        build(tiny, tmp_path, seed=7, shard_rows=16, _stop_after=3)
    partial = tmp_path / f".{tiny.name}.partial"
    shard = sorted((partial / "tasks").rglob("*.parquet"))[0]
    shard.write_bytes(b"garbage")
    done = build(tiny, tmp_path, seed=7, shard_rows=16)
    assert (done / MANIFEST).read_bytes() == (built / MANIFEST).read_bytes()


def test_resume_with_other_seed_starts_over(tiny, tmp_path):
    with pytest.raises(BuildError):
        build(tiny, tmp_path, seed=7, shard_rows=16, _stop_after=2)
    done = build(tiny, tmp_path, seed=9, shard_rows=16)
    assert manifest(done)["seed"] == 9 and verify(done).ok


def test_existing_build_is_not_overwritten_silently(built):
    with pytest.raises(BuildError, match="--overwrite"):
        build(get_benchmark("drake-synth", size="tiny"), built.parent, seed=7, shard_rows=16)


def test_real_drake_without_network_fails_fast_with_hint(tmp_path):
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "drake.cli", "build", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0
    assert "--benchmark drake-synth" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir()), "nothing may be written"


def test_hub_probe_gives_up_on_an_unreachable_host(monkeypatch):
    from drake import sources

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(sources, "HUB_HOST", "hub.invalid")
    assert sources.hub_reachable(timeout=2.0) is False


def test_build_refuses_num_proc_below_one(tmp_path, capsys):
    from drake.cli import main

    assert main(["build", "--benchmark", "drake-synth", "--size", "tiny", "--out",
                 str(tmp_path), "--num-proc", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--num-proc must be >= 1, got 0" in err[0], err
    assert not any(tmp_path.iterdir())
