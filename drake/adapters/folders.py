"""Classification sources that are local folders: Office-Caltech10 and the UCF101 mid-frames.

Neither is on the Hub, so the user downloads them and passes the folder with ``--source-dir``.
Samples have the same form as :mod:`drake.adapters.classification` (prompt ``"<image>"``, answer =
class name, label = class id, empty choices, the CoOp / pFedMMA template filled in
``meta["text"]``); image bytes are the files' own (JPEG stays JPEG).

``FedBNFolderAdapter`` (kind ``"fedbn-folder"``)
    FedBN's ``office_caltech_10`` folder: ``<domain>/<class>/<image>`` for the declared domains
    (amazon, caltech, dslr, webcam) and classes. FedBN ships its train/test lists as pickles
    (``<domain>_train.pkl``); this suite never loads pickle, so the split is ours: seeded and
    stratified per (domain, class), ``test_fraction`` (0.2, as FedBN's stratified splits) with
    ``split_seed``. Files of undeclared class folders are dropped by rule ``class-not-in-subset``.
``ImageFolderAdapter`` (kind ``"local-image-folder"``)
    CoOp's UCF101 layout: ``UCF-101-midframes/<Class_Name>/<frame>.jpg`` (``image_dir``), with
    CoOp's ``split_zhou_UCF101.json`` (``split_file``: ``{"train"|"val"|"test": [[impath, label,
    classname], ...]}``, read as JSON) next to it when present; its ``val`` part is unused.
    Without the JSON the classes are the sorted folder names and the split is seeded and
    stratified per class (``test_fraction``, ``split_seed``).

Rows are rejected with reason ``unreadable-image`` (a file that does not decode, or a split entry
whose file is gone).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drake.adapters.base import Adapter, AdapterOptions, Conversion
from drake.adapters.confine import MAX_IMAGE_BYTES, confined, read_capped
from drake.adapters.hubdata import (
    derived_rows,
    display_name,
    dump_meta,
    fill_template,
    image_problem,
    keep_until_cap,
    norm_key,
    reject,
)
from drake.errors import BuildError
from drake.schema import IMAGE_TOKEN
from drake.specs import TaskSpec

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"})
FEDBN_HINT = (
    "download office_caltech_10_dataset.zip from the FedBN repository "
    "(https://github.com/med-air/FedBN, README section 'Dataset & Pretrained Model', "
    "office-caltech10), unzip it, and pass the unzipped office_caltech_10 folder (or its parent) "
    "as --source-dir")
UCF_HINT = (
    "prepare CoOp's UCF101 folder (the UCF-101-midframes images and split_zhou_UCF101.json, see "
    "CoOp's DATASETS.md, https://github.com/KaiyangZhou/CoOp) and pass it as --source-dir")


@dataclass(frozen=True)
class Entry:
    """One image file of a split: its path under the root, class and domain."""

    rel: str
    label: int | None  # None: a class we do not keep
    domain: str = ""


@dataclass
class FolderIndex:
    root: Path
    names: tuple[str, ...]  # display names by label
    raw: tuple[str, ...]    # folder / source spellings by label
    splits: dict[str, list[Entry]]
    rule: str               # how the split was made (recorded in meta)


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _read_image(root: Path, rel: str) -> bytes | None:
    """The bytes of ``root/rel``; ``None`` when absent. Raises ``UnsafeSource`` (an OSError) for
    a path that leaves the folder or goes through a link, and for a file over the image cap."""
    path = confined(root, rel)
    return read_capped(path, MAX_IMAGE_BYTES, "image") if path.is_file() else None


def _subdirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _stratified(entries: list[Entry], keys: Sequence[str], args: Mapping[str, Any],
                seed: int) -> dict[str, list[Entry]]:
    rule = {"fraction": float(args.get("test_fraction", 0.2)),
            "seed": int(args.get("split_seed", seed)), "stratify": True}
    out = {}
    for split in ("train", "test"):
        rows = derived_rows(len(entries), split, rule, labels=list(keys), default_seed=seed)
        out[split] = [entries[i] for i in rows]
    return out


class _FolderAdapter(Adapter):
    """The shared two passes; subclasses build the :class:`FolderIndex`."""

    layout = ""

    def __init__(self, options: AdapterOptions) -> None:
        super().__init__(options)
        self._index: dict[str, FolderIndex] = {}

    def _source_dir(self, task: TaskSpec, hint: str) -> Path:
        src = self.options.source_dir
        if src is None:
            raise BuildError(f"task {task.id} is read from a local folder, not the Hub, and no "
                             f"--source-dir was given: {hint}")
        src = Path(src).expanduser()
        if not src.is_dir():
            raise BuildError(f"--source-dir {src} is not a folder; {hint}")
        return src

    @abstractmethod
    def _build(self, task: TaskSpec) -> FolderIndex:
        """Index the task's folder: classes, entries and the split rule."""

    def index(self, task: TaskSpec) -> FolderIndex:
        if task.id not in self._index:
            self._index[task.id] = self._build(task)
        return self._index[task.id]

    def class_names(self, task: TaskSpec) -> list[str]:
        """The task's classes in label order, as prompts and answers write them."""
        return list(self.index(task).names)

    def prefetch(self, tasks: list[TaskSpec]) -> None:
        """Check the folder layout of every task before converting (fails before writing)."""
        for task in tasks:
            self.index(task)

    def describe(self, task: TaskSpec) -> dict[str, Any]:
        """Layout, split rule and class list, for the manifest (no local paths)."""
        idx = self.index(task)
        return {"from": "source-dir", "layout": self.layout, "split_rule": idx.rule,
                "classes": list(idx.names)}

    def _check_count(self, task: TaskSpec, names: Sequence[str], where: Path) -> None:
        expected = task.source_args.get("num_classes")
        if expected is not None and len(names) != int(expected):
            raise BuildError(f"{where}: task {task.id} declares num_classes={expected} but the "
                             f"folder has {len(names)} classes; check --source-dir or the "
                             f"declaration in drake/catalog/others.py")

    def convert(self, task: TaskSpec, split: str) -> Conversion:
        idx = self.index(task)
        entries = idx.splits.get(split)
        if entries is None:
            raise BuildError(f"task {task.id} has no split {split!r} (it has {sorted(idx.splits)})")
        conv = Conversion(task=task.id, split=split, source_rows=len(entries))
        candidates = []
        for e in entries:
            if e.label is None:
                conv.dropped["class-not-in-subset"] += 1
            else:
                candidates.append({"path": e.rel, "label": e.label, "domain": e.domain})

        def read(cands: list[dict[str, Any]]):
            for c in cands:
                try:
                    yield _read_image(idx.root, c["path"])
                except OSError as exc:  # outside the folder, a link, too large: say which
                    yield str(exc)

        def check(rec: dict[str, Any], data: bytes | str | None):
            where = str(idx.root / rec["path"])
            problem = ("file not found" if data is None else data if isinstance(data, str)
                       else image_problem(data))
            if problem:
                return reject(task, split, rec["path"], "unreadable-image", problem, where)
            return None

        keep_until_cap(conv, task, candidates, read, check, seed=self.options.seed)
        return conv

    def sample(self, task: TaskSpec, split: str, record: Any, index: int) -> dict[str, Any]:
        idx = self.index(task)
        rel, label = str(record["path"]), int(record["label"])
        name = idx.names[label]
        template = str(task.source_args.get("template") or task.prompt_template or "")
        meta: dict[str, Any] = {"source_path": rel, "source_class": idx.raw[label],
                                "class_name": name, "split_rule": idx.rule}
        text = fill_template(template, name)
        if text:
            meta["text"], meta["template"] = text, template
        stem = rel.rsplit(".", 1)[0].replace("/", "-")
        return {
            "id": f"{task.id}-{stem}", "task": task.id,
            "images": [_read_image(idx.root, rel)], "prompt": IMAGE_TOKEN, "answer": name,
            "choices": [], "answer_type": "classification", "label": label,
            "domain": str(record.get("domain") or ""), "meta": dump_meta(meta),
        }


