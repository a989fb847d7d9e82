"""Hub image-classification sources: the CLIP base/novel sets, CIFAR-10/100 and DomainNet.

Source kind ``"hf-classification"``. A task names a Hub dataset (``source_args["repo"]``, pinned by
``--revision`` or ``source_args["revision"]``); the adapter opens it with
``datasets.load_dataset`` and maps each row to one classification sample.

Sample form (decided here, the same for every classification source)
---------------------------------------------------------------------
``prompt``
    ``"<image>"``: the image is the whole input. A CLIP-style model builds its text side from the
    class list; a generative model answers with the class name.
``answer`` / ``label``
    The class name as prompts write it (CoOp renames applied, ``_`` as spaces) and its id.
``choices``
    Always empty: the schema keeps choice lists for multiple choice. The class list, in label
    order, is the task's declared ``classes`` or the source's ``ClassLabel`` names;
    :meth:`HubClassificationAdapter.class_names` returns it for the manifest and the card.
``domain``
    The DomainNet domain; empty for single-domain sources.
``meta``
    ``class_name``, ``source_class`` (the source spelling), ``text`` (the task's CoOp template
    filled with the class name: the gold text-side prompt), ``template``, and the source
    coordinates (repo, revision, split, row); CIFAR-100 adds ``coarse_label``.

Columns are found from the dataset's features: the ``Image`` column, and the label column
(``label``, then ``fine_label``, else the only ``ClassLabel``). ``source_args`` overrides:
``image_column``, ``label_column``, ``domain_column``, ``coarse_column``, ``classes`` (a subset,
in our label order; other classes are dropped by rule ``class-not-in-subset``),
``exclude_classes`` (dropped by rule ``excluded-class``), ``rename`` (CoOp's spelling fixes),
``lowercase`` (CoOp lower-cases the Oxford Pets breeds), ``template`` (else the task's
``prompt_template``), ``resize`` (decode to RGB ``N`` x ``N``, stored as PNG),
``label_offset`` (AG News counts from 1), ``num_classes`` (checked), ``domains`` (a subset;
others dropped by rule ``domain-not-in-subset``), ``splits`` (our split -> source split) and
``derive_test`` (a seeded split rule for a source with no test split, see
:func:`drake.adapters.hubdata.derived_rows`).

Rows are rejected with reason ``missing-field`` (no label, no image, no domain) or
``unreadable-image`` (the bytes do not decode in full).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drake.adapters.base import AdapterOptions, Conversion, CoreAdapter, Rejection
from drake.adapters.hubdata import (
    column_values,
    derived_rows,
    display_name,
    dump_meta,
    fill_template,
    image_bytes,
    image_problem,
    iter_rows,
    keep_until_cap,
    load_snapshot,
    norm_key,
    pick_split,
    raw_images,
    reject,
    rgb_png,
    sort_rejections,
)
from drake.errors import BuildError
from drake.schema import IMAGE_TOKEN
from drake.specs import TaskSpec

log = logging.getLogger(__name__)

LABEL_COLUMNS = ("label", "fine_label", "labels", "y")
IMAGE_COLUMNS = ("image", "img")
DOMAIN_COLUMNS = ("domain",)
PATH_COLUMNS = ("image_path", "file_name", "path")


@dataclass(frozen=True)
class ClassTable:
    """Our class list and how source label ids map onto it.

    ``names[i]`` / ``raw[i]`` are the display and source spellings of our label ``i``;
    ``by_source`` maps a source label id to ours; ``drop_rule`` names the rule that drops a
    source label id we do not keep.
    """

    names: tuple[str, ...]
    raw: tuple[str, ...]
    by_source: Mapping[int, int]
    drop_rule: Mapping[int, str] = field(default_factory=dict)


def class_table(source_names: Sequence[str], args: Mapping[str, Any], *, subset_ok: bool,
                where: str) -> ClassTable:
    """Resolve the declared ``classes`` / ``exclude_classes`` / ``rename`` against the source.

    Raises
    ------
    BuildError
        A declared class is not in the source, or the class count differs from ``num_classes``.
    """
    rename = args.get("rename") or {}
    declared = list(args.get("classes") or []) if subset_ok else []
    by_key = {norm_key(n): i for i, n in enumerate(source_names)}
    if declared:
        missing = [c for c in declared if norm_key(c) not in by_key]
        if missing:
            raise BuildError(
                f"{where}: declared classes {missing} are not among the source's "
                f"{len(source_names)} class names (e.g. {list(source_names)[:8]}); fix 'classes' "
                f"in drake/catalog/others.py")
        order = [by_key[norm_key(c)] for c in declared]
        drop = {i: "class-not-in-subset" for i in range(len(source_names)) if i not in set(order)}
    else:
        excluded = {norm_key(c) for c in args.get("exclude_classes") or []}
        order = [i for i, n in enumerate(source_names) if norm_key(n) not in excluded]
        drop = {i: "excluded-class" for i in range(len(source_names)) if i not in set(order)}
    raw = tuple(str(source_names[i]) for i in order)
    names = tuple(display_name(r, rename) for r in raw)
    if args.get("lowercase"):
        names = tuple(n.lower() for n in names)
    expected = args.get("num_classes")
    if expected is not None and len(names) != int(expected):
        raise BuildError(
            f"{where}: the task declares num_classes={expected} but the source gives "
            f"{len(names)} classes after 'classes'/'exclude_classes'; fix the declaration in "
            f"drake/catalog/others.py")
    if len(set(names)) != len(names):
        dup = sorted(n for n, c in Counter(names).items() if c > 1)
        raise BuildError(f"{where}: class names {dup} repeat after renaming; fix 'rename'")
    return ClassTable(names, raw, {s: o for o, s in enumerate(order)}, drop)


def find_column(features: Mapping[str, Any], override: str | None, preferred: Sequence[str],
                kind: type | None, what: str, where: str, required: bool = True) -> str | None:
    """The column holding ``what``: the override, else a preferred name, else the only ``kind``."""
    if override:
        if override not in features:
            raise BuildError(f"{where}: column {override!r} (declared for the {what}) is not in "
                             f"the dataset's columns {list(features)}; fix drake/catalog/others.py")
        return override
    for name in preferred:
        if name in features and (kind is None or isinstance(features[name], kind)):
            return name
    if kind is not None:
        typed = [n for n, f in features.items() if isinstance(f, kind)]
        if len(typed) == 1:
            return typed[0]
    if required:
        raise BuildError(f"{where}: cannot tell which column holds the {what} among "
                         f"{list(features)}; declare it in the task's source_args")
    return None


class ClassificationCore:
    """One Hub classification task: its loaded splits, columns and class table.

    Shared by :class:`HubClassificationAdapter` and the TAP adapter's image and text
    classification tasks. ``text_template`` (``str.format`` over row columns) makes a text-only
    task whose prompt is the filled template and which has no image.
    """

    def __init__(self, task: TaskSpec, options: AdapterOptions, *,
                 text_template: str | None = None) -> None:
        from datasets import ClassLabel, Image

        self.task = task
        self.options = options
        args = task.source_args
        self.args = args
        self.repo = str(args["repo"]) if "repo" in args else ""
        if not self.repo:
            raise BuildError(f"task {task.id}: source_args has no 'repo'; declare the Hub id")
        self.revision = options.revision or args.get("revision")
        self.config = args.get("config")
        self.where = f"task {task.id} ({self.repo}@{self.revision or 'main'})"
        self.dd, self.commit = load_snapshot(self.repo, config=self.config,
                                             revision=self.revision, cache_dir=options.cache_dir,
                                             allow_patterns=args.get("allow_patterns"))
        first = next(iter(self.dd.values()))
        feats = first.features
        self.text_template = text_template
        self.resize = args.get("resize")
        self.image_col = None if text_template else find_column(
            feats, args.get("image_column"), IMAGE_COLUMNS, Image, "image", self.where)
        self.text_fields = _template_fields(text_template) if text_template else ()
        for name in self.text_fields:
            if name not in feats:
                raise BuildError(f"{self.where}: the prompt template needs column {name!r}, "
                                 f"which the dataset lacks (it has {list(feats)})")
        self.label_col = find_column(feats, args.get("label_column"), LABEL_COLUMNS, None,
                                     "label", self.where)
        label_feature = feats[self.label_col]
        if isinstance(label_feature, ClassLabel):
            self.table = class_table(label_feature.names, args, subset_ok=True, where=self.where)
        elif args.get("classes"):
            self.table = class_table(list(args["classes"]), args, subset_ok=False,
                                     where=self.where)
        else:
            raise BuildError(
                f"{self.where}: label column {self.label_col!r} is {label_feature!r}, not a "
                f"ClassLabel, so it carries no class names; declare 'classes' in source_args")
        self.offset = int(args.get("label_offset", 0))
        self.domains = [str(d) for d in args.get("domains") or []]
        self.domain_col = find_column(feats, args.get("domain_column"), DOMAIN_COLUMNS, None,
                                      "domain", self.where, required=False) if self.domains \
            else None
        self.domain_names = getattr(feats[self.domain_col], "names", None) \
            if self.domain_col else None
        self.path_col = None
        if self.domains and self.domain_col is None:
            self.path_col = next((c for c in PATH_COLUMNS if c in feats), None)
        self.coarse_col = args.get("coarse_column")
        if self.coarse_col and self.coarse_col not in feats:
            raise BuildError(f"{self.where}: coarse_column {self.coarse_col!r} not in "
                             f"{list(feats)}")
        self.coarse_names = list(feats[self.coarse_col].names) \
            if self.coarse_col and isinstance(feats[self.coarse_col], ClassLabel) else None
        self.template = str(args.get("template") or task.prompt_template or "")
        self._raw: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        """Where the task was read from, for the manifest (``sources.<task>.origin``)."""
        out: dict[str, Any] = {"from": "hub", "repo": self.repo, "revision": self.commit,
                               "requested_revision": self.revision or "main",
                               "split_rule": self.task.split_rule,
                               "classes": list(self.table.names)}
        if self.config:
            out["config"] = self.config
        return out

    # -- splits -----------------------------------------------------------------------------
    def dataset(self, source_split: str):
        """The source split with images left encoded (cached)."""
        if source_split not in self._raw:
            ds = pick_split(self.dd, source_split, self.repo)
            self._raw[source_split] = raw_images(ds, [self.image_col] if self.image_col else [])
        return self._raw[source_split]

    def source_rows(self, split: str) -> tuple[str, list[int]]:
        """The source split and row indices that make our ``split``."""
        rule = self.args.get("derive_test")
        if rule:
            src = str(rule.get("from", "train"))
            ds = self.dataset(src)
            labels = column_values(ds, self.label_col) if rule.get("stratify") else None
            rows = derived_rows(len(ds), split, rule, labels=labels,
                                default_seed=self.options.seed)
            return src, rows.tolist()
        src = str((self.args.get("splits") or {}).get(split, split))
        return src, list(range(len(self.dataset(src))))

    def class_of(self, value: Any) -> tuple[int | None, str]:
        """(our label or None, rule or problem) for a stored label value."""
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            return None, "missing"
        source_id = int(value) - self.offset
        if source_id in self.table.by_source:
            return self.table.by_source[source_id], ""
        if source_id in self.table.drop_rule:
            return None, self.table.drop_rule[source_id]
        return None, "missing"

    def domain_of(self, value: Any, path: str | None) -> str | None:
        """The declared domain a row belongs to, ``""`` when outside them, ``None`` if unknown."""
        if self.domain_col is not None and value is not None:
            names = self.domain_names
            text = names[value] if names is not None and isinstance(value, int) else str(value)
            key = norm_key(text)
            return next((d for d in self.domains if norm_key(d) == key), "")
        parts = {norm_key(p) for p in str(path or "").replace("\\", "/").split("/")[:-1]}
        if parts:
            return next((d for d in self.domains if norm_key(d) in parts), "")
        return None

    # -- the two passes ---------------------------------------------------------------------
    def convert(self, split: str) -> Conversion:
        task = self.task
        src, rows = self.source_rows(split)
        ds = self.dataset(src)
        conv = Conversion(task=task.id, split=split, source_rows=len(rows))
        labels = column_values(ds, self.label_col)
        domains = column_values(ds, self.domain_col) if self.domain_col else None
        paths = column_values(ds, self.path_col) if self.path_col else None
        coarse = column_values(ds, self.coarse_col) if self.coarse_col else None
        candidates: list[dict[str, Any]] = []
        for i in rows:
            sid = f"{src}-{i}"
            where = f"{self.repo}@{self.revision or 'main'}:{src}[{i}]"
            label, rule = self.class_of(labels[i])
            if label is None:
                if rule == "missing":
                    conv.rejected.append(reject(task, split, sid, "missing-field",
                                                f"field {self.label_col!r}: no valid class id "
                                                f"(got {labels[i]!r})", where))
                else:
                    conv.dropped[rule] += 1
                continue
            rec: dict[str, Any] = {"split": src, "row": int(i), "label": label, "domain": ""}
            if coarse is not None:
                rec["coarse"] = coarse[i]
            if self.domains:
                if domains is not None or paths is not None:
                    dom = self.domain_of(domains[i] if domains is not None else None,
                                         paths[i] if paths is not None else None)
                    if dom is None:
                        conv.rejected.append(reject(task, split, sid, "missing-field",
                                                    "no domain for this row", where))
                        continue
                    if dom == "":
                        conv.dropped["domain-not-in-subset"] += 1
                        continue
                    rec["domain"] = dom
                else:
                    rec["domain"] = None  # read from the image path in the heavy pass
            candidates.append(rec)
        heavy = [self.image_col] if self.image_col else list(self.text_fields)

        def read(cands: list[dict[str, Any]]):
            return (row for _, row in iter_rows(ds, [c["row"] for c in cands], heavy))

        keep_until_cap(conv, task, candidates, read,
                       lambda rec, row: self._check(split, src, rec, row),
                       seed=self.options.seed)
        sort_rejections(conv)
        return conv

    def _check(self, split: str, src: str, rec: dict[str, Any],
               row: Mapping[str, Any]) -> Rejection | str | None:
        """The heavy checks of one candidate: its image decodes (or its text is there)."""
        i = rec["row"]
        sid = f"{src}-{i}"
        where = f"{self.repo}@{self.revision or 'main'}:{src}[{i}]"
        if not self.image_col:
            empty = [f for f in self.text_fields if not str(row.get(f) or "").strip()]
            if empty:
                return reject(self.task, split, sid, "missing-field", f"field(s) {empty} empty",
                              where)
            return None
        value = row[self.image_col]
        data = image_bytes(value)
        if data is None:
            return reject(self.task, split, sid, "missing-field",
                          f"field {self.image_col!r}: no image bytes", where)
        problem = image_problem(data)
        if problem:
            return reject(self.task, split, sid, "unreadable-image", problem, where)
        if rec["domain"] is None:
            path = value.get("path") if isinstance(value, Mapping) else None
            dom = self.domain_of(None, path)
            if dom is None:
                return reject(self.task, split, sid, "missing-field", "no domain column and no "
                              "image path to read it from; declare domain_column", where)
            if dom == "":
                return "domain-not-in-subset"
            rec["domain"] = dom
        return None

    def sample(self, split: str, record: Mapping[str, Any], index: int) -> dict[str, Any]:
        src, row = str(record["split"]), int(record["row"])
        ds = self.dataset(src)
        cols = [self.image_col] if self.image_col else list(self.text_fields)
        values = ds.select_columns(cols)[row]
        label = int(record["label"])
        name = self.table.names[label]
        meta: dict[str, Any] = {
            "source": self.repo, "revision": self.revision or "main", "source_split": src,
            "source_row": row, "source_class": self.table.raw[label], "class_name": name,
        }
        if self.config:
            meta["config"] = self.config
        text = fill_template(self.template, name)
        if text:
            meta["text"], meta["template"] = text, self.template
        if "coarse" in record:
            meta["coarse_label"] = record["coarse"]
            if self.coarse_names and isinstance(record["coarse"], int):
                meta["coarse_name"] = self.coarse_names[record["coarse"]]
        if self.image_col:
            data = image_bytes(values[self.image_col])
            if data is None:
                raise BuildError(f"{self.where}: {src}[{row}] lost its image since convert()")
            if self.resize:
                data = rgb_png(data, self.resize)
                meta["transform"] = f"RGB {self.resize}x{self.resize} bilinear, PNG"
            images, prompt = [data], IMAGE_TOKEN
        else:
            images = []
            prompt = self.text_template.format(**{f: str(values[f]).strip()
                                                  for f in self.text_fields})
        return {
            "id": f"{self.task.id}-{src}-{row}", "task": self.task.id, "images": images,
            "prompt": prompt, "answer": name, "choices": [], "answer_type": "classification",
            "label": label, "domain": record.get("domain") or "", "meta": dump_meta(meta),
        }


def _template_fields(template: str) -> tuple[str, ...]:
    import string

    return tuple(dict.fromkeys(name for _, name, _, _ in string.Formatter().parse(template)
                               if name))


class HubClassificationAdapter(CoreAdapter):
    """Image classification from a Hub dataset (see the module docstring for the sample form)."""

    kind = "hf-classification"

    def core(self, task: TaskSpec) -> ClassificationCore:
        if task.id not in self._cores:
            self._cores[task.id] = ClassificationCore(task, self.options)
        return self._cores[task.id]

    def class_names(self, task: TaskSpec) -> list[str]:
        """The task's classes in label order, as prompts and answers write them."""
        return list(self.core(task).table.names)
