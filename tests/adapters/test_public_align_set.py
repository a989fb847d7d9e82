"""DRAKE's and HFLB's public alignment set (LLaVA-ReCap-558K's first shard) from a Hub cache the
test fills with the real column names and file name: it builds with every row reconciled, and
`drake eval --dry-run --preset paper` prints the resolved protocol and FedMosaic's alignment on
tiny stand-in models."""

from __future__ import annotations

import json

import pytest

from drake.catalog.drake import PUBLIC_ALIGN_ID, PUBLIC_ALIGN_REPO
from drake.cli import main
from drake.errors import DrakeError
from drake.registry import get_benchmark

SHARD = "train-00000-of-00026.parquet"  # the one shard the catalog downloads


def _fill(hub, rows: int = 80) -> None:
    from datasets import Dataset, Features, Image, List, Value

    conv = List({"from": Value("string"), "value": Value("string")})
    words = ["red", "green", "blue", "small", "large", "round", "square", "striped"]
    ds = Dataset.from_dict(
        {"id": [f"{k // 10:05d}/{k:09d}.jpg" for k in range(rows)],
         "image": [{"bytes": hub.jpeg((37 * k % 256, 11 * k % 256, 90)), "path": None}
                   for k in range(rows)],
         "conversations": [[{"from": "human", "value": "<image>\nDescribe the image in detail."},
                            {"from": "gpt", "value": f"A {words[k % 8]} {words[(k // 8) % 8]} "
                                                     f"shape on a plain background, number {k}."}]
                           for k in range(rows)],
         "data_source": ["llava_pretrain_lcs558k"] * rows},
        features=Features({"id": Value("string"), "image": Image(), "conversations": conv,
                           "data_source": Value("string")}))
    hub.publish(PUBLIC_ALIGN_REPO, {"train": ds}, shard=SHARD)


def test_drake_and_hflb_declare_the_public_set():
    for name in ("drake", "hflb"):
        spec = get_benchmark(name)
        assert spec.public_tasks == (PUBLIC_ALIGN_ID,)
        task = spec.task(PUBLIC_ALIGN_ID)
        assert task.source_args["allow_patterns"][-1] == f"data/{SHARD}"
        assert task.caps == {"train": 5000, "test": 200}
        # disjoint from the clients' and the unseen tasks
        owned = {t for c in spec.clients for t in c.tasks} | set(spec.unseen_tasks)
        assert PUBLIC_ALIGN_ID not in owned


def test_the_public_set_builds_from_the_hub_cache(hub, tmp_path):
    _fill(hub)
    argv = ["build", "--benchmark", "drake", "--tasks", PUBLIC_ALIGN_ID, "--out",
            str(tmp_path / "data"), "--allow-short"]
    assert main(argv) == 0
    manifest = json.loads((tmp_path / "data" / "drake" / "manifest.json").read_text())
    rows = {split: info["rows"] for split, info in manifest["tasks"][PUBLIC_ALIGN_ID].items()}
    # the seeded 99/1 rule: 1% of 80 rounds to 1 test row; nothing lost
    assert rows == {"train": 79, "test": 1}


def test_dry_run_prints_the_protocol_and_the_alignment(hub, capsys):
    _fill(hub)
    argv = ["eval", "--method", "fedmosaic", "--benchmark", "drake", "--preset", "paper",
            "--dry-run", "--cache-dir", str(hub.cache), "--hp", "align_samples=64"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "preset paper (FedMosaic" in out and "compute_budget 100" in out
    assert "lr 2e-05" in out and "max_new_tokens 512" in out
    assert "local steps 94 per round (0.94 of 100 SFT steps)" in out
    assert "evaluation every 5 rounds on every test sample" in out
    assert f"public set: {PUBLIC_ALIGN_ID} from {PUBLIC_ALIGN_REPO}@" in out
    assert "80 rows kept" not in out and "79 rows kept of 79" in out
    assert ("stand-ins: thkim0305/llama3.2_1B_vl -> tiny-llava-llama, "
            "thkim0305/llama3.2_3B_vl -> tiny-llava-qwen") in out
    (line,) = [x for x in out.splitlines() if x.startswith("alignment of tiny-llava-qwen")]
    before, after = (float(x.split()[0]) for x in line.split("MSE ")[1].split(", "))
    assert 0 <= after < before


def test_dry_run_without_the_public_set_in_the_cache_names_the_dataset(hub, capsys):
    argv = ["eval", "--method", "fedmosaic", "--benchmark", "hflb", "--dry-run",
            "--cache-dir", str(hub.cache)]
    assert main(argv) != 0
    assert PUBLIC_ALIGN_REPO in capsys.readouterr().err


def test_heterogeneous_fedmosaic_without_public_samples_is_an_error():
    from baselines import get_method

    method = get_method("fedmosaic")(lr=2e-5)
    with pytest.raises(DrakeError, match="--hp align=false"):
        method.setup({"tiny-llava-llama": None, "tiny-llava-qwen": None}, [], seed=0)
    get_method("fedmosaic")(lr=2e-5, align=False).setup(
        {"tiny-llava-llama": None, "tiny-llava-qwen": None}, [], seed=0)  # knowingly off


def test_dry_run_of_a_benchmark_without_a_public_set(hub, capsys):
    # FediLoRA's sets declare no public set: fedavg's set-up needs none
    argv = ["eval", "--method", "fedavg", "--benchmark", "fedilora", "--preset", "paper",
            "--scenario", "missing0.4", "--dry-run", "--cache-dir", str(hub.cache)]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "public set: none declared by fedilora" in out
    assert "model mix default: tiny-llava-llama x10" in out
    assert "fedavg's set-up ran; it aligns nothing" in out
    # the twins run for real; CLIP benchmarks have no tiny LLaVA stand-in
    argv = ["eval", "--method", "fedmosaic", "--benchmark", "drake-synth", "--dry-run"]
    assert main(argv) != 0
    assert "generated, not read from a source" in capsys.readouterr().err
    argv = ["eval", "--method", "fedavg", "--benchmark", "cifar10-dir", "--scenario", "dir-alpha0.5",
            "--dry-run"]
    assert main(argv) != 0
    assert "tiny-clip is no LLaVA model" in capsys.readouterr().err