class FedBNFolderAdapter(_FolderAdapter):
    """Office-Caltech10 from FedBN's ``office_caltech_10`` folder (see the module docstring)."""

    kind = "fedbn-folder"
    layout = "FedBN office_caltech_10/<domain>/<class>/<image>"

    def _build(self, task: TaskSpec) -> FolderIndex:
        args = task.source_args
        src = self._source_dir(task, FEDBN_HINT)
        domains = [str(d) for d in args.get("domains") or []]
        classes = [str(c) for c in args.get("classes") or []]
        if not domains or not classes:
            raise BuildError(f"task {task.id}: declare 'domains' and 'classes' in source_args")
        folder = str(args.get("folder", "office_caltech_10"))
        root = next((c for c in (src / folder, src)
                     if all((c / d).is_dir() for d in domains)), None)
        if root is None:
            missing = [d for d in domains if not (src / d).is_dir()]
            raise BuildError(
                f"{src}: FedBN's Office-Caltech10 layout has one folder per domain {domains}, "
                f"each holding the class folders {classes}; missing {missing}; {FEDBN_HINT}")
        by_key = {norm_key(c): i for i, c in enumerate(classes)}
        entries: list[Entry] = []
        keys: list[str] = []
        for domain in domains:
            found = {norm_key(p.name): p for p in _subdirs(root / domain)}
            absent = [c for c in classes if norm_key(c) not in found]
            if absent:
                raise BuildError(f"{root / domain}: class folder(s) {absent} missing; the FedBN "
                                 f"layout is <domain>/<class>/<image>; {FEDBN_HINT}")
            for key, class_dir in sorted(found.items()):
                for image in _images(class_dir):
                    entries.append(Entry(image.relative_to(root).as_posix(), by_key.get(key),
                                         domain))
                    keys.append(f"{domain}/{key}")
        self._check_count(task, classes, root)
        rule = (f"seeded ({args.get('split_seed', self.options.seed)}) stratified "
                f"{1 - float(args.get('test_fraction', 0.2)):.0%} / "
                f"{float(args.get('test_fraction', 0.2)):.0%} per (domain, class)")
        return FolderIndex(root, tuple(display_name(c) for c in classes), tuple(classes),
                           _stratified(entries, keys, args, self.options.seed), rule)


