"""What the Hub-backed and folder-backed adapters share: opening a pinned Hub snapshot, reading
raw image bytes, checking them, and the seeded split and cap rules.

Every adapter goes through the same few functions so that a count or a split means the same thing
in every manifest:

* :func:`load_snapshot` resolves ``repo@revision`` to a local snapshot with
  ``huggingface_hub.snapshot_download`` (``local_files_only`` when ``HF_HUB_OFFLINE=1`` or the
  Hub does not answer, so a pre-filled ``HF_HOME`` cache or ``--cache-dir`` works with no
  network) and opens it with ``datasets.load_dataset(<snapshot>, name=config)``. Not cached and
  no Hub, it raises :class:`~drake.errors.NetworkUnavailable` naming the offline alternatives.
* :func:`derived_rows` is the one rule for sources without an official test split (see its
  docstring); :func:`capped_order` is the one rule for size caps.
* :func:`image_problem` decodes an image fully, so a truncated file is caught in ``convert``,
  before the builder plans any shard.

Images are stored as the source's own encoded bytes (JPEG stays JPEG); only an adapter that
transforms pixels re-encodes, through :func:`rgb_png`, which is deterministic.
"""

from __future__ import annotations

import io
import json
import math
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from drake.adapters.base import Conversion, Rejection
from drake.adapters.confine import MAX_IMAGE_BYTES, UnsafeSource, confined, read_capped
from drake.errors import BuildError
from drake.specs import TaskSpec

_PROBE: dict[str, bool] = {}


def _local_only() -> bool:
    """Read only the cache: the Hub is switched off, or did not answer a probe (memoised)."""
    from drake.sources import hub_offline, hub_reachable

    if hub_offline():
        return True
    if "online" not in _PROBE:
        _PROBE["online"] = hub_reachable()
    return not _PROBE["online"]


def snapshot_path(repo: str, *, revision: str | None, cache_dir: Path | None,
                  allow_patterns: Sequence[str] | None = None) -> Path:
    """The local snapshot of Hub dataset ``repo`` at ``revision``, downloaded unless offline.

    The cache is ``--cache-dir``, else ``HF_HUB_CACHE`` / ``$HF_HOME/hub`` read at call time
    (:func:`drake.sources.hub_cache_dir`). With ``HF_HUB_OFFLINE=1``, or when the Hub does not
    answer a short probe, only the cache is read, so nothing hangs. The snapshot folder's name is
    the commit id, which :func:`snapshot_commit` reports for the manifest.

    Raises
    ------
    NetworkUnavailable
        The Hub is off or unreachable and the snapshot is not cached, or the download failed.
    HubError
        The Hub answered that the repo or revision does not exist, or is gated.
    """
    from huggingface_hub import snapshot_download

    from drake.sources import OFFLINE_HINT, hub_cache_dir, hub_call, hub_offline

    cache = hub_cache_dir(cache_dir)
    local = _local_only()
    at = f"{repo}@{revision or 'main'}"
    why = "HF_HUB_OFFLINE is set" if hub_offline() else "the Hub did not answer"
    path = hub_call(
        lambda: snapshot_download(repo_id=repo, repo_type="dataset", revision=revision,
                                  cache_dir=str(cache) if cache else None,
                                  local_files_only=local,
                                  allow_patterns=list(allow_patterns) if allow_patterns else None),
        repo=repo, revision=revision, what=f"dataset {at}", hint=f"retry, or {OFFLINE_HINT}",
        not_cached=f"dataset {at} is not in the Hugging Face cache "
                   f"({cache or 'the default cache'}) and the Hub cannot be reached ({why}); "
                   f"{OFFLINE_HINT}")
    return Path(path)


def snapshot_commit(path: Path) -> str:
    """The commit id of a cached snapshot folder (its name), for the manifest."""
    return Path(path).name


