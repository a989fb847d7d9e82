"""The real `tap` benchmark, end to end and offline: a Hub cache filled with small fixtures of
TAP's eight sets (every MMLU config TAP reads), each with its repo's own column names, feature
types, configs and splits, builds the whole benchmark with ``drake.build.build``; one round of
TAP's FedAvg on the tiny TAP architecture then runs on that build.

The fixtures hold a few rows per split (a few bad ones, so that rejections are counted), enough
for every client of TAP's FLAVA layout (``flava-30``) to hold rows of each of its tasks. VQAv2
is the exception: TAP's rule trains on the first 17,000 rows of the shuffled validation split
and tests on the rest, so its fixture has 17,006 rows (one tiny shared JPEG).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from drake.build import build
from drake.cli import main
from drake.registry import get_benchmark

VQA_TRAIN = 17_000  # TAP's VQAv2 rule: the first 17,000 shuffled validation rows train
MMLU_CONFIGS = ("professional_law", "professional_medicine", "moral_scenarios")


@dataclass(frozen=True)
class Expect:
    """Where a task split's source rows must go: kept, or rejected for a reason."""

    source_rows: int
    kept: int
    rejected: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, Any]:
        return {"source_rows": self.source_rows, "kept": self.kept, "dropped": {},
                "rejected": self.rejected}


def _names(head: list[str], n: int) -> list[str]:
    """A full-length class list: the head as the repo spells it, placeholders after it."""
    return head + [f"class_{i:03d}" for i in range(len(head), n)]


def _png(hub, k: int, size=(12, 12), mode="RGB") -> dict[str, Any]:
    colour = (37 * k % 256, 91 * k % 256, 53 * k % 256)
    return {"bytes": hub.png(colour[0] if mode == "L" else colour, size, mode), "path": None}


def _jpeg(hub, k: int) -> dict[str, Any]:
    return {"bytes": hub.jpeg((37 * k % 256, 91 * k % 256, 53 * k % 256), (12, 12)), "path": None}


def _corrupt(hub) -> dict[str, Any]:
    return {"bytes": hub.corrupt, "path": None}


def _publish(hub, repo: str, splits: dict, **kw) -> None:
    """``hub.publish`` at a commit of the repo's own, as on the Hub (the snapshots of one cache
    must not share a commit id: ``datasets`` caches a local load under the folder's name)."""
    hub.publish(repo, splits, sha=hashlib.sha1(repo.encode()).hexdigest(), **kw)


# --- TAP's sets in their repos' own formats ---------------------------------------------------


def write_tiny_imagenet(hub) -> dict[str, Expect]:
    """zh-plus/tiny-imagenet: ``image``, ``label`` (ClassLabel, 200 WordNet ids); train and
    valid."""
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"image": Image(), "label": ClassLabel(
        names=_names(["n01443537", "n01629819", "n01641577"], 200))})

    def split(n: int, offset: int) -> Dataset:
        return Dataset.from_dict({"image": [_jpeg(hub, offset + k) for k in range(n)],
                                  "label": [k % 3 for k in range(n)]}, features=feats)

    _publish(hub, "zh-plus/tiny-imagenet", {"train": split(6, 0), "valid": split(3, 50)})
    return {"train": Expect(6, 6), "test": Expect(3, 3)}


def write_cifar100(hub) -> dict[str, Expect]:
    """uoft-cs/cifar100: config ``cifar100``, ``img``, ``fine_label`` (ClassLabel, 100) and
    ``coarse_label`` (ClassLabel, 20); one undecodable train image."""
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"img": Image(),
                      "fine_label": ClassLabel(names=_names(["apple", "aquarium_fish"], 100)),
                      "coarse_label": ClassLabel(names=_names(["aquatic_mammals", "fish"], 20))})

    def split(n: int, offset: int, bad: bool = False) -> Dataset:
        images = [_png(hub, offset + k) for k in range(n)]
        if bad:
            images[-1] = _corrupt(hub)
        return Dataset.from_dict({"img": images, "fine_label": [5 * (k % 4) for k in range(n)],
                                  "coarse_label": [k % 4 for k in range(n)]}, features=feats)

    _publish(hub, "uoft-cs/cifar100", {"train": split(7, 0, bad=True), "test": split(3, 70)},
                config="cifar100", data_dir="cifar100")
    return {"train": Expect(7, 6, {"unreadable-image": 1}), "test": Expect(3, 3)}


