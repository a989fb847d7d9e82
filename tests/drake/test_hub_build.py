"""Real-data builds through the CLI with no network: a DRAKE tar in a Hub cache the test fills.

Covers `drake build --benchmark drake` (HF_HUB_OFFLINE=1, HF_HOME in tmp_path), the
reconciled counts and rejected.jsonl, --strict, --num-proc, `drake verify`, `drake download`
from a cache (and its refusal of a changed shard), `drake push` against a mocked HfApi, and the
fast failure with no network and no cache.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import pytest
from PIL import Image

from drake.build import MANIFEST
from drake.cli import main
from drake.hub import folder_files, populate_cache

TASKS = "IRFL-0,IRFL-1"
WHERE0 = "SNUMPR/DRAKE/IRFL.tar:IRFL/train/dataset-0.json"
WHERE1 = "SNUMPR/DRAKE/IRFL.tar:IRFL/train/dataset-1.json"
TF = "Decide whether the image depicts the phrase.\n<image>\nPhrase: {}\nChoice list:[True, " \
     "False]. Your answer is:"
PICK = ("Which image shows the idiom?\nImage A: <image>, Image B: <image>, Image C: <image>, "
        "Image D: <image>\nChoice list:[Image A, Image B, Image C, Image D]. Your answer is:")


def png(k):
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (30 * k, 90, 0)).save(buf, format="PNG")
    return buf.getvalue()


def rec(sid, images, human, gpt):
    return {"id": sid, "image": [f"dataset/IRFL/images/{k}.png" for k in images],
            "conversations": [{"from": "human", "value": human}, {"from": "gpt", "value": gpt}]}


FILES = {
    ("train", 0): [rec("a0", [0], TF.format("spill the beans"), "True"),
                   rec("a1", [1], TF.format("cold feet"), "False"),
                   rec("a2", ["corrupt"], TF.format("break a leg"), "True"),  # planted
                   rec("a3", [2], TF.format("hot potato"), "True")],
    ("test", 0): [rec("b0", [3], TF.format("piece of cake"), "False"),
                  rec("b1", [4], TF.format("cloud nine"), "True")],
    ("train", 1): [rec("c0", [0, 1, 2, 3], PICK, "Image B"),
                   rec("c1", [1, 2, 3, 4], PICK.replace("Image D: <image>", "Image D:"),
                       "Image A"),  # planted: 3 tokens, 4 images
                   rec("c2", [2, 3, 4, 5], PICK, "Image D")],
    ("test", 1): [rec("d0", [5, 4, 3, 2], PICK, "Image C")],
}


def write_drake_tar(path):
    members = {f"IRFL/images/{k}.png": png(k) for k in range(6)}
    members["IRFL/images/corrupt.png"] = png(0)[:40]  # a truncated PNG
    for (split, subset), rows in FILES.items():
        members[f"IRFL/{split}/dataset-{subset}.json"] = json.dumps(rows, indent=1).encode()
    with tarfile.open(path, "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    tar = write_drake_tar(root / "IRFL.tar")
    populate_cache("SNUMPR/DRAKE", {"IRFL.tar": tar}, cache_dir=root / "home" / "hub",
                   commit="c" * 40)
    return root / "home"


@pytest.fixture(scope="module")
def built(hf_home, tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    proc = subprocess.run(
        [sys.executable, "-m", "drake.cli", "build", "--benchmark", "drake", "--tasks", TASKS,
         "--out", str(out)], capture_output=True, text=True, timeout=120,
        env=clean_env(HF_HUB_OFFLINE="1", HF_HOME=str(hf_home)))
    assert proc.returncode == 0, proc.stderr
    assert "2 source rows rejected" in proc.stdout
    return out / "drake"


@pytest.fixture
def offline(monkeypatch, hf_home):
    for key in [k for k in os.environ if k.startswith("HF_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(hf_home))


def manifest(folder):
    return json.loads((folder / MANIFEST).read_text())


def test_build_verifies_and_its_counts_reconcile(built, capsys):
    assert main(["verify", str(built)]) == 0
    assert "ok:" in capsys.readouterr().out
    m = manifest(built)
    assert m["sources"]["IRFL-0"]["splits"] == {
        "train": {"source_rows": 4, "kept": 3, "dropped": {},
                  "rejected": {"unreadable-image": 1}},
        "test": {"source_rows": 2, "kept": 2, "dropped": {}, "rejected": {}}}
    assert m["sources"]["IRFL-1"]["splits"]["train"] == {
        "source_rows": 3, "kept": 2, "dropped": {}, "rejected": {"image-token-mismatch": 1}}
    assert m["sources"]["IRFL-1"]["origin"] == {
        "from": "hub", "repo": "SNUMPR/DRAKE", "file": "IRFL.tar", "revision": "c" * 40,
        "dataset": "IRFL", "subset": "1", "declared_subset": "1"}
    for task, info in m["sources"].items():
        for split, c in info["splits"].items():
            assert c["source_rows"] == (c["kept"] + sum(c["dropped"].values())
                                        + sum(c["rejected"].values()))
            assert m["tasks"][task][split]["rows"] == c["kept"]
    assert m["rejected"]["rows"] == 2 and not (built / ".sources").exists()
    assert str(built.parent) not in (built / MANIFEST).read_text()  # no local paths


def test_rejected_jsonl_lists_the_planted_problems(built):
    lines = [json.loads(x) for x in (built / "rejected.jsonl").read_text().splitlines()]
    assert [(r["task"], r["split"], r["source_id"], r["reason"], r["where"]) for r in lines] == [
        ("IRFL-0", "train", "a2", "unreadable-image", WHERE0),
        ("IRFL-1", "train", "c1", "image-token-mismatch", WHERE1)]
    assert "corrupt.png" in lines[0]["detail"]


def test_built_samples_are_the_expected_ones(built):
    import datasets

    ds = datasets.load_dataset(str(built / "tasks" / "IRFL-1"))
    rows = ds["train"][:]
    assert rows["id"] == ["IRFL-1-train-c0", "IRFL-1-train-c2"]
    assert rows["answer"] == ["Image B", "Image D"]
    assert [len(x) for x in rows["images"]] == [4, 4]
    assert rows["choices"][0] == ["Image A", "Image B", "Image C", "Image D"]
    assert ds["test"][:]["id"] == ["IRFL-1-test-d0"]
    both = datasets.load_dataset(str(built))  # the dataset card's default config
    assert both["train"].num_rows == 5 and both["test"].num_rows == 3
    parts = (built / "partitions").glob("*.parquet")
    assert sorted(p.name for p in parts) == ["dynamic.parquet", "static.parquet"]


def test_strict_fails_naming_file_sample_and_reason(offline, tmp_path, capsys):
    code = main(["build", "--benchmark", "drake", "--tasks", TASKS, "--out", str(tmp_path),
                 "--strict"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{WHERE0}: sample 'a2'" in err and "unreadable-image" in err
    assert f"{WHERE1}: sample 'c1'" in err and "image-token-mismatch" in err
    assert not (tmp_path / "drake").exists()


def test_parallel_build_converts_once_and_matches(offline, built, tmp_path, monkeypatch):
    from drake.adapters.llava_tar import LlavaTarAdapter

    calls = []
    convert = LlavaTarAdapter.convert
    monkeypatch.setattr(LlavaTarAdapter, "convert",
                        lambda self, task, split: calls.append((task.id, split))
                        or convert(self, task, split))
    assert main(["build", "--benchmark", "drake", "--tasks", TASKS, "--out", str(tmp_path),
                 "--num-proc", "2"]) == 0
    assert sorted(calls) == sorted({(t, s) for t in TASKS.split(",") for s in ("train", "test")})
    assert (tmp_path / "drake" / MANIFEST).read_bytes() == (built / MANIFEST).read_bytes()


def test_a_killed_real_build_resumes_without_converting_again(offline, built, tmp_path,
                                                             monkeypatch):
    from drake.adapters.llava_tar import LlavaTarAdapter
    from drake.build import build, restrict_spec
    from drake.errors import BuildError
    from drake.registry import get_benchmark

    spec = restrict_spec(get_benchmark("drake"), TASKS.split(","))
    with pytest.raises(BuildError, match="stopped after 2"):
        build(spec, tmp_path, _stop_after=2)
    assert (tmp_path / ".drake.partial" / ".sources" / "IRFL-0" / "train.json").is_file()
    monkeypatch.setattr(LlavaTarAdapter, "convert", lambda *a: pytest.fail("converted again"))
    done = build(spec, tmp_path)
    assert (done / MANIFEST).read_bytes() == (built / MANIFEST).read_bytes()


def test_source_dir_builds_from_a_local_tar_without_the_hub(tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.startswith("HF_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty"))  # no cache: only the folder can work
    src = tmp_path / "src"
    src.mkdir()
    write_drake_tar(src / "IRFL.tar")
    assert main(["build", "--tasks", "IRFL-1", "--source-dir", str(src), "--out",
                 str(tmp_path / "out")]) == 0
    m = manifest(tmp_path / "out" / "drake")
    assert m["sources"]["IRFL-1"]["origin"]["from"] == "source-dir"
    assert m["tasks"]["IRFL-1"]["train"]["rows"] == 2 and list(m["tasks"]) == ["IRFL-1"]


def test_verify_catches_an_edited_rejection_list(built, tmp_path):
    from drake.verify import verify

    copy = shutil.copytree(built, tmp_path / "copy")
    lines = (copy / "rejected.jsonl").read_text().splitlines()
    (copy / "rejected.jsonl").write_text(lines[0] + "\n")
    problems = verify(copy).problems
    assert any("sha256" in p and "rejected.jsonl" in p for p in problems)
    assert any("image-token-mismatch" in p and "counts 1" in p for p in problems)


def prebuilt_cache(folder, home, tamper=None):
    files = {name: folder / name for name in folder_files(manifest(folder))}
    if tamper:
        data = bytearray(files[tamper].read_bytes())
        data[len(data) // 2] ^= 1
        files[tamper] = bytes(data)
    populate_cache("drake-pfl/drake", files, cache_dir=home / "hub")
    return home


def test_download_from_a_populated_cache_verifies(built, tmp_path):
    home = prebuilt_cache(built, tmp_path / "home")
    proc = subprocess.run(
        [sys.executable, "-m", "drake.cli", "download", "--benchmark", "drake", "--out",
         str(tmp_path / "dl")], capture_output=True, text=True, timeout=120,
        env=clean_env(HF_HUB_OFFLINE="1", HF_HOME=str(home)))
    assert proc.returncode == 0, proc.stderr
    got = tmp_path / "dl" / "drake"
    assert (got / MANIFEST).read_bytes() == (built / MANIFEST).read_bytes()
    assert (got / "README.md").read_bytes() == (built / "README.md").read_bytes()
    assert main(["verify", str(got)]) == 0


def test_download_refuses_a_shard_whose_hash_differs(built, tmp_path, monkeypatch, capsys):
    shard = manifest(built)["tasks"]["IRFL-0"]["train"]["shards"][0]["file"]
    home = prebuilt_cache(built, tmp_path / "home", tamper=shard)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(home))
    assert main(["download", "--benchmark", "drake", "--out", str(tmp_path / "dl")]) == 2
    err = capsys.readouterr().err
    assert shard in err and "sha256" in err and "refusing" in err
    assert not any((tmp_path / "dl").iterdir())  # nothing in place, no partial left


def test_push_verifies_then_uploads_the_folder_with_its_card(built, monkeypatch, capsys):
    import huggingface_hub

    from drake import hub

    calls = []

    class FakeApi:
        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id, kw))

        def create_branch(self, repo_id, **kw):
            calls.append(("create_branch", repo_id, kw))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw["repo_id"], kw))
            return type("Info", (), {"commit_url": "https://hub.invalid/commit/1"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(hub, "hub_reachable", lambda: True)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["push", str(built), "--repo", "someone/drake-irfl"]) == 0
    assert "hub.invalid/commit/1" in capsys.readouterr().out
    (_, repo, create), (_, _, upload) = calls
    assert repo == "someone/drake-irfl" and create["repo_type"] == "dataset"
    assert upload["repo_type"] == "dataset" and upload["folder_path"] == str(built)
    sent = set(upload["allow_patterns"])
    assert {"README.md", "manifest.json", "rejected.jsonl", "partitions/dynamic.parquet"} <= sent
    assert sent == set(folder_files(manifest(built)))
    assert all((built / name).is_file() for name in sent)
    card = (built / "README.md").read_text()
    assert card.startswith("---\n") and 'config_name: "IRFL-0"' in card


def test_push_refuses_a_folder_that_fails_verify(built, tmp_path, monkeypatch):
    from drake import hub
    from drake.errors import VerifyError

    copy = shutil.copytree(built, tmp_path / "copy")
    (copy / "rejected.jsonl").write_text("")
    monkeypatch.setattr(hub, "hub_reachable", lambda: pytest.fail("must not reach the Hub"))
    with pytest.raises(VerifyError, match="fails verification"):
        hub.push(copy, "someone/x")


def test_no_network_and_no_cache_fails_fast_with_the_hint(tmp_path):
    # an unroutable endpoint (no HF_HUB_OFFLINE): the probe gives up, the empty cache is tried
    env = clean_env(HF_HOME=str(tmp_path / "empty"), HF_ENDPOINT="http://10.255.255.1")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "drake.cli", "build", "--out",
                           str(tmp_path / "data")], capture_output=True, text=True, env=env,
                          timeout=60)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2 and elapsed < 10, (elapsed, proc.stderr)
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "drake-synth" in err and "--source-dir" in err and "HF_HOME" in err
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def test_download_without_network_or_cache_fails_fast(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty"))
    assert main(["download", "--out", str(tmp_path / "dl")]) == 2
    err = capsys.readouterr().err
    assert "drake-pfl/drake" in err and "drake-synth" in err and "HF_HOME" in err


def _short_source(tmp_path):
    """IRFL.tar whose IRFL-0 test rows all answer outside their options (0 kept)."""
    files = dict(FILES)
    files[("test", 0)] = [rec("b0", [3], TF.format("piece of cake"), "Maybe"),
                          rec("b1", [4], TF.format("cloud nine"), "Perhaps")]
    src = tmp_path / "src"
    src.mkdir()
    members = {f"IRFL/images/{k}.png": png(k) for k in range(6)}
    members["IRFL/images/corrupt.png"] = png(0)[:40]
    for (split, subset), rows in files.items():
        members[f"IRFL/{split}/dataset-{subset}.json"] = json.dumps(rows).encode()
    with tarfile.open(src / "IRFL.tar", "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return src


def test_a_task_split_with_no_rows_fails_the_build_unless_allowed(tmp_path, capsys):
    src = _short_source(tmp_path)
    argv = ["build", "--tasks", TASKS, "--source-dir", str(src), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "task IRFL-0 test keeps 0 from 2 source rows (2 choice-not-found)" in err
    assert "--allow-short" in err and "rejected.jsonl" in err
    assert not (tmp_path / "out" / "drake").exists()
    assert main(argv + ["--allow-short"]) == 0
    folder = tmp_path / "out" / "drake"
    assert manifest(folder)["shortfalls"] == [
        {"task": "IRFL-0", "split": "test", "kept": 0, "expected": None, "source_rows": 2,
         "rejected": {"choice-not-found": 2}, "dropped": {}}]
    assert main(["verify", str(folder)]) == 0


def test_a_split_far_below_its_expected_count_is_short(tmp_path):
    from dataclasses import replace

    from drake.build import SHORT_BELOW, build, restrict_spec
    from drake.errors import BuildError
    from drake.registry import get_benchmark

    src = _short_source(tmp_path)
    spec = restrict_spec(get_benchmark("drake"), ["IRFL-1"])
    # IRFL-1 train keeps 2 of its 3 rows (one planted rejection)
    for expected, short in ((2, False), (3, True)):
        assert (2 < SHORT_BELOW * expected) == short
        task = replace(spec.tasks[0], expected={"train": expected})
        one = replace(spec, tasks=(task,))
        out = tmp_path / f"out{expected}"
        if short:
            with pytest.raises(BuildError, match="IRFL-1 train keeps 2 of 3 expected"):
                build(one, out, source_dir=src)
        else:
            assert "shortfalls" not in manifest(build(one, out, source_dir=src))
