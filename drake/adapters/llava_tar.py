"""DRAKE and HFLB from their released form: one tar per source dataset of LLaVA-style records.

Layout (the public FedMosaic README, checked against the released generation scripts)
-------------------------------------------------------------------------------------
The Hub dataset repo (``SNUMPR/DRAKE``, ``SNUMPR/HFLB``) holds one ``<Dataset>.tar`` per source
dataset. The reference code extracts every tar inside a ``dataset/`` folder at its project root,
giving::

    dataset/<Dataset>/<image folders>/...          (e.g. Fashion200K/full/images/)
    dataset/<Dataset>/train/dataset-<subset>.json
    dataset/<Dataset>/test/dataset-<subset>.json

so tar members are named ``<Dataset>/...``, while the image paths inside the records are relative
to the reference project root: ``dataset/<Dataset>/...``. This adapter resolves an image path by
trying, in order: the path as written, the path without its ``dataset/`` prefix, the part from
the ``<Dataset>/`` folder on, and ``<Dataset>/<path>``. A record::

    {"id": "...", "image": ["dataset/VSR/images/1.jpg"],
     "conversations": [{"from": "human", "value": "...<image>...Choice list:[True, False]..."},
                       {"from": "gpt", "value": "True"}]}

becomes one schema sample: ``prompt`` = the human turn (unchanged; it must hold one ``<image>``
per image), ``answer`` = the gpt turn, ``choices`` from the prompt
(:mod:`drake.adapters.choices`), ``images`` = the original encoded bytes (not re-encoded).

Sources, in order of preference: ``--source-dir DIR`` holding ``DIR/<Dataset>.tar`` or an
unpacked ``DIR/<Dataset>/``; else the Hub repo, one ``hf_hub_download`` per needed tar (never a
snapshot of the whole repo, which is very large), honouring ``--revision`` and ``--cache-dir``.

Ids. The reference code never reads ``id``, and the released files do not keep it unique:
VSR names records by image (several captions each), HFLB COCOQA restarts its row index in each
of its worker chunks, AQUA names records by painting, Bongard-OpenWorld's positive and negative
twins share one, and HFLB Abstract has none. So no row is lost over its id: a missing id
becomes ``row-<row index>``, and the second and later rows of a repeated id get ``~2``, ``~3``,
... (in file order). ``meta.source_id`` keeps the id as released (``null`` when absent) and
``meta.source_row`` the row's index in its file.

``<image>`` tokens. A human turn with no ``<image>`` at all (HFLB VizWiz-Original) gets one per
image at its start, on a line of its own, as LLaVA places the image; ``meta.image_tokens_added``
says how many.

Rejections (per sample, never fixed): a missing field, an ``<image>`` count different from the
image list (when the turn has some), an image that is absent or that PIL cannot decode, a
multiple-choice answer that is not among the options, an empty answer. ``TaskSpec.caps`` keep a
seeded random subset (the rest is dropped by the rule ``cap``) in source order.

Ambiguous subset ids
--------------------
A task whose ``source_args`` lists ``subset_candidates`` (Bongard-HOI) reads, by default, the
file its id names (``dataset-<id>.json``), as the released scenarios do: that is the data the
paper's numbers come from, even where the file's content is another task of the task list. With
``AdapterOptions.subsets == "by-content"`` (``drake build --subsets by-content``) it is matched
to a file by content instead: the candidate train file whose records all carry
``TaskSpec.num_images`` images is used; the declared subset wins ties; no match or an unresolved
tie is an error. The file read is recorded in the manifest (``sources.<task>.origin``) and the
choice documented in DATASET_CARD.md.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from drake.adapters.base import Adapter, Conversion, Rejection
from drake.adapters.choices import choices_for_answer, parse_choices
from drake.adapters.confine import (
    MAX_IMAGE_BYTES,
    MAX_TEXT_BYTES,
    UnsafeSource,
    check_name,
    confined,
    read_capped,
    read_stream,
    too_large,
)
from drake.errors import BuildError
from drake.schema import IMAGE_TOKEN
from drake.specs import TaskSpec

log = logging.getLogger(__name__)

PREFIX = "dataset/"  # the reference code's extraction folder, written into image paths
PROBE_RECORDS = 50  # records read per candidate file to resolve an ambiguous subset id
_ADDRESS = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")


def _norm(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


def image_candidates(path: str, dataset: str) -> list[str]:
    """Member names an image path from a record may have inside ``<Dataset>.tar``."""
    p = _norm(path.replace("\\", "/"))
    out = [p]
    if p.startswith(PREFIX):
        out.append(p[len(PREFIX):])
    marker = f"{dataset}/"
    at = p.find("/" + marker)
    if at >= 0:
        out.append(p[at + 1:])
    if not p.startswith(marker):
        out.append(marker + p)
    return list(dict.fromkeys(out))


class TarArchive:
    """Random access to the members of one tar, without extracting it.

    The member index (name -> data offset and size) is read once; a member is then one seek and
    one read. Compressed tars (which cannot be seeked) fall back to ``tarfile.extractfile``.
    """

    def __init__(self, path: Path, label: str) -> None:
        self.path = Path(path)
        self.label = label
        self.compressed = False
        self.index: dict[str, tuple[int, int]] = {}
        self._names: dict[str, str] = {}
        try:
            with tarfile.open(self.path, "r:") as tf:
                for m in tf:
                    if m.isfile():
                        self.index[_norm(m.name)] = (m.offset_data, m.size)
            return
        except tarfile.ReadError:
            pass
        try:
            with tarfile.open(self.path, "r:*") as tf:
                for m in tf:
                    if m.isfile():
                        self.index[_norm(m.name)] = (-1, m.size)
                        self._names[_norm(m.name)] = m.name
        except (tarfile.TarError, OSError) as exc:
            raise BuildError(f"{label} ({self.path}) is not a readable tar file ({exc}); "
                             f"delete it and download it again") from None
        self.compressed = True

    def has(self, name: str) -> bool:
        return name in self.index

    def names(self) -> list[str]:
        return list(self.index)

    def ref(self, name: str) -> dict[str, Any]:
        offset, size = self.index[name]
        if self.compressed:
            return {"tar": str(self.path), "member": self._names[name]}
        return {"tar": str(self.path), "offset": offset, "size": size}

    def read(self, name: str, cap: int = MAX_TEXT_BYTES) -> bytes:
        return read_ref(self.ref(name), cap)


class DirArchive:
    """An unpacked ``<Dataset>/`` folder under ``root`` (the user's ``--source-dir``)."""

    def __init__(self, root: Path, dataset: str) -> None:
        self.root = Path(root)
        self.label = f"{dataset}/"
        self.dataset = dataset

    def has(self, name: str) -> bool:
        """Whether ``name`` is a file here; a name that leaves the folder or goes through a link
        is there (so that the row is rejected saying why, not as missing)."""
        try:
            return confined(self.root, name).is_file()
        except UnsafeSource:
            return os.path.lexists(self.root / name)

    def names(self) -> list[str]:
        base = self.root / self.dataset
        return [p.relative_to(self.root).as_posix() for p in base.glob("*/dataset-*.json")]

    def ref(self, name: str) -> dict[str, Any]:
        return {"root": str(self.root), "file": name}

    def read(self, name: str, cap: int = MAX_TEXT_BYTES) -> bytes:
        return read_ref(self.ref(name), cap)


_OPEN_TARS: dict[str, tarfile.TarFile] = {}


def read_ref(ref: dict[str, Any], cap: int = MAX_IMAGE_BYTES) -> bytes:
    """The bytes a record's reference points at (any process may call this), at most ``cap``.

    Raises :class:`~drake.adapters.confine.UnsafeSource` (an ``OSError``) for a file outside its
    folder or reached through a link, and for a member or file larger than ``cap``.
    """
    if "file" in ref:
        return read_capped(confined(Path(ref["root"]), ref["file"]), cap, "member")
    if "member" in ref:
        tf = _OPEN_TARS.get(ref["tar"])
        if tf is None:
            tf = _OPEN_TARS[ref["tar"]] = tarfile.open(ref["tar"], "r:*")
        info = tf.getmember(ref["member"])
        label = f"{ref['tar']}: {ref['member']}"
        if info.size > cap:
            raise UnsafeSource(too_large(label, info.size, cap, "member"))
        handle = tf.extractfile(info)
        if handle is None:
            raise BuildError(f"{ref['tar']}: member {ref['member']} is not a file")
        return read_stream(handle, cap, label, "member")
    if ref["size"] > cap:
        raise UnsafeSource(too_large(f"{ref['tar']} at byte {ref['offset']}", ref["size"], cap,
                                     "member"))
    with open(ref["tar"], "rb") as f:
        f.seek(ref["offset"])
        data = f.read(ref["size"])
    if len(data) != ref["size"]:
        raise BuildError(f"{ref['tar']} is shorter than its own index (truncated download?); "
                         f"delete it and build again")
    return data


def decodes(data: bytes) -> str:
    """Empty string when PIL decodes ``data`` fully, else why it does not."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format == "JPEG":
                im.draft("RGB", (64, 64))  # DCT scaling: still reads every byte, decodes less
            im.load()
        return ""
    except Exception as exc:  # PIL raises many types for bad data
        # no memory addresses in the message: rejected.jsonl must be byte-identical across runs
        return f"{type(exc).__name__}: " + _ADDRESS.sub("the image bytes", str(exc))


def _subset_file(dataset: str, split: str, subset: str) -> str:
    return f"{dataset}/{split}/dataset-{subset}.json"


def _member(archive, dataset: str, split: str, subset: str) -> str | None:
    want = _subset_file(dataset, split, subset)
    for name in (want, PREFIX + want):
        if archive.has(name):
            return name
    hits = sorted((n for n in archive.names() if n.endswith("/" + want)), key=len)
    return hits[0] if hits else None


def _seed_for(seed: int, task: str, split: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{task}/{split}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


class LlavaTarAdapter(Adapter):
    """``llava-tar``: DRAKE and HFLB tasks from ``<Dataset>.tar`` files (see the module doc).

    ``TaskSpec.source_args``: ``repo`` (Hub dataset repo), ``file`` (the tar), ``dataset`` (the
    folder inside it), ``subset`` (the ``dataset-<subset>.json`` id) and, for ambiguous ids,
    ``subset_candidates``.
    """

    kind = "llava-tar"

    def __init__(self, options) -> None:
        super().__init__(options)
        self._archives: dict[str, Any] = {}
        self._origins: dict[str, dict[str, Any]] = {}
        self._resolved: dict[str, str] = {}

    # -- locating the source -------------------------------------------------------------

    def prefetch(self, tasks: list[TaskSpec]) -> None:
        """Download (or find) every tar the tasks need, before any conversion; from the Hub,
        only after checking that the cache's disk can hold the tars it lacks."""
        if self.options.source_dir is None:
            from drake.sources import check_download_space

            by_repo: dict[str, list[str]] = {}
            for task in tasks:
                by_repo.setdefault(task.source_args["repo"], []).append(task.source_args["file"])
            for repo, files in by_repo.items():
                check_download_space(repo, files, revision=self.options.revision,
                                     cache_dir=self.options.cache_dir)
        for task in tasks:
            self._archive(task)

    def _archive(self, task: TaskSpec):
        args = task.source_args
        repo, file, dataset = args["repo"], args["file"], args["dataset"]
        key = f"{repo}/{file}"
        if key in self._archives:
            return self._archives[key]
        sd = self.options.source_dir
        if sd is not None:
            sd = Path(sd)
            if (sd / file).is_file():
                archive = TarArchive(sd / file, file)
                origin = {"from": "source-dir", "file": file}
            elif (sd / dataset).is_dir():
                archive = DirArchive(sd, dataset)
                origin = {"from": "source-dir", "file": f"{dataset}/"}
            else:
                raise BuildError(
                    f"task {task.id}: --source-dir {sd} holds neither {file} nor an unpacked "
                    f"{dataset}/ folder; get it with `hf download {repo} {file} --repo-type "
                    f"dataset --local-dir {sd}`, or drop --source-dir to read it from the Hub")
        else:
            from drake.sources import hub_file

            path = hub_file(repo, file, revision=self.options.revision,
                            cache_dir=self.options.cache_dir)
            archive = TarArchive(path, f"{repo}/{file}")
            origin = {"from": "hub", "repo": repo, "file": file,
                      "revision": _commit_of(path) or self.options.revision or "main"}
        self._archives[key] = archive
        self._origins[key] = origin
        return archive

    def _subset(self, task: TaskSpec, archive) -> str:
        """The subset id whose files hold the task (resolving ambiguous ids by content)."""
        args = task.source_args
        declared = str(args["subset"])
        candidates = [str(c) for c in args.get("subset_candidates", ())]
        if not candidates or self.options.subsets == "released":
            return declared
        if self.options.subsets != "by-content":
            raise BuildError(f"--subsets must be released or by-content, got "
                             f"{self.options.subsets!r}")
        if task.id in self._resolved:
            return self._resolved[task.id]
        lo, hi = task.num_images
        seen, matches = {}, []
        for cand in candidates:
            member = _member(archive, args["dataset"], "train", cand)
            if member is None:
                continue
            rows = _load_list(archive, member)[:PROBE_RECORDS]
            counts = sorted({len(_images_of(r)) for r in rows if isinstance(r, dict)})
            seen[cand] = counts
            if counts and all(lo <= c <= hi for c in counts):
                matches.append(cand)
        if declared in matches:
            chosen = declared
        elif len(matches) == 1:
            chosen = matches[0]
        else:
            raise BuildError(
                f"task {task.id}: cannot tell which {args['dataset']} subset holds it: expected "
                f"{lo}-{hi} images per record; image counts per candidate train file: {seen}; "
                f"fix subset/subset_candidates in drake/catalog/drake.py")
        if chosen != declared:
            log.info("task %s: read from subset %s (declared %s) by its image count", task.id,
                     chosen, declared)
        self._resolved[task.id] = chosen
        return chosen

    def describe(self, task: TaskSpec) -> dict[str, Any]:
        """Where the task was read from (for the manifest; no local paths)."""
        args = task.source_args
        archive = self._archive(task)
        subset = self._subset(task, archive)
        return {**self._origins[f"{args['repo']}/{args['file']}"],
                "dataset": args["dataset"], "subset": subset,
                "declared_subset": str(args["subset"])}

    # -- the two passes -------------------------------------------------------------------

    def convert(self, task: TaskSpec, split: str) -> Conversion:
        args = task.source_args
        dataset = args["dataset"]
        archive = self._archive(task)
        subset = self._subset(task, archive)
        member = _member(archive, dataset, split, subset)
        if member is None:
            held = sorted(n for n in archive.names() if n.endswith(".json"))[:20]
            raise BuildError(f"task {task.id}: {archive.label} holds no "
                             f"{_subset_file(dataset, split, subset)}; its JSON files: {held}")
        where = f"{archive.label}:{member}"
        rows = _load_list(archive, member, where)
        conv = Conversion(task.id, split, source_rows=len(rows))
        mc = task.answer_type == "multiple_choice"

        rejected: list[tuple[int, Rejection]] = []

        def reject(sid: str, reason: str, detail: str) -> None:
            rejected.append((i, Rejection(task.id, split, sid, reason, detail, where)))

        ids = unique_ids(rows)
        candidates: list[dict[str, Any]] = []
        detected_open = 0
        for i, rec in enumerate(rows):
            if not isinstance(rec, dict):
                reject(f"#{i}", "missing-field", f"row {i} is a {type(rec).__name__}, not an "
                       f"object with id/image/conversations")
                continue
            sid = ids[i]
            human, gpt, missing = _turns(rec.get("conversations"))
            if missing:
                reject(sid, "missing-field", missing)
                continue
            images = _images_of(rec)
            if images is None:
                reject(sid, "missing-field", "'image' is neither a path nor a list of paths")
                continue
            tokens = human.count(IMAGE_TOKEN)
            added = 0
            if tokens == 0 and images:
                added = len(images)
                human = (IMAGE_TOKEN + "\n") * added + human
                tokens = added
            if tokens != len(images):
                reject(sid, "image-token-mismatch", f"the human turn holds {tokens} "
                       f"{IMAGE_TOKEN} token(s) but 'image' lists {len(images)} path(s)")
                continue
            answer = gpt.strip()
            if not answer:
                reject(sid, "empty-answer", "the gpt turn is empty")
                continue
            raw_id = rec.get("id")
            meta: dict[str, Any] = {"source_id": None if raw_id is None else str(raw_id),
                                    "source_row": i, "source_file": where, "dataset": dataset,
                                    "subset": subset, "image_paths": images}
            if added:
                meta["image_tokens_added"] = added
            found = parse_choices(human, answer if mc else None)
            choices: list[str] = []
            if mc:
                picked = choices_for_answer(found, answer)
                if picked is None:
                    detail = ("no option list found in the prompt" if found is None else
                              f"answer {answer!r} is not one of the options "
                              f"{list(found.options)} ({found.style})")
                    reject(sid, "choice-not-found", detail)
                    continue
                if len(set(picked)) != len(picked):
                    reject(sid, "choice-not-found", f"the options {picked} repeat one another")
                    continue
                if answer not in picked:  # the same option up to letter case
                    meta["answer_as_released"] = answer
                    answer = next(c for c in picked if c.casefold() == answer.casefold())
                choices = picked
                meta["choice_style"] = found.style
            elif found is not None:
                detected_open += 1
            refs, bad = [], ""
            for path in images:
                try:
                    check_name(path, archive.label)
                except UnsafeSource as exc:
                    bad = str(exc)
                    break
                name = next((n for n in image_candidates(path, dataset) if archive.has(n)), None)
                if name is None:
                    bad = f"image {path!r} is not in {archive.label}"
                    break
                refs.append(archive.ref(name))
            if bad:
                reject(sid, "unreadable-image", bad)
                continue
            candidates.append({"row": i, "id": sid, "prompt": human, "answer": answer,
                               "choices": choices, "images": images, "refs": refs,
                               "meta": meta})
        if detected_open:
            log.warning("task %s %s: %d open-ended prompts offer a choice list; they stay "
                        "open-ended as the task declares", task.id, split, detected_open)
        self._keep(task, split, candidates, conv, rejected)
        conv.rejected = [r for _, r in sorted(rejected, key=lambda pair: pair[0])]
        return conv

    def _keep(self, task: TaskSpec, split: str, candidates: list[dict[str, Any]],
              conv: Conversion, rejected: list[tuple[int, Rejection]]) -> None:
        """Decode-check candidates in seeded order until the cap; the rest is dropped by 'cap'."""
        cap = task.caps.get(split)
        order = np.arange(len(candidates))
        if cap is not None and len(candidates) > cap:
            order = _seed_for(self.options.seed, task.id, split).permutation(len(candidates))
        checked: dict[str, str] = {}
        kept = []
        for pos, k in enumerate(order):
            if cap is not None and len(kept) >= cap:
                conv.dropped["cap"] += len(order) - pos
                break
            rec = candidates[int(k)]
            problem = ""
            for path, ref in zip(rec["images"], rec["refs"]):
                key = json.dumps(ref, sort_keys=True)
                if key not in checked:
                    try:
                        checked[key] = decodes(read_ref(ref))
                    except OSError as exc:
                        checked[key] = f"{type(exc).__name__}: {exc}"
                if checked[key]:
                    problem = f"image {path!r} does not decode ({checked[key]})"
                    break
            if problem:
                rejected.append((rec["row"], Rejection(task.id, split, rec["id"],
                                                       "unreadable-image", problem,
                                                       rec["meta"]["source_file"])))
                continue
            kept.append(rec)
        kept.sort(key=lambda r: r["row"])
        conv.kept = kept

    def sample(self, task: TaskSpec, split: str, record: Any, index: int) -> dict[str, Any]:
        images = [{"bytes": read_ref(ref), "path": path}
                  for path, ref in zip(record["images"], record["refs"])]
        return {
            "id": f"{task.id}-{split}-{record['id']}",
            "task": task.id,
            "images": images,
            "prompt": record["prompt"],
            "answer": record["answer"],
            "choices": list(record["choices"]),
            "answer_type": task.answer_type,
            "label": -1,
            "domain": "",
            "meta": json.dumps(record["meta"], sort_keys=True, ensure_ascii=False),
        }


def unique_ids(rows: list[Any]) -> list[str]:
    """One id per row, unique in the file (see the module docstring): the released id; the
    second and later rows of a repeated one ``<id>~2``, ``<id>~3``, ...; ``row-<i>`` where a
    row has none (or is not an object). A made id never takes one the file uses."""
    raw = [str(r["id"]) if isinstance(r, dict) and r.get("id") not in (None, "") else None
           for r in rows]
    taken = {r for r in raw if r is not None}
    seen: dict[str, int] = {}
    out = []
    for i, rid in enumerate(raw):
        if rid is not None and rid not in seen:
            seen[rid] = 1
            out.append(rid)
            continue
        if rid is None:
            made = f"row-{i}"
        else:
            seen[rid] += 1
            made = f"{rid}~{seen[rid]}"
        while made in taken:
            made += f"~row-{i}"
        taken.add(made)
        out.append(made)
    return out


def _load_list(archive, member: str, where: str | None = None) -> list[Any]:
    where = where or f"{archive.label}:{member}"
    try:
        rows = json.loads(archive.read(member))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BuildError(f"{where} is not valid JSON ({exc}); the download may be damaged: "
                         f"delete it and build again") from None
    if not isinstance(rows, list):
        raise BuildError(f"{where} holds a JSON {type(rows).__name__}, expected a list of "
                         f"LLaVA records")
    return rows


def _images_of(rec: dict[str, Any]) -> list[str] | None:
    images = rec.get("image", [])
    if isinstance(images, str):
        return [images]
    if isinstance(images, list) and all(isinstance(p, str) for p in images):
        return list(images)
    return None


def _turns(conversations: Any) -> tuple[str, str, str]:
    """(human turn, gpt turn, what is missing); the first human turn and the gpt turn after it."""
    if not isinstance(conversations, list) or not conversations:
        return "", "", "'conversations' is missing or empty"
    human_at = next((k for k, t in enumerate(conversations)
                     if isinstance(t, dict) and t.get("from") == "human"), None)
    if human_at is None or not isinstance(conversations[human_at].get("value"), str):
        return "", "", "no human turn with a string 'value' in 'conversations'"
    gpt = next((t for t in conversations[human_at + 1:]
                if isinstance(t, dict) and t.get("from") == "gpt"), None)
    if gpt is None or not isinstance(gpt.get("value"), str):
        return "", "", "no gpt turn with a string 'value' after the human turn"
    return conversations[human_at]["value"], gpt["value"], ""


def _commit_of(path: Path) -> str:
    """The commit a Hub cache path belongs to (``.../snapshots/<commit>/<file>``)."""
    parts = Path(path).parts
    if "snapshots" in parts:
        at = len(parts) - 1 - parts[::-1].index("snapshots")
        if at + 1 < len(parts):
            return parts[at + 1]
    return ""