FASHION_NAMES = ["T - shirt / top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                 "Sneaker", "Bag", "Ankle boot"]


def write_fashion_mnist(hub) -> dict[str, Expect]:
    """zalando-datasets/fashion_mnist: config ``fashion_mnist``, ``image`` (28x28 grey PNG) and
    ``label`` (ClassLabel, 10)."""
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"image": Image(), "label": ClassLabel(names=FASHION_NAMES)})

    def split(n: int, offset: int) -> Dataset:
        return Dataset.from_dict({"image": [_png(hub, offset + k, (28, 28), "L")
                                            for k in range(n)],
                                  "label": [k % 10 for k in range(n)]}, features=feats)

    _publish(hub, "zalando-datasets/fashion_mnist", {"train": split(6, 0), "test": split(3, 60)},
                config="fashion_mnist", data_dir="fashion_mnist")
    return {"train": Expect(6, 6), "test": Expect(3, 3)}


def write_caltech256(hub) -> dict[str, Expect]:
    """ilee0022/Caltech-256: ``image``, ``label`` (int64) and ``text`` (the class name); train,
    validation and test (TAP reads train and test); one undecodable test image."""
    from datasets import Dataset, Features, Image, Value

    feats = Features({"image": Image(), "label": Value("int64"), "text": Value("string")})

    def split(n: int, offset: int, bad: bool = False) -> Dataset:
        images = [_jpeg(hub, offset + k) for k in range(n)]
        if bad:
            images[0] = _corrupt(hub)
        return Dataset.from_dict({"image": images, "label": [k % 2 for k in range(n)],
                                  "text": [("ak47", "american-flag")[k % 2] for k in range(n)]},
                                 features=feats)

    _publish(hub, "ilee0022/Caltech-256", {"train": split(6, 0), "validation": split(2, 30),
                                         "test": split(7, 60, bad=True)})
    return {"train": Expect(6, 6), "test": Expect(7, 6, {"unreadable-image": 1})}


def write_ag_news(hub) -> dict[str, Expect]:
    """sh0416/ag_news: ``label`` (int64, 1-4), ``title``, ``description``; one train row has
    neither text."""
    from datasets import Dataset, Features, Value

    feats = Features({"label": Value("int64"), "title": Value("string"),
                      "description": Value("string")})

    def split(n: int, bad: bool = False) -> Dataset:
        titles = [f"Headline {k}" for k in range(n)]
        texts = [f"Story number {k}." for k in range(n)]
        if bad:
            titles[-1] = texts[-1] = ""
        return Dataset.from_dict({"label": [1 + k % 4 for k in range(n)], "title": titles,
                                  "description": texts}, features=feats)

    _publish(hub, "sh0416/ag_news", {"train": split(13, bad=True), "test": split(9)})
    return {"train": Expect(13, 12, {"missing-field": 1}), "test": Expect(9, 9)}