def _arrow_cache() -> str | None:
    """Where ``datasets`` keeps its Arrow copies, read at call time (it reads the environment
    once, at import): ``HF_DATASETS_CACHE``, else ``$HF_HOME/datasets``, else its default."""
    if os.environ.get("HF_DATASETS_CACHE"):
        return os.environ["HF_DATASETS_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "datasets")
    return None


def load_snapshot(repo: str, *, config: str | None, revision: str | None,
                  cache_dir: Path | None, allow_patterns: Sequence[str] | None = None):
    """``datasets.load_dataset`` on the pinned local snapshot.

    Returns ``(DatasetDict of every split, commit id of the snapshot)``.
    """
    from datasets import load_dataset

    path = snapshot_path(repo, revision=revision, cache_dir=cache_dir,
                         allow_patterns=allow_patterns)
    # snapshot files are links into the repo's blobs/ folder, beside snapshots/
    _ROOTS.add(Path(path).parents[1] if Path(path).parent.name == "snapshots" else Path(path))
    try:
        dd = load_dataset(str(path), name=config, cache_dir=_arrow_cache())
    except (ValueError, FileNotFoundError) as exc:
        what = f"config {config!r} of " if config else ""
        raise BuildError(f"could not load {what}dataset {repo} from its snapshot {path}: "
                         f"{exc}") from exc
    return dd, snapshot_commit(path)


def pick_split(dd: Mapping[str, Any], name: str, repo: str):
    """Split ``name`` of a loaded ``DatasetDict``, or a clear error listing the splits it has."""
    if name not in dd:
        raise BuildError(
            f"dataset {repo} has no split {name!r} (it has {sorted(dd)}); fix 'splits' or "
            f"'derive_test' of this task in drake/catalog/others.py")
    return dd[name]


def raw_images(ds, columns: Sequence[str]):
    """``ds`` with its image columns left encoded (``{"bytes", "path"}``), never decoded to PIL."""
    from datasets import Image, List

    for col in columns:
        feature = ds.features[col]
        if isinstance(feature, Image):
            ds = ds.cast_column(col, Image(decode=False))
        elif isinstance(feature, List) and isinstance(feature.feature, Image):
            ds = ds.cast_column(col, List(Image(decode=False)))
    return ds


def iter_rows(ds, rows: Sequence[int] | None, columns: Sequence[str],
              batch_size: int = 64) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row index, {column: value})`` for the given rows of ``ds`` (all rows when ``None``)."""
    sub = ds.select_columns(list(columns))
    index = range(len(ds)) if rows is None else [int(r) for r in rows]
    if rows is not None:
        sub = sub.select(index)
    pos = 0
    for batch in sub.iter(batch_size=batch_size):
        n = len(batch[columns[0]]) if columns else 0
        for j in range(n):
            yield index[pos + j], {c: batch[c][j] for c in columns}
        pos += n


def column_values(ds, column: str) -> list[Any]:
    """One light column of ``ds`` as Python values, read from Arrow without touching images."""
    return ds.data.column(column).to_pylist()


def image_bytes(value: Any) -> bytes | None:
    """The encoded bytes of a stored image value (``{"bytes", "path"}``, bytes, or ``None``).

    A value with a path but no bytes (``datasets`` image folders) is read from that path only when
    it lies in a snapshot :func:`load_snapshot` opened or in the ``datasets`` cache: a row is
    data, and may not make the build read ``/etc`` or ``~/.ssh``. Anything else gives ``None``,
    which adapters reject as a missing field. A file over the image cap raises ``UnsafeSource``.
    """
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, Mapping):
        data = value.get("bytes")
        if data:
            return bytes(data)
        path = value.get("path")
        if path and Path(path).is_absolute():
            for root in read_roots():
                try:
                    p = confined(root, path, links=True)  # the Hub cache is made of links
                except UnsafeSource:
                    continue
                return read_capped(p, MAX_IMAGE_BYTES, "image") if p.is_file() else None
    return None


_ROOTS: set[Path] = set()


def read_roots() -> list[Path]:
    """Folders an image path stored in a row may point into: the snapshots opened by this
    process and the ``datasets`` cache (where it extracts archives)."""
    from datasets import config

    extra = [Path(p) for p in (_arrow_cache(), config.HF_DATASETS_CACHE) if p]
    return sorted(_ROOTS | set(extra))


def image_problem(data: bytes) -> str | None:
    """Why ``data`` is not a readable image (decoded in full), or ``None`` when it is."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            if im.width < 1 or im.height < 1:
                return "image has no pixels"
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def rgb_png(data: bytes, size: int | None) -> bytes:
    """Decode, convert to RGB, resize to ``size`` x ``size`` (bilinear) and encode as PNG.

    Deterministic: the same input bytes always give the same output bytes
    (:func:`drake.schema.encode_image` fixes the PNG options).
    """
    from PIL import Image

    from drake.schema import encode_image

    with Image.open(io.BytesIO(data)) as im:
        out = im.convert("RGB")
        if size:
            out = out.resize((int(size), int(size)), Image.Resampling.BILINEAR)
    return encode_image(out)["bytes"]