class ImageFolderAdapter(_FolderAdapter):
    """UCF101 mid-frames in CoOp's layout (see the module docstring)."""

    kind = "local-image-folder"
    layout = "CoOp UCF-101-midframes/<Class_Name>/<image> (+ split_zhou_UCF101.json)"

    def _build(self, task: TaskSpec) -> FolderIndex:
        args = task.source_args
        src = self._source_dir(task, UCF_HINT)
        image_dir = str(args.get("image_dir", ""))
        root = src / image_dir if image_dir and (src / image_dir).is_dir() else src
        split_name = args.get("split_file")
        split_file = None
        if split_name:
            split_file = next((p for p in (src / split_name, root.parent / split_name,
                                           root / split_name) if p.is_file()), None)
        if split_file is not None:
            return self._from_split_file(task, root, split_file)
        classes = [p.name for p in _subdirs(root)]
        if not classes:
            raise BuildError(f"{root}: no class folders (<class>/<image>) found; {UCF_HINT}")
        entries, keys = [], []
        for label, name in enumerate(classes):
            for image in _images(root / name):
                entries.append(Entry(image.relative_to(root).as_posix(), label))
                keys.append(str(label))
        self._check_count(task, classes, root)
        rule = (f"no {split_name or 'split file'}: seeded "
                f"({args.get('split_seed', self.options.seed)}) stratified split per class, "
                f"test fraction {float(args.get('test_fraction', 0.2))}")
        return FolderIndex(root, tuple(display_name(c) for c in classes), tuple(classes),
                           _stratified(entries, keys, args, self.options.seed), rule)

    def _from_split_file(self, task: TaskSpec, root: Path, path: Path) -> FolderIndex:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BuildError(f"{path}: not a readable JSON split file ({exc}); fix or remove it "
                             f"to fall back to a seeded split") from None
        if not isinstance(data, dict) or not {"train", "test"} <= set(data):
            raise BuildError(f"{path}: a CoOp split file holds 'train' and 'test' lists")
        raw: dict[int, str] = {}
        splits: dict[str, list[Entry]] = {}
        for split in ("train", "test"):
            splits[split] = []
            for k, item in enumerate(data[split]):
                ok = (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                      and isinstance(item[1], int) and isinstance(item[2], str))
                if not ok:
                    raise BuildError(f"{path}: {split}[{k}] is {item!r}, not [impath, label, "
                                     f"classname]")
                if raw.setdefault(item[1], item[2]) != item[2]:
                    raise BuildError(f"{path}: label {item[1]} is named both {raw[item[1]]!r} "
                                     f"and {item[2]!r}")
                splits[split].append(Entry(item[0], item[1]))
        labels = sorted(raw)
        if labels != list(range(len(labels))):
            raise BuildError(f"{path}: labels must run 0..C-1, got {labels[:5]}...")
        classes = [raw[i] for i in labels]
        self._check_count(task, classes, path)
        return FolderIndex(root, tuple(display_name(c) for c in classes), tuple(classes),
                           splits, f"CoOp split file {path.name} (train / test; val unused)")