def write_mmlu(hub) -> dict[str, Expect]:
    """cais/mmlu: one config per subject with ``question``, ``subject``, ``choices`` (list of
    strings) and ``answer`` (ClassLabel A-D); test, validation and dev splits. TAP's three
    configs and one it does not read; one moral_scenarios answer outside its choices."""
    from datasets import ClassLabel, Dataset, Features, List, Value

    feats = Features({"question": Value("string"), "subject": Value("string"),
                      "choices": List(Value("string")),
                      "answer": ClassLabel(names=["A", "B", "C", "D"])})

    def part(cfg: str, n: int, bad: bool = False) -> Dataset:
        rows = {"question": [f"{cfg} question {k}?" for k in range(n)], "subject": [cfg] * n,
                "choices": [["first", "second", "third", "fourth"]] * n,
                "answer": [k % 4 for k in range(n)]}
        if bad:
            rows["choices"][-1], rows["answer"][-1] = ["only", "three", "options"], 3
        return Dataset.from_dict(rows, features=feats)

    configs = {cfg: {"test": part(cfg, 2, bad=cfg == "moral_scenarios"),
                     "validation": part(cfg, 1), "dev": part(cfg, 1)} for cfg in MMLU_CONFIGS}
    configs["anatomy"] = {"test": part("anatomy", 1)}  # the real repo has 57 subjects
    _publish(hub, "cais/mmlu", {}, configs=configs)
    return {"train": Expect(6, 5, {"choice-not-found": 1}), "test": Expect(3, 3)}


def write_vqav2(hub) -> dict[str, Expect]:
    """merve/vqav2-small: ``multiple_choice_answer``, ``question``, ``image``; one split,
    validation, that TAP shuffles (seed 42) and cuts; one training row has an empty answer."""
    from datasets import Dataset, Features, Image, Value

    n = VQA_TRAIN + 6
    feats = Features({"multiple_choice_answer": Value("string"), "question": Value("string"),
                      "image": Image()})
    answers = [("yes", "no", "2", "red")[k % 4] for k in range(n)]
    answers[int(np.random.default_rng(42).permutation(n)[0])] = ""  # a training row
    ds = Dataset.from_dict({"multiple_choice_answer": answers,
                            "question": [f"What is shown {k % 7}?" for k in range(n)],
                            "image": [_jpeg(hub, 1)] * n}, features=feats)
    _publish(hub, "merve/vqav2-small", {"validation": ds})
    return {"train": Expect(VQA_TRAIN, VQA_TRAIN - 1, {"empty-answer": 1}), "test": Expect(6, 6)}


