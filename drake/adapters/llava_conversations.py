"""FediLoRA's image-to-text sources: LLaVA-ReCap-118K, SAM-LLaVA-20k, LLaVA-NeXT preference 20k.

Source kind ``"hf-llava-conversations"``. Two row forms exist on the Hub, and the adapter reads
both from the dataset's features (``source_args`` can name the columns):

conversation rows (``lmms-lab/LLaVA-ReCap-118K``, ``battleMaster/llava-next-Preference-dataset-20k``)
    ``image`` plus ``conversations: [{from, value}, ...]``. The prompt is the first ``human`` /
    ``user`` turn, the answer the first ``gpt`` / ``assistant`` turn after it (FediLoRA trains and
    scores that one exchange; later turns are counted in ``meta["turns"]`` and not used). The
    human turn must hold exactly one ``<image>``: a mismatch is rejected, never repaired.
caption rows (``unography/SAM-LLAVA-20k``)
    ``image`` plus ``caption``. As FediLoRA builds them: prompt ``"<image>"`` (or
    ``source_args["prompt"]``), answer = the caption.

Splits: SAM-LLaVA has official train/test; ReCap and the NeXT set have only ``train``, so the
catalog declares a seeded 90/10 rule (``derive_test``, seed 666: test holds the test rows of
``Dataset.train_test_split(test_size=0.1, seed=666)``, train every other row). The test split is FediLoRA's shared global
test set; the 10 clients are cut from train by the benchmark's ``quantity_skew`` scenario, and
missing modalities are a scenario view too, so every stored sample has its image and its text.

Samples: ``answer_type`` from the task (captioning), empty choices, label -1, ``meta`` with the
source coordinates, the source id (``id_column``; ReCap's ``id``), ``turns`` and ReCap's
``data_source``. Rejections: ``missing-field`` (no image, no conversation, no human or gpt turn,
no caption), ``empty-answer``, ``image-token-mismatch``, ``unreadable-image``, ``duplicate-id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drake.adapters.base import Adapter, AdapterOptions, Conversion
from drake.adapters.classification import IMAGE_COLUMNS, find_column
from drake.adapters.hubdata import (
    column_values,
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
    sort_rejections,
)
from drake.errors import BuildError
from drake.schema import IMAGE_TOKEN
from drake.specs import TaskSpec

HUMAN = ("human", "user")
ASSISTANT = ("gpt", "assistant")
CAPTION_COLUMNS = ("caption", "text")


class _Problem(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def first_exchange(conversation: Any, column: str) -> tuple[str, str, int]:
    """(human turn, the gpt turn after it, number of turns) of a LLaVA conversation."""
    if not isinstance(conversation, list) or not conversation:
        raise _Problem("missing-field", f"field {column!r} holds no conversation")
    prompt = answer = None
    for turn in conversation:
        if not isinstance(turn, Mapping):
            raise _Problem("missing-field", f"field {column!r}: a turn is {turn!r}, not "
                                            f"{{from, value}}")
        who = str(turn.get("from") or "").lower()
        if prompt is None and who in HUMAN:
            prompt = turn.get("value")
        elif prompt is not None and who in ASSISTANT:
            answer = turn.get("value")
            break
    if prompt is None or not str(prompt).strip():
        raise _Problem("missing-field", f"field {column!r}: no human turn")
    if answer is None:
        raise _Problem("missing-field", f"field {column!r}: no gpt turn after the human turn")
    return str(prompt).strip(), str(answer).strip(), len(conversation)


class LlavaConversationsAdapter(Adapter):
    """Image-to-text rows from a Hub dataset (see the module docstring)."""

    kind = "hf-llava-conversations"

    def __init__(self, options: AdapterOptions) -> None:
        super().__init__(options)
        self._state: dict[str, dict[str, Any]] = {}

    def _setup(self, task: TaskSpec) -> dict[str, Any]:
        if task.id in self._state:
            return self._state[task.id]
        from datasets import Image

        args = task.source_args
        repo = str(args.get("repo") or "")
        if not repo:
            raise BuildError(f"task {task.id}: source_args has no 'repo'; declare the Hub id")
        revision = self.options.revision or args.get("revision")
        where = f"task {task.id} ({repo}@{revision or 'main'})"
        dd, commit = load_snapshot(repo, config=args.get("config"), revision=revision,
                                   cache_dir=self.options.cache_dir,
                                   allow_patterns=args.get("allow_patterns"))
        feats = next(iter(dd.values())).features
        image_col = find_column(feats, args.get("image_column"), IMAGE_COLUMNS, Image, "image",
                                where)
        conv_col = args.get("conversations_column") or (
            "conversations" if "conversations" in feats and not args.get("caption_column")
            else None)
        caption_col = None
        if conv_col is None:
            caption_col = find_column(feats, args.get("caption_column"), CAPTION_COLUMNS, None,
                                      "caption", where)
        elif conv_col not in feats:
            raise BuildError(f"{where}: conversations column {conv_col!r} not in {list(feats)}")
        id_col = args.get("id_column")
        if id_col and id_col not in feats:
            raise BuildError(f"{where}: id column {id_col!r} not in {list(feats)}")
        prompt = str(args.get("prompt", IMAGE_TOKEN))
        if caption_col and prompt.count(IMAGE_TOKEN) != 1:
            raise BuildError(f"{where}: the caption prompt must hold one {IMAGE_TOKEN}")
        extra = [c for c in ("data_source",) if c in feats]
        state = {"repo": repo, "revision": revision, "commit": commit, "dd": dd,
                 "image": image_col,
                 "conv": conv_col, "caption": caption_col, "id": id_col, "prompt": prompt,
                 "extra": extra, "raw": {}, "where": where}
        self._state[task.id] = state
        return state

    def prefetch(self, tasks: list[TaskSpec]) -> None:
        """Download (or find in the cache) and open every task's dataset before converting."""
        for task in tasks:
            self._setup(task)

    def describe(self, task: TaskSpec) -> dict[str, Any]:
        """Repo, resolved commit, row form and split rule, for the manifest."""
        st = self._setup(task)
        return {"from": "hub", "repo": st["repo"], "revision": st["commit"],
                "requested_revision": st["revision"] or "main",
                "form": "conversations" if st["conv"] else "caption",
                "text_column": st["conv"] or st["caption"], "split_rule": task.split_rule}

    def _dataset(self, st: dict[str, Any], src: str):
        if src not in st["raw"]:
            st["raw"][src] = raw_images(pick_split(st["dd"], src, st["repo"]), [st["image"]])
        return st["raw"][src]

    def _rows(self, task: TaskSpec, st: dict[str, Any], split: str) -> tuple[str, list[int]]:
        rule = task.source_args.get("derive_test")
        if rule:
            src = str(rule.get("from", "train"))
            n = len(self._dataset(st, src))
            return src, derived_rows(n, split, rule, labels=None,
                                     default_seed=self.options.seed).tolist()
        src = str((task.source_args.get("splits") or {}).get(split, split))
        return src, list(range(len(self._dataset(st, src))))

    def _text(self, st: dict[str, Any], row: Mapping[str, Any]) -> tuple[str, str, int]:
        if st["conv"]:
            prompt, answer, turns = first_exchange(row.get(st["conv"]), st["conv"])
        else:
            caption = row.get(st["caption"])
            if caption is None:
                raise _Problem("missing-field", f"field {st['caption']!r} is missing")
            prompt, answer, turns = st["prompt"], str(caption).strip(), 0
        if not answer:
            raise _Problem("empty-answer", "the answer text is empty")
        if prompt.count(IMAGE_TOKEN) != 1:
            raise _Problem("image-token-mismatch", f"the prompt holds "
                           f"{prompt.count(IMAGE_TOKEN)} {IMAGE_TOKEN} for 1 image")
        return prompt, answer, turns

    def _columns(self, st: dict[str, Any]) -> list[str]:
        cols = [st["conv"] or st["caption"], st["image"], *st["extra"]]
        return cols + ([st["id"]] if st["id"] else [])

    def convert(self, task: TaskSpec, split: str) -> Conversion:
        st = self._setup(task)
        src, rows = self._rows(task, st, split)
        ds = self._dataset(st, src)
        conv = Conversion(task=task.id, split=split, source_rows=len(rows))
        ids = column_values(ds, st["id"]) if st["id"] else None
        seen: set[str] = set()
        candidates = []
        for i in rows:
            given = ids[i] if ids is not None else None
            sid = str(given) if given not in (None, "") else f"{src}-{i}"
            if sid in seen:  # a repeat of an earlier row (source order) of this split
                conv.rejected.append(reject(task, split, sid, "duplicate-id",
                                            f"id {sid!r} already used by an earlier row",
                                            self._where(st, src, i)))
                continue
            seen.add(sid)
            candidates.append({"split": src, "row": int(i), "sid": sid})

        def read(cands: list[dict[str, Any]]):
            return (row for _, row in iter_rows(ds, [c["row"] for c in cands],
                                                self._columns(st)))

        def check(rec: dict[str, Any], row: Mapping[str, Any]):
            try:
                self._text(st, row)
                data = image_bytes(row[st["image"]])
                if data is None:
                    raise _Problem("missing-field", f"field {st['image']!r}: no image bytes")
                problem = image_problem(data)
                if problem:
                    raise _Problem("unreadable-image", problem)
            except _Problem as p:
                return reject(task, split, rec["sid"], p.reason, p.detail,
                              self._where(st, src, rec["row"]))
            return None

        keep_until_cap(conv, task, candidates, read, check, seed=self.options.seed)
        sort_rejections(conv)
        return conv

    @staticmethod
    def _where(st: dict[str, Any], src: str, i: int) -> str:
        return f"{st['repo']}@{st['revision'] or 'main'}:{src}[{i}]"

    def sample(self, task: TaskSpec, split: str, record: Any, index: int) -> dict[str, Any]:
        st = self._setup(task)
        src, row = str(record["split"]), int(record["row"])
        values = self._dataset(st, src).select_columns(self._columns(st))[row]
        try:
            prompt, answer, turns = self._text(st, values)
        except _Problem as p:
            raise BuildError(f"{st['where']}: {src}[{row}] changed since convert(): {p}") from None
        data = image_bytes(values[st["image"]])
        if data is None:
            raise BuildError(f"{st['where']}: {src}[{row}] lost its image since convert()")
        meta: dict[str, Any] = {"source": st["repo"], "revision": st["revision"] or "main",
                                "source_split": src, "source_row": row,
                                "source_id": record["sid"], "turns": turns}
        for col in st["extra"]:
            meta[col] = values.get(col)
        return {
            "id": f"{task.id}-{record['sid']}", "task": task.id, "images": [data],
            "prompt": prompt, "answer": answer, "choices": [], "answer_type": task.answer_type,
            "label": -1, "domain": "", "meta": dump_meta(meta),
        }
