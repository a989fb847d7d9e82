"""TAP's eight datasets (FLAVA setup) from the Hub, with TAP's text templates.

Source kind ``"hf-tap"``. ``source_args["format"]`` picks how a row becomes a sample; the
templates, column names and split rules are declared in ``drake/catalog/others.py``
(``TAP_TASKS``), so a reader sees the whole mapping there.

``image-classification`` (tiny-ImageNet, CIFAR-100)
    As :mod:`drake.adapters.classification`: prompt ``"<image>"``, answer = class name
    (tiny-ImageNet's ClassLabel names are WordNet ids), label = class id.
``text-classification`` (AG News)
    No image; prompt = ``source_args["text"]`` filled from the row (TAP: ``title`` newline
    ``description``), answer = class name, label = the 1-based source label minus
    ``label_offset``.
``image-reconstruction`` (FashionMNIST, Caltech-256)
    TAP's image generation task (scored by MSE), answer_type ``"image"``: ``images`` is
    [input, target], the target the same picture (TAP reconstructs its input), the prompt
    ``"<image>"`` (the input's placeholder; the target has none) and the answer empty.
    ``resize`` (FashionMNIST: 64) decodes both to RGB ``N`` x ``N`` and stores PNG, as TAP
    feeds 3x64x64 images; other images keep their bytes.
``mmlu`` / ``vqa`` / ``commongen`` (text generation, BERTScore + METEOR)
    ``prompt`` and ``answer`` are ``str.format`` templates (paper Tab. 23) over the fields
    ``subject, question, options, answer`` (MMLU: options are ``"A. ..."`` lines, the answer is
    ``"<letter>. <text>"``, the subject is TAP's word for the config), ``question, answer``
    (VQAv2: ``multiple_choice_answer``) and ``concepts, answer`` (CommonGen: concepts joined with
    ``", "``, the answer is ``target``). The answer is TAP's whole response line
    (``"Answer: yes"``), the text TAP scores; ``meta["short_answer"]`` keeps the bare answer.
    MMLU reads its three configs (``configs``: config -> subject word) into one task.

Rejections: ``missing-field`` (no image, question, choices, concepts or label),
``empty-answer`` (an empty VQA answer or CommonGen target), ``choice-not-found`` (an MMLU answer
index outside its choices), ``unreadable-image``, ``image-token-mismatch`` (a question that itself
contains ``<image>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drake.adapters.base import AdapterOptions, Conversion, CoreAdapter
from drake.adapters.classification import IMAGE_COLUMNS, ClassificationCore, find_column
from drake.adapters.hubdata import (
    derived_rows,
    dump_meta,
    image_bytes,
    image_problem,
    iter_rows,
    keep_until_cap,
    load_snapshot,
    pick_split,
    raw_images,
    reject,
    rgb_png,
    sort_rejections,
)
from drake.errors import BuildError
from drake.schema import IMAGE_TOKEN
from drake.specs import TaskSpec

FORMATS = ("image-classification", "text-classification", "image-reconstruction", "mmlu",
           "vqa", "commongen")
LETTERS = "ABCDEFGHIJ"

# format -> {role: (source_args key, default column)}
_COLUMNS: dict[str, dict[str, tuple[str, str]]] = {
    "mmlu": {"question": ("question_column", "question"),
             "choices": ("choices_column", "choices"), "answer": ("answer_column", "answer")},
    "vqa": {"question": ("question_column", "question"),
            "answer": ("answer_column", "multiple_choice_answer")},
    "commongen": {"concepts": ("concepts_column", "concepts"),
                  "answer": ("target_column", "target")},
    "image-reconstruction": {},
}


class _Problem(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


class GenerationCore:
    """One TAP text-generation or image-reconstruction task over one or more Hub configs."""

    def __init__(self, task: TaskSpec, options: AdapterOptions) -> None:
        from datasets import ClassLabel, Image

        args = task.source_args
        self.task, self.options, self.args = task, options, args
        self.format = str(args["format"])
        self.repo = str(args.get("repo") or "")
        if not self.repo:
            raise BuildError(f"task {task.id}: source_args has no 'repo'; declare the Hub id")
        self.revision = options.revision or args.get("revision")
        self.where = f"task {task.id} ({self.repo}@{self.revision or 'main'})"
        configs = args.get("configs")
        self.subjects: dict[str | None, str] = dict(configs) if configs else \
            {args.get("config"): ""}
        self.dd = {}
        self.commit = ""
        for cfg in self.subjects:
            # the whole snapshot: `datasets` infers the format from the README's first config,
            # so a partial (allow_patterns) download of a many-config repo does not load
            self.dd[cfg], self.commit = load_snapshot(
                self.repo, config=cfg, revision=self.revision, cache_dir=options.cache_dir,
                allow_patterns=args.get("allow_patterns"))
        feats = next(iter(next(iter(self.dd.values())).values())).features
        self.cols = {role: str(args.get(key, default))
                     for role, (key, default) in _COLUMNS[self.format].items()}
        for role, col in self.cols.items():
            if col not in feats:
                raise BuildError(f"{self.where}: the {role} column {col!r} is not among "
                                 f"{list(feats)}; declare it in drake/catalog/others.py")
        needs_image = self.format in ("vqa", "image-reconstruction")
        self.image_col = find_column(feats, args.get("image_column"), IMAGE_COLUMNS, Image,
                                     "image", self.where) if needs_image else None
        label = feats.get(str(args.get("label_column", "label")))
        self.class_names = list(label.names) if isinstance(label, ClassLabel) else None
        self.label_col = str(args.get("label_column", "label")) if self.class_names else None
        self.prompt = str(args.get("prompt", IMAGE_TOKEN if needs_image else ""))
        self.answer = str(args.get("answer", ""))
        want = 1 if needs_image else 0
        if self.prompt.count(IMAGE_TOKEN) != want:
            raise BuildError(f"{self.where}: the prompt template must hold {want} {IMAGE_TOKEN} "
                             f"placeholder(s), it holds {self.prompt.count(IMAGE_TOKEN)}")
        if self.format != "image-reconstruction" and not self.answer:
            raise BuildError(f"{self.where}: declare the 'answer' template in source_args")
        if self.format == "image-reconstruction" and task.answer_type != "image":
            raise BuildError(f"{self.where}: a reconstruction stores its target as the last "
                             f"image; declare answer_type 'image' (not {task.answer_type!r})")
        if self.format == "image-reconstruction" and self.answer:
            raise BuildError(f"{self.where}: a reconstruction's target is its last image, not "
                             f"text; remove the 'answer' template from source_args")
        self.resize = args.get("resize")
        self._raw: dict[tuple[str | None, str], Any] = {}
        self._selected: dict[tuple[str | None, str], Any] = {}

    def describe(self) -> dict[str, Any]:
        """Where the task was read from, for the manifest (``sources.<task>.origin``)."""
        out: dict[str, Any] = {"from": "hub", "repo": self.repo, "revision": self.commit,
                               "requested_revision": self.revision or "main",
                               "format": self.format, "split_rule": self.task.split_rule}
        if any(self.subjects):
            out["configs"] = [c for c in self.subjects if c]
        return out

    def dataset(self, cfg: str | None, src: str):
        if (cfg, src) not in self._raw:
            ds = pick_split(self.dd[cfg], src, self.repo)
            self._raw[(cfg, src)] = raw_images(ds, [self.image_col] if self.image_col else [])
        return self._raw[(cfg, src)]

    def _read(self, cfg: str | None, src: str):
        """The columns a sample reads, selected once per (config, split): selecting them anew
        for every row costs milliseconds, which VQAv2's 21,435 rows multiply."""
        if (cfg, src) not in self._selected:
            columns = self._text_columns() + ([self.image_col] if self.image_col else [])
            self._selected[(cfg, src)] = self.dataset(cfg, src).select_columns(columns)
        return self._selected[(cfg, src)]

    def parts(self, split: str) -> list[tuple[str | None, str, list[int]]]:
        """(config, source split, rows) that make our ``split``."""
        rule = self.args.get("derive_test")
        out = []
        for cfg in self.subjects:
            if rule:
                src = str(rule.get("from", "train"))
                n = len(self.dataset(cfg, src))
                rows = derived_rows(n, split, rule, labels=None,
                                    default_seed=self.options.seed).tolist()
            else:
                src = str((self.args.get("splits") or {}).get(split, split))
                rows = list(range(len(self.dataset(cfg, src))))
            out.append((cfg, src, rows))
        return out

    def fields(self, cfg: str | None, row: Mapping[str, Any]) -> tuple[dict[str, str], dict]:
        """Template fields and meta for one row; raises :class:`_Problem` to reject it."""
        def text(role: str) -> str:
            value = row.get(self.cols[role])
            return "" if value is None else str(value).strip()

        if self.format == "mmlu":
            question, choices, gold = text("question"), row.get(self.cols["choices"]), \
                row.get(self.cols["answer"])
            if not question:
                raise _Problem("missing-field", f"field {self.cols['question']!r} is empty")
            if not isinstance(choices, list) or len(choices) < 2:
                raise _Problem("missing-field", f"field {self.cols['choices']!r} holds no "
                                                f"choice list (got {choices!r})")
            if not isinstance(gold, int) or isinstance(gold, bool):
                raise _Problem("missing-field", f"field {self.cols['answer']!r} is {gold!r}")
            if not 0 <= gold < len(choices):
                raise _Problem("choice-not-found", f"answer index {gold} outside the "
                                                   f"{len(choices)} choices")
            options = [f"{LETTERS[i]}. {str(c).strip()}" for i, c in enumerate(choices)]
            subject = self.subjects[cfg]
            return ({"subject": subject, "question": question, "options": "\n".join(options),
                     "answer": options[gold]},
                    {"subject": subject, "gold_letter": LETTERS[gold],
                     "short_answer": str(choices[gold]).strip(),
                     "choices": [str(c) for c in choices]})
        if self.format == "vqa":
            question, answer = text("question"), text("answer")
            if not question:
                raise _Problem("missing-field", f"field {self.cols['question']!r} is empty")
            if not answer:
                raise _Problem("empty-answer", f"field {self.cols['answer']!r} is empty")
            return {"question": question, "answer": answer}, {"short_answer": answer}
        if self.format == "commongen":
            concepts, target = row.get(self.cols["concepts"]), text("answer")
            if not isinstance(concepts, list) or not concepts:
                raise _Problem("missing-field", f"field {self.cols['concepts']!r} holds no "
                                                f"concepts (got {concepts!r})")
            if not target:
                raise _Problem("empty-answer", f"field {self.cols['answer']!r} is empty")
            words = [str(c).strip() for c in concepts]
            return ({"concepts": ", ".join(words), "answer": target},
                    {"short_answer": target, "concepts": words})
        return {}, {"target": "the last image: the input itself (reconstruction, scored by "
                              "MSE)"}

    def _text_columns(self) -> list[str]:
        cols = list(self.cols.values())
        if self.label_col:
            cols.append(self.label_col)
        return cols

    def convert(self, split: str) -> Conversion:
        task = self.task
        parts = self.parts(split)
        conv = Conversion(task=task.id, split=split,
                          source_rows=sum(len(rows) for _, _, rows in parts))
        columns = self._text_columns() + ([self.image_col] if self.image_col else [])
        candidates = [{"config": cfg, "split": src, "row": int(i)}
                      for cfg, src, rows in parts for i in rows]

        def read(cands: list[dict[str, Any]]):
            # consecutive candidates of one (config, split) are read together, in the order asked
            k = 0
            while k < len(cands):
                key = (cands[k]["config"], cands[k]["split"])
                j = k
                while j < len(cands) and (cands[j]["config"], cands[j]["split"]) == key:
                    j += 1
                ds = self.dataset(*key)
                yield from (row for _, row in iter_rows(ds, [c["row"] for c in cands[k:j]],
                                                        columns))
                k = j

        keep_until_cap(conv, task, candidates, read,
                       lambda rec, row: self._check(split, rec, row), seed=self.options.seed)
        sort_rejections(conv)
        return conv

    def _check(self, split: str, rec: dict[str, Any], row: Mapping[str, Any]):
        cfg, src, i = rec["config"], rec["split"], rec["row"]
        prefix = f"{cfg}-" if cfg else ""
        sid = f"{prefix}{src}-{i}"
        where = f"{self.repo}@{self.revision or 'main'}:{prefix}{src}[{i}]"
        try:
            values, _ = self.fields(cfg, row)
            prompt = self.prompt.format(**values)
            want = 1 if self.image_col else 0
            if prompt.count(IMAGE_TOKEN) != want:
                raise _Problem("image-token-mismatch", f"the filled prompt holds "
                               f"{prompt.count(IMAGE_TOKEN)} {IMAGE_TOKEN} for {want} image(s)")
            if self.image_col:
                data = image_bytes(row[self.image_col])
                if data is None:
                    raise _Problem("missing-field", f"field {self.image_col!r}: no image bytes")
                problem = image_problem(data)
                if problem:
                    raise _Problem("unreadable-image", problem)
        except _Problem as p:
            return reject(self.task, split, sid, p.reason, p.detail, where)
        return None

    def sample(self, split: str, record: Mapping[str, Any], index: int) -> dict[str, Any]:
        cfg, src, row = record.get("config"), str(record["split"]), int(record["row"])
        values = self._read(cfg, src)[row]
        fields, meta = self.fields(cfg, values)
        meta.update({"source": self.repo, "revision": self.revision or "main",
                     "source_split": src, "source_row": row, "format": self.format})
        if cfg:
            meta["config"] = cfg
        if self.label_col and isinstance(values.get(self.label_col), int):
            meta["class_name"] = self.class_names[values[self.label_col]]
        images = []
        if self.image_col:
            data = image_bytes(values[self.image_col])
            if data is None:
                raise BuildError(f"{self.where}: {src}[{row}] lost its image since convert()")
            if self.resize:
                data = rgb_png(data, int(self.resize))
                meta["transform"] = f"RGB {self.resize}x{self.resize} bilinear, PNG"
            # a reconstruction's target, stored last, is the input picture itself
            images = [data, data] if self.format == "image-reconstruction" else [data]
        prefix = f"{cfg}-" if cfg else ""
        return {
            "id": f"{self.task.id}-{prefix}{src}-{row}", "task": self.task.id,
            "images": images, "prompt": self.prompt.format(**fields),
            "answer": self.answer.format(**fields) if self.answer else "", "choices": [],
            "answer_type": self.task.answer_type, "label": -1, "domain": "",
            "meta": dump_meta(meta),
        }


class TapAdapter(CoreAdapter):
    """TAP's datasets (see the module docstring for each format's sample form)."""

    kind = "hf-tap"

    def core(self, task: TaskSpec):
        if task.id in self._cores:
            return self._cores[task.id]
        fmt = task.source_args.get("format")
        if fmt == "image-classification":
            core = ClassificationCore(task, self.options)
        elif fmt == "text-classification":
            if not task.source_args.get("text"):
                raise BuildError(f"task {task.id}: a text-classification task declares its "
                                 f"'text' template (e.g. '{{title}}\\n{{description}}')")
            core = ClassificationCore(task, self.options, text_template=task.source_args["text"])
        elif fmt in FORMATS:
            core = GenerationCore(task, self.options)
        else:
            raise BuildError(f"task {task.id}: source_args['format'] is {fmt!r}; use one of "
                             f"{list(FORMATS)}")
        self._cores[task.id] = core
        return core