def write_common_gen(hub) -> dict[str, Expect]:
    """allenai/common_gen: ``concept_set_idx`` (int32), ``concepts`` (list of strings),
    ``target``; train, validation and test (whose targets are empty, unread by TAP); one empty
    train target."""
    from datasets import Dataset, Features, List, Value

    feats = Features({"concept_set_idx": Value("int32"), "concepts": List(Value("string")),
                      "target": Value("string")})

    def split(n: int, empty: range = range(0)) -> Dataset:
        targets = ["" if k in empty else f"The dog runs in field {k}." for k in range(n)]
        return Dataset.from_dict({"concept_set_idx": [k // 2 for k in range(n)],
                                  "concepts": [["dog", "run", "field"]] * n, "target": targets},
                                 features=feats)

    _publish(hub, "allenai/common_gen", {"train": split(7, empty=range(6, 7)),
                                       "validation": split(6), "test": split(2, range(2))})
    return {"train": Expect(7, 6, {"empty-answer": 1}), "test": Expect(6, 6)}


WRITERS = {"tiny-imagenet": write_tiny_imagenet, "cifar100": write_cifar100,
           "fashion-mnist": write_fashion_mnist, "caltech256": write_caltech256,
           "ag-news": write_ag_news, "mmlu": write_mmlu, "vqav2-small": write_vqav2,
           "common-gen": write_common_gen}


@pytest.fixture(scope="module")
def tap_build(module_hub, tmp_path_factory):
    """The whole `tap` benchmark built from the filled cache, and what each split must hold."""
    spec = get_benchmark("tap")
    assert set(WRITERS) == {t.id for t in spec.tasks}
    expect = {task: write(module_hub) for task, write in WRITERS.items()}
    out = build(spec, tmp_path_factory.mktemp("tap-build"), cache_dir=module_hub.cache)
    return out, expect


def test_every_tap_set_builds_from_its_real_columns(tap_build):
    from datasets import load_dataset
    from PIL import Image

    out, expect = tap_build
    manifest = json.loads((out / "manifest.json").read_text())
    spec = get_benchmark("tap")
    assert set(manifest["tasks"]) == {t.id for t in spec.tasks}
    for task, splits in expect.items():
        counts = manifest["sources"][task]["splits"]
        for split, want in splits.items():
            assert counts[split] == want.counts(), (task, split)
            got = counts[split]
            assert got["kept"] + sum(got["rejected"].values()) == got["source_rows"]
            assert manifest["tasks"][task][split]["rows"] == want.kept > 0, (task, split)
    rejected = (out / "rejected.jsonl").read_text().splitlines()
    assert len(rejected) == sum(sum(w.rejected.values()) for s in expect.values()
                                for w in s.values())
    # reconstructions: [input, target], the target the input's own pixels
    for task, side in (("fashion-mnist", 64), ("caltech256", 12)):
        for row in load_dataset(str(out), task, split="test"):
            assert (row["answer_type"], row["prompt"], row["answer"]) == ("image", "<image>", "")
            source, target = row["images"]
            assert source.size == (side, side)
            assert np.array_equal(np.asarray(source), np.asarray(target))
    # the text sets fill TAP's templates, from the repos' own columns
    mmlu = load_dataset(str(out), "mmlu", split="train")
    assert {json.loads(m)["config"] for m in mmlu["meta"]} == set(MMLU_CONFIGS)
    cifar = load_dataset(str(out), "cifar100", split="train")[0]
    assert isinstance(cifar["images"][0], Image.Image) and cifar["answer"] == "apple"
    news = load_dataset(str(out), "ag-news", split="test")[0]
    assert (news["prompt"], news["answer"], news["label"]) == \
        ("Headline 0\nStory number 0.", "World", 0)
    vqa = load_dataset(str(out), "vqav2-small", split="test")[0]
    assert vqa["answer"].startswith("Answer: ") and len(vqa["images"]) == 1
    assert load_dataset(str(out), "common-gen", split="test")[0]["answer"] == \
        "Description: The dog runs in field 0."
    # every client of TAP's FLAVA layout holds training rows
    part = manifest["partitions"]["flava-30"]
    table = pq.read_table(out / part["file"]).to_pandas()
    assert sorted(table.loc[table["split"] == "train", "client"].unique()) == list(range(30))


def test_one_round_of_tap_fedavg_on_the_tiny_tap_model(tap_build, tmp_path, capsys):
    out, _ = tap_build
    run = tmp_path / "run"
    argv = ["eval", "--method", "tap-fedavg", "--data", str(out), "--scenario", "flava-30",
            "--model", "tiny-tap", "--rounds", "1", "--local-steps", "1", "--eval-per-task",
            "1", "--untrained", "--out", str(run)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads((run / "results.json").read_text())
    assert results["protocol"] == "generation"
    assert set(results["models_per_client"]) == {"tiny-tap"}
    # one view per task, named as TAP's leaderboard rows: flava-<dataset>
    views = {json.loads(p.read_text())["scenario"]["name"]: json.loads(p.read_text())
             for p in run.glob("results*.json")}
    assert {name: set(r["metrics"]) for name, r in views.items()} == {
        "flava-tinyimagenet": {"accuracy"}, "flava-cifar100": {"accuracy"},
        "flava-fmnist": {"mse"}, "flava-caltech256": {"mse"}, "flava-agnews": {"accuracy"},
        "flava-mmlu": {"bertscore_f1", "meteor"}, "flava-vqa": {"bertscore_f1", "meteor"},
        "flava-commongen": {"bertscore_f1", "meteor"}}
    for name in ("flava-fmnist", "flava-caltech256"):
        assert 0 < views[name]["metrics"]["mse"] < 1