def _stable(key: str) -> int:
    return zlib.crc32(key.encode("utf-8"))


def derived_rows(n: int, split: str, rule: Mapping[str, Any], *, labels: Sequence[Any] | None,
                 default_seed: int) -> np.ndarray:
    """Rows of a source split (size ``n``) that form our ``split`` under a seeded rule.

    The rule comes from the task's ``source_args["derive_test"]``:

    ``{"from": SRC, "train_count": K, "seed": S}``
        ``perm = np.random.default_rng(S).permutation(n)``; train = ``perm[:K]``, test = the rest.
        This is ``Dataset.shuffle(seed=S)`` followed by a cut at ``K`` (TAP's VQAv2 rule).
    ``{"from": SRC, "fraction": F, "seed": S}``
        ``perm`` as above, ``n_test = ceil(F * n)``, test = ``perm[:n_test]`` (the test rows of
        ``Dataset.train_test_split(test_size=F, seed=S)``), train = every other row.
    ``{"from": SRC, "fraction": F, "seed": S, "stratify": true}``
        Per label (sorted by its string form), one generator draws a permutation of the rows of that
        label; ``floor(F * n_c + 0.5)`` go to test. Needs ``labels``.

    ``seed`` defaults to ``default_seed`` (the build seed). Indices come back sorted, so records keep
    source order.

    Examples
    --------
    >>> derived_rows(10, "test", {"from": "train", "fraction": 0.3, "seed": 0},
    ...              labels=None, default_seed=0).tolist()
    [2, 4, 6]
    """
    if split not in ("train", "test"):
        raise BuildError(f"a derived split is 'train' or 'test', not {split!r}")
    seed = int(rule.get("seed", default_seed))
    rng = np.random.default_rng(seed)
    if "train_count" in rule:
        k = int(rule["train_count"])
        if not 0 < k < n:
            raise BuildError(f"derive_test.train_count={k} must lie strictly between 0 and the "
                             f"{n} source rows; lower it in drake/catalog/others.py")
        perm = rng.permutation(n)
        chosen = perm[:k] if split == "train" else perm[k:]
        return np.sort(chosen)
    frac = float(rule.get("fraction", 0.0))
    if not 0.0 < frac < 1.0:
        raise BuildError(f"derive_test.fraction={frac} must lie strictly between 0 and 1")
    if rule.get("stratify"):
        if labels is None or len(labels) != n:
            raise BuildError("a stratified derive_test rule needs one label per source row")
        by: dict[str, list[int]] = {}
        for i, lab in enumerate(labels):
            by.setdefault(str(lab), []).append(i)
        test: list[int] = []
        for key in sorted(by):
            members = np.asarray(by[key], dtype=np.int64)
            perm = members[rng.permutation(members.size)]
            test.extend(perm[: int(math.floor(frac * members.size + 0.5))].tolist())
        mask = np.zeros(n, dtype=bool)
        mask[test] = True
        return np.flatnonzero(mask if split == "test" else ~mask)
    perm = rng.permutation(n)
    n_test = int(math.ceil(frac * n))
    chosen = perm[:n_test] if split == "test" else perm[n_test:]
    return np.sort(chosen)


