"""The real-data path of pFedMMA's CLIP benchmarks, end to end and offline.

For each benchmark the test writes a native-format fixture (a cached Hub snapshot with the real
repo's column names, ``ClassLabel`` features, config and split names, or, for UCF101, CoOp's
folder with its ``split_zhou_UCF101.json``), builds it with ``drake.build.build`` and one of the
paper's scenarios, and runs one federated round of pFedMMA on ``tiny-clip`` (the CLIP
benchmarks declare no model mix, so the protocol's offline default is what runs). It checks
that the manifest's counts reconcile with the bad rows the fixture holds, that every client of
the scenario gets rows, and that the results carry the protocol's metrics.

Office-Caltech10 is not here: its source is FedBN's folder (``fedbn-folder``), not the Hub.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from drake.build import build
from drake.catalog.others import CLIP_DATASETS, DOMAINNET_CLASSES, DOMAINNET_DOMAINS
from drake.registry import get_benchmark
from drake.runtime.local import LocalRuntime, RunConfig

BASE_NOVEL = {"local", "base", "novel", "hm"}
CLIP_PRESENT = 20  # classes with rows in a CLIP fixture: 10 base (one per client), 10 novel
CLIP_SCENARIO = "pathological-1shot"  # pFedMMA's base-to-novel split, 1 shot per base class


@dataclass(frozen=True)
class Expect:
    """What the fixture puts in one task split: its source rows and where they must go."""

    source_rows: int
    kept: int
    dropped: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, Any]:
        return {"source_rows": self.source_rows, "kept": self.kept, "dropped": self.dropped,
                "rejected": self.rejected}


@dataclass(frozen=True)
class Case:
    """One benchmark: its fixture writer, the scenario run, and what the run must report."""

    benchmark: str
    scenario: str
    write: Callable[..., dict[str, Expect] | tuple[dict[str, Expect], Path]]
    clients: int
    protocol: str
    metrics: set[str]
    params: dict[str, Any] = field(default_factory=dict)  # scenario params overridden


# --- fixtures in the sources' own formats -----------------------------------------------------


def _names(head: list[str], n: int) -> list[str]:
    """A full-length class list: the head as the repo spells it, placeholders after it (only the
    count, and the spellings the catalog names, matter to the adapter)."""
    return head + [f"class_{i:03d}" for i in range(len(head), n)]


def _image(hub, k: int, *, jpeg: bool = False) -> dict[str, Any]:
    """A small image stored as the Hub's parquet ``Image`` feature stores it; ``k`` varies its
    colour so rows differ."""
    colour = (37 * k % 256, 91 * k % 256, 53 * k % 256)
    data = hub.jpeg(colour, (12, 12)) if jpeg else hub.png(colour, (12, 12))
    return {"bytes": data, "path": None}


CLIP_HEADS: dict[str, list[str]] = {
    # timm/oxford-iiit-pet: lower-case breeds with underscores
    "oxford_pets": ["abyssinian", "american_bulldog", "american_pit_bull_terrier",
                    "basset_hound", "beagle", "bengal", "birman", "bombay", "boxer",
                    "british_shorthair"],
    "flowers102": ["pink primrose", "hard-leaved pocket orchid", "canterbury bells", "sweet pea",
                   "english marigold", "tiger lily", "moon orchid", "bird of paradise"],
    "dtd": ["banded", "blotchy", "braided", "bubbly", "bumpy", "chequered", "cobwebbed",
            "cracked", "crosshatched", "crystalline"],
    # flwrlabs/caltech101 (102 names; the order here is not the repo's): the spellings CoOp
    # drops (background_google, faces_easy) and renames (airplanes, faces, leopards, motorbikes)
    "caltech101": ["accordion", "airplanes", "anchor", "ant", "background_google", "barrel",
                   "bass", "beaver", "binocular", "bonsai", "brain", "faces", "faces_easy",
                   "leopards", "motorbikes"],
    "food101": ["apple_pie", "baby_back_ribs", "baklava", "beef_carpaccio", "beef_tartare",
                "beet_salad", "beignets", "bibimbap"],
    "sun397": ["abbey", "airplane_cabin", "airport_terminal", "alley", "amphitheater"],
}
# each CLIP source's splits: (train source split, test source split or None, other splits)
CLIP_SPLITS: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "oxford_pets": ("train", "test", ()),
    "flowers102": ("train", "test", ("validation",)),  # validation unused
    "dtd": ("train", "test", ()),
    "caltech101": ("train", None, ()),  # train only: the catalog derives test (70/30)
    "food101": ("train", "validation", ()),  # Food-101's test set is the Hub's validation
    "sun397": ("train", "test", ()),
}


def write_clip_hub(hub, tmp_path: Path, name: str) -> dict[str, Expect]:
    """A CLIP base/novel source as its Hub repo holds it: ``image`` + ``label`` (pets add
    ``image_id`` and ``label_cat_dog``), the repo's splits, a full-length class list, rows for
    ``CLIP_PRESENT`` classes and one undecodable image in train."""
    from datasets import ClassLabel, Dataset, Features, Image, Value

    repo, n_cls, _ = CLIP_DATASETS[name]
    exclude = {"background_google", "faces_easy"} if name == "caltech101" else set()
    names = _names(CLIP_HEADS[name], n_cls + len(exclude))
    feats = {"image": Image(), "label": ClassLabel(names=names)}
    if name == "oxford_pets":
        feats |= {"image_id": Value("string"), "label_cat_dog": ClassLabel(names=["cat", "dog"])}
    present = [i for i, n in enumerate(names) if n not in exclude][:CLIP_PRESENT]
    per_train = 3 if name == "caltech101" else 2  # caltech: 1 of 3 goes to the derived test
    train_src, test_src, others = CLIP_SPLITS[name]

    def split(labels: list[int], *, bad: bool = False, offset: int = 0) -> Dataset:
        # JPEG as the photo sets store it; DTD's fixture is PNG so that both encodings pass
        images = [_image(hub, offset + k, jpeg=name != "dtd") for k in range(len(labels))]
        if bad:
            labels, images = labels + [present[0]], images + [{"bytes": hub.corrupt,
                                                               "path": None}]
        cols: dict[str, list] = {"image": images, "label": labels}
        if name == "oxford_pets":
            cols["image_id"] = [f"img_{offset + k}" for k in range(len(labels))]
            cols["label_cat_dog"] = [lbl % 2 for lbl in labels]
        return Dataset.from_dict(cols, features=Features(feats))

    train_labels = [c for c in present for _ in range(per_train)]
    dropped: dict[str, int] = {}
    if exclude:  # rows of the classes CoOp drops
        train_labels += [names.index("faces_easy"), names.index("background_google")]
        dropped = {"excluded-class": 2}
    splits = {train_src: split(train_labels, bad=True)}
    if test_src:
        splits[test_src] = split(list(present), offset=1000)
    for other in others:
        splits[other] = split(list(present[:2]), offset=2000)
    hub.publish(repo, splits)
    if name == "caltech101":  # stratified 70/30 of each class: 2 train, 1 test
        return {"all": Expect(len(train_labels) + 1, CLIP_PRESENT * per_train, dropped,
                              {"unreadable-image": 1})}
    return {"train": Expect(len(train_labels) + 1, len(train_labels), dropped,
                            {"unreadable-image": 1}),
            "test": Expect(CLIP_PRESENT, CLIP_PRESENT)}


UCF_HEAD = ["Apply_Eye_Makeup", "Apply_Lipstick", "Archery", "Baby_Crawling", "Balance_Beam"]


def write_ucf101(hub, tmp_path: Path, name: str) -> tuple[dict[str, Expect], Path]:
    """CoOp's UCF101 folder: ``UCF-101-midframes/<Class>/<frame>.jpg`` and
    ``split_zhou_UCF101.json`` (``[impath, label, classname]`` lists) beside it. The split
    file's labels must run over all 101 classes, so every class has two training frames and
    one test frame; one training frame does not decode; ``val`` is unused."""
    root = tmp_path / "ucf"
    frames = root / "UCF-101-midframes"
    classes = _names(UCF_HEAD, CLIP_DATASETS["ucf101"][1])
    split: dict[str, list] = {"train": [], "val": [], "test": []}
    for label, cls in enumerate(classes):
        (frames / cls).mkdir(parents=True)
        for g, part in ((1, "train"), (2, "train"), (3, "test"), (4, "val")):
            rel = f"{cls}/v_{cls.replace('_', '')}_g{g:02d}_c01.jpg"
            (frames / rel).write_bytes(hub.jpeg((label * 2 % 256, g * 40, 90), (12, 12)))
            split[part].append([rel, label, cls])
    bad = f"{classes[0]}/v_broken_g05_c01.jpg"
    (frames / bad).write_bytes(hub.corrupt)
    split["train"].append([bad, 0, classes[0]])
    (root / "split_zhou_UCF101.json").write_text(json.dumps(split))
    n = len(classes)
    return {"train": Expect(2 * n + 1, 2 * n, {}, {"unreadable-image": 1}),
            "test": Expect(n, n)}, root


CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck"]


def write_cifar10(hub, tmp_path: Path, name: str) -> dict[str, Expect]:
    """uoft-cs/cifar10: config ``plain_text``, columns ``img`` and ``label``; 6 train and 3 test
    images per class, one undecodable train image and one unlabelled test row."""
    from datasets import ClassLabel, Dataset, Features, Image

    feats = Features({"img": Image(), "label": ClassLabel(names=CIFAR10)})
    train = [c for c in range(10) for _ in range(6)]
    test = [c for c in range(10) for _ in range(3)]
    hub.publish("uoft-cs/cifar10", {
        "train": Dataset.from_dict(
            {"img": [_image(hub, k) for k in range(len(train))] + [{"bytes": hub.corrupt,
                                                                     "path": None}],
             "label": train + [4]}, features=feats),
        "test": Dataset.from_dict(
            {"img": [_image(hub, 500 + k) for k in range(len(test) + 1)],
             "label": test + [None]}, features=feats),
    }, config="plain_text", data_dir="plain_text")
    return {"train": Expect(61, 60, {}, {"unreadable-image": 1}),
            "test": Expect(31, 30, {}, {"missing-field": 1})}


def write_cifar100(hub, tmp_path: Path, name: str) -> dict[str, Expect]:
    """uoft-cs/cifar100: config ``cifar100``, columns ``img``, ``fine_label`` (100 classes) and
    ``coarse_label`` (20 superclasses); 20 fine classes, one per superclass, with 4 train and 2
    test images each, and one undecodable train image."""
    from datasets import ClassLabel, Dataset, Features, Image

    fine_names = _names(["apple", "aquarium_fish", "baby", "bear", "beaver"], 100)
    coarse_names = _names(["aquatic_mammals", "fish", "flowers", "food_containers"], 20)
    feats = Features({"img": Image(), "fine_label": ClassLabel(names=fine_names),
                      "coarse_label": ClassLabel(names=coarse_names)})
    fine = list(range(0, 100, 5))  # fine class 5c sits under superclass c

    def split(per_class: int, offset: int, bad: bool = False) -> Dataset:
        labels = [f for f in fine for _ in range(per_class)]
        images = [_image(hub, offset + k) for k in range(len(labels))]
        if bad:
            labels, images = labels + [fine[0]], images + [{"bytes": hub.corrupt, "path": None}]
        return Dataset.from_dict({"img": images, "fine_label": labels,
                                  "coarse_label": [f // 5 for f in labels]}, features=feats)

    hub.publish("uoft-cs/cifar100", {"train": split(4, 0, bad=True), "test": split(2, 500)},
                config="cifar100", data_dir="cifar100")
    return {"train": Expect(81, 80, {}, {"unreadable-image": 1}), "test": Expect(40, 40)}


def write_domainnet(hub, tmp_path: Path, name: str) -> dict[str, Expect]:
    """wltjr1007/DomainNet: ``image``, ``label`` (345 classes) and ``domain`` (the domain's
    name, a string as in the repo's card); the 10 FedBN classes in all 6 domains with 3 train and 2 test images each, plus
    training rows of an undeclared class and one undecodable image."""
    from datasets import ClassLabel, Dataset, Features, Image, Value

    extra = ["aircraft_carrier", "airplane", "alarm_clock"]
    names = sorted(set(DOMAINNET_CLASSES) | set(extra)
                   | {f"class_{i:03d}" for i in range(345 - len(DOMAINNET_CLASSES) - len(extra))})
    feats = Features({"image": Image(), "label": ClassLabel(names=names),
                      "domain": Value("string")})

    def split(per_cell: int, offset: int, tail: list[tuple[str, str, bytes | None]]) -> Dataset:
        cells = [(c, d) for d in DOMAINNET_DOMAINS for c in DOMAINNET_CLASSES
                 for _ in range(per_cell)]
        images = [_image(hub, offset + k, jpeg=True) for k in range(len(cells))]
        images += [{"bytes": data or hub.jpeg(), "path": None} for _, _, data in tail]
        cells += [(c, d) for c, d, _ in tail]
        return Dataset.from_dict({"image": images,
                                  "label": [names.index(c) for c, _ in cells],
                                  "domain": [d for _, d in cells]}, features=feats)

    tail = [("airplane", "real", None), ("airplane", "sketch", None),
            ("zebra", "clipart", hub.corrupt)]
    hub.publish("wltjr1007/DomainNet", {"train": split(3, 0, tail), "test": split(2, 1000, [])})
    return {"train": Expect(183, 180, {"class-not-in-subset": 2}, {"unreadable-image": 1}),
            "test": Expect(120, 120)}


CASES = {
    **{name: Case(f"clip-base2novel/{name}", CLIP_SCENARIO, write_clip_hub, 10, "base_novel",
                  BASE_NOVEL) for name in CLIP_HEADS},
    "ucf101": Case("clip-base2novel/ucf101", CLIP_SCENARIO, write_ucf101, 10, "base_novel",
                   BASE_NOVEL),
    # the paper splits CIFAR over 100 clients with >= 10 train and >= 10 test rows each; here
    # 4 clients with >= 2 and >= 1, which 60 train and 30 test images meet
    "cifar10": Case("cifar10-dir", "dir-alpha0.5", write_cifar10, 4, "classification",
                    {"accuracy"}, {"num_clients": 4, "min_size": 2, "test_min_size": 1}),
    # the hierarchical split pools train and test and deals 30 rows to each of 4 clients
    # (the paper: 100 clients)
    "cifar100": Case("cifar100-dir", "dir-alpha0.5", write_cifar100, 4, "classification",
                     {"accuracy"}, {"num_clients": 4}),
    # pFedMMA's Tab. 3 as declared: two clients per domain (12 clients), beta 0.5
    "domainnet": Case("domainnet", "dir-alpha0.5-2clients-per-domain", write_domainnet, 12,
                      "classification", {"accuracy", *(f"acc_{d}" for d in DOMAINNET_DOMAINS)}),
}


def _spec(case: Case):
    """The registered spec with only the scenario the case runs (its params overridden)."""
    spec = get_benchmark(case.benchmark)
    scenario = next(s for s in spec.scenarios if s.name == case.scenario)
    if case.params:
        scenario = replace(scenario, params={**scenario.params, **case.params})
    return replace(spec, scenarios=(scenario,))


def _check_counts(counts: dict[str, dict[str, Any]], expect: dict[str, Expect]) -> None:
    """Every source row is kept, dropped by a named rule or rejected with a reason, as the
    fixture says; ``expect["all"]`` covers a test split derived from the train split."""
    for c in counts.values():
        assert c["kept"] + sum(c["dropped"].values()) + sum(c["rejected"].values()) \
            == c["source_rows"]
    if "all" not in expect:
        assert counts == {split: e.counts() for split, e in expect.items()}
        return
    total = {"source_rows": 0, "kept": 0, "dropped": {}, "rejected": {}}
    for c in counts.values():
        total["source_rows"] += c["source_rows"]
        total["kept"] += c["kept"]
        for kind in ("dropped", "rejected"):
            for reason, n in c[kind].items():
                total[kind][reason] = total[kind].get(reason, 0) + n
    assert total == expect["all"].counts()
    assert counts["test"]["kept"] == CLIP_PRESENT  # one of each class's three rows


def _check_partition(out: Path, manifest: dict[str, Any], case: Case) -> None:
    """Every client gets training rows and (but under the pooled hierarchical split, which
    may leave a client none) test rows of its own; base-to-novel trains on one shot of each
    base class (the first half of the classes) and leaves the novel test rows to no client."""
    from drake.scenarios import read_columns

    entry = manifest["partitions"][case.scenario]
    assert entry["clients"] == case.clients
    table = pq.read_table(out / entry["file"]).to_pandas()
    train, test = table[table["split"] == "train"], table[table["split"] == "test"]
    assert sorted(train["client"].unique()) == list(range(case.clients))
    if entry["scenario"]["partition"] != "dirichlet_hierarchical":
        assert sorted(test.loc[test["client"] >= 0, "client"].unique()) == \
            list(range(case.clients))
    if case.protocol == "base_novel":
        labels = read_columns(out, manifest, "train", ("id", "label")).set_index("id")["label"]
        shots = train["id"].map(labels)
        n_base = -(-labels.nunique() // 2)
        assert shots.is_unique and sorted(shots) == list(range(n_base))
        assert (test["client"] == -1).any()


@pytest.mark.parametrize("key", list(CASES))
def test_real_source_builds_and_runs_one_pfedmma_round(hub, tmp_path, key):
    case = CASES[key]
    written = case.write(hub, tmp_path, key)
    expect, source_dir = written if isinstance(written, tuple) else (written, None)
    spec = _spec(case)
    out = build(spec, tmp_path / "out", cache_dir=hub.cache, source_dir=source_dir)
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["sources"][spec.tasks[0].id]["splits"]
    _check_counts(counts, expect)
    rejected = (out / "rejected.jsonl").read_text().splitlines()
    assert len(rejected) == manifest["rejected"]["rows"] == sum(
        sum(c["rejected"].values()) for c in counts.values())
    _check_partition(out, manifest, case)

    cfg = RunConfig(data=str(out), scenario=case.scenario, method="pfedmma",
                    out=str(tmp_path / "run"), rounds=1, local_steps=1, eval_per_task=2)
    results = LocalRuntime(cfg).run()
    assert results["protocol"] == case.protocol
    assert set(results["metrics"]) == case.metrics
    assert all(0.0 <= v <= 100.0 for v in results["metrics"].values())
    if case.protocol == "base_novel":
        from evaluators import base_novel_hm

        m = results["metrics"]
        assert m["hm"] == pytest.approx(base_novel_hm(m["local"], m["base"], m["novel"]))
    # no model mix is declared: every client runs the protocol's offline default
    assert results["models_per_client"] == ["tiny-clip"] * case.clients
    # the round ran: uploads went up, one evaluation point followed, no client failed, and
    # the server's aggregate waits for every client
    assert results["curves"]["rounds"] == [1]
    assert len(results["cost"]["comm_bytes_up_per_round"]) == 1
    assert results["cost"]["comm_bytes_up_per_round"][0] > 0
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert state["round"] == 0 and not state["errors"]
    assert sorted(map(int, state["pending"])) == list(range(case.clients))