def capped_order(n: int, cap: int | None, *, seed: int, key: str) -> list[int]:
    """The order in which ``n`` candidates are checked before keeping them.

    Without a cap (or one that cuts nothing) it is source order. When ``cap < n`` it is a seeded
    permutation (``default_rng([seed, crc32(key)])``): the adapter keeps checking in that order
    until ``cap`` rows passed, so the kept rows are a seeded random subset that fills the cap even
    when some candidates are rejected, and rows past the cap are never decoded (rule ``cap``).
    Adapters sort what they keep back into source order.
    """
    if cap is None or n <= int(cap):
        return list(range(n))
    return np.random.default_rng([int(seed), _stable(key)]).permutation(n).tolist()


def keep_until_cap(conv: Conversion, task: TaskSpec, candidates: list[dict[str, Any]],
                   read: Callable[[list[dict[str, Any]]], Iterable[Any]],
                   check: Callable[[dict[str, Any], Any], Rejection | str | None], *,
                   seed: int) -> None:
    """Check ``candidates`` in :func:`capped_order` and keep those that pass, up to the cap.

    ``read(candidates)`` yields each candidate's heavy values (image bytes, text) in the order
    given; ``check(candidate, values)`` returns ``None`` to keep it, a :class:`Rejection`, or the
    name of a rule that drops it. Kept records and rejections come back in source order.
    """
    cap = task_cap(task, conv.split)
    order = capped_order(len(candidates), cap, seed=seed, key=f"{task.id}/{conv.split}")
    kept: list[tuple[int, dict[str, Any]]] = []
    rejected: list[tuple[int, Rejection]] = []
    values = iter(read([candidates[p] for p in order]))
    for seen, pos in enumerate(order):
        if cap is not None and len(kept) >= cap:
            conv.dropped["cap"] += len(order) - seen
            break
        outcome = check(candidates[pos], next(values))
        if outcome is None:
            kept.append((pos, candidates[pos]))
        elif isinstance(outcome, Rejection):
            rejected.append((pos, outcome))
        else:
            conv.dropped[outcome] += 1
    conv.kept.extend(rec for _, rec in sorted(kept, key=lambda t: t[0]))
    conv.rejected.extend(r for _, r in sorted(rejected, key=lambda t: t[0]))


def sort_rejections(conv: Conversion) -> None:
    """Put rejections in source order (by the ``...[row]`` their ``where`` ends with)."""
    def key(r: Rejection) -> tuple[str, int]:
        head, _, tail = r.where.rpartition("[")
        return (head, int(tail.rstrip("]"))) if tail.rstrip("]").isdigit() else (r.where, -1)

    conv.rejected.sort(key=key)


def task_cap(task: TaskSpec, split: str) -> int | None:
    cap = task.caps.get(split)
    return None if cap is None else int(cap)


def dump_meta(meta: Mapping[str, Any]) -> str:
    """The ``meta`` field: compact, key-sorted JSON (byte-stable across builds)."""
    return json.dumps(dict(meta), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def reject(task: TaskSpec, split: str, source_id: str, reason: str, detail: str,
           where: str = "") -> Rejection:
    return Rejection(task=task.id, split=split, source_id=source_id, reason=reason,
                     detail=detail, where=where)


def display_name(raw: str, rename: Mapping[str, str] | None = None) -> str:
    """A class name as prompts use it: renamed (case-insensitive key), ``_`` as spaces, trimmed.

    ``display_name("Faces", {"faces": "face"}) == "face"``; ``"ice_cream" -> "ice cream"``
    (CoOp / pFedMMA write class names with spaces).
    """
    name = str(raw)
    if rename:
        lowered = {str(k).lower(): v for k, v in rename.items()}
        name = lowered.get(name.lower(), name)
    return " ".join(name.replace("_", " ").split())


def norm_key(name: str) -> str:
    """The key two spellings of one class name share (case, ``_``, ``-`` and spaces ignored)."""
    return "".join(ch for ch in str(name).lower() if ch.isalnum())


def fill_template(template: str, class_name: str) -> str:
    """A CoOp template with the class name in its ``{}`` slot (empty when there is no slot)."""
    return template.format(class_name) if "{}" in template else ""
