"""Where a task's samples come from: source adapters behind one small interface.

A source knows how many rows a task split has and yields schema samples for a row range. The
builder shards, validates and writes; sources only read. Two sources exist:

* :class:`SynthSource` draws drake-synth samples with PIL and needs nothing.
* :class:`AdapterSource` runs the real-data adapters of :mod:`drake.adapters` (one per
  ``TaskSpec.source`` kind). Each task split is converted **once**, in the parent process, and
  its kept records are cached as JSON under the partial build folder; shard workers (also the
  spawned ones of ``--num-proc``) read the cache instead of converting again.

Hub access goes through :func:`hub_file`, which never hangs without a network: with
``HF_HUB_OFFLINE=1`` it reads only the local Hugging Face cache, otherwise it probes the Hub for a
few seconds first and falls back to the cache, and a file in neither raises
:class:`~drake.errors.NetworkUnavailable` naming the offline alternatives.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from drake.errors import BuildError, DiskSpaceError, HubError, NetworkUnavailable
from drake.specs import BenchmarkSpec, TaskSpec

log = logging.getLogger(__name__)

HUB_HOST = "huggingface.co"
OFFLINE_HINT = ("offline alternatives: `drake build --benchmark drake-synth` builds DRAKE's "
                "offline twin with no network; `--source-dir DIR` reads source files you already "
                "have; or point HF_HOME at a pre-filled Hugging Face cache and set "
                "HF_HUB_OFFLINE=1")
PROBE_TIMEOUT = 4.0  # seconds the Hub has to accept a connection
ETAG_TIMEOUT = 15.0  # seconds a reachable Hub has to answer a file's metadata request
SOURCE_CACHE = ".sources"  # conversion records, under the partial build folder


class TaskSource(Protocol):
    """What the builder needs from a source adapter."""

    def num_rows(self, task: TaskSpec, split: str) -> int:
        """Rows the split will have after caps."""

    def rows(self, task: TaskSpec, split: str, start: int, stop: int) -> Iterator[dict[str, Any]]:
        """Schema samples ``start..stop-1`` of the split, in order."""


class SynthSource:
    """Procedural samples from :mod:`drake.synth`; row ``i`` depends only on (seed, task, split, i)."""

    def __init__(self, seed: int, image_size: int = 64) -> None:
        self.seed = seed
        self.image_size = image_size

    def num_rows(self, task: TaskSpec, split: str) -> int:
        return int(task.caps.get(split, 0))

    def rows(self, task: TaskSpec, split: str, start: int, stop: int) -> Iterator[dict[str, Any]]:
        from drake.synth import generate_sample

        generator = task.source_args.get("generator", task.id)
        for index in range(start, stop):
            sample = generate_sample(generator, split, index, self.seed, self.image_size)
            if generator != task.id:
                sample["task"] = task.id
            yield sample


# --------------------------------------------------------------------------------------------
# Hub access


def hub_offline() -> bool:
    """True when the user switched the Hub off (``HF_HUB_OFFLINE=1``)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hub_host() -> tuple[str, int]:
    endpoint = os.environ.get("HF_ENDPOINT", "").strip()
    if endpoint:
        url = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        if url.hostname:
            return url.hostname, url.port or (80 if url.scheme == "http" else 443)
    return HUB_HOST, 443


def hub_proxy(host: str) -> tuple[str, int] | None:
    """The HTTP proxy a request to ``host`` over HTTPS goes through, as the Hub client (and
    ``urllib``) choose it: ``HTTPS_PROXY`` / ``https_proxy`` (else ``ALL_PROXY``), unless
    ``NO_PROXY`` names the host."""
    proxies = urllib.request.getproxies()
    url = proxies.get("https") or proxies.get("all")
    if not url or urllib.request.proxy_bypass(host):
        return None
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        return None
    return parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80)


def _tunnel(proxy: tuple[str, int], host: str, port: int, timeout: float) -> bool:
    """Whether ``proxy`` opens a tunnel to ``host:port`` (``CONNECT``, answered 2xx)."""
    with socket.create_connection(proxy, timeout=timeout) as conn:
        conn.settimeout(timeout)
        conn.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
                     .encode())
        status = conn.recv(1024).split(b"\r\n", 1)[0].split()
    return len(status) >= 2 and status[1][:1] == b"2"


def hub_reachable(timeout: float = PROBE_TIMEOUT) -> bool:
    """True when the Hub (``HF_ENDPOINT`` or huggingface.co) answers a TCP connection in time,
    through the HTTPS proxy when one is configured (:func:`hub_proxy`; on a proxy-only cluster
    a direct connection would fail although downloads work).

    DNS lookups can hang far longer than a socket timeout, so the probe runs in a daemon thread
    and is abandoned at the deadline: the caller learns "no network" in seconds, never minutes.
    """
    if hub_offline():
        return False
    host, port = _hub_host()
    proxy = hub_proxy(host)
    result: list[bool] = []

    def probe() -> None:
        try:
            if proxy is not None:
                result.append(_tunnel(proxy, host, port, timeout))
                return
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


_PROBED: dict[tuple[str, int], bool] = {}


def _online() -> bool:
    """Probe the Hub once per process and endpoint (a build asks for many files)."""
    if hub_offline():
        return False
    key = _hub_host()
    if key not in _PROBED:
        _PROBED[key] = hub_reachable()
    return _PROBED[key]


def hub_cache_dir(cache_dir: str | Path | None = None) -> Path | None:
    """The Hub cache to use: ``--cache-dir``, else ``HF_HUB_CACHE``, else ``$HF_HOME/hub``.

    Read from the environment at call time (``huggingface_hub`` reads it once, at import), so a
    cache named in the environment of the running process is honoured. ``None`` means the
    library default (``~/.cache/huggingface/hub``).
    """
    if cache_dir:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return None


def hub_call(fetch: Callable[[], Any], *, repo: str, revision: str | None, what: str,
             hint: str, not_cached: str) -> Any:
    """Run a ``huggingface_hub`` download and turn its errors into one-line DRAKE errors.

    ``not_cached`` is the message when the Hub is off or unreachable and the cache lacks the
    files; the others name the repo, the revision or the file and say how to fix them.
    """
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        try:
            return fetch()
        except OSError as exc:  # a disk problem is never reported as a network one
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskSpaceError(
                    f"the disk filled up while downloading {what} ({exc.strerror}); free "
                    f"space, or pass --cache-dir on a larger disk, and run the command again "
                    f"(finished downloads are kept)") from None
            if isinstance(exc, PermissionError):
                raise DiskSpaceError(f"cannot write {what} into the Hugging Face cache "
                                     f"({exc}); pass --cache-dir to a folder you can "
                                     f"write") from None
            raise
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):
        raise NetworkUnavailable(not_cached) from None
    except GatedRepoError:
        raise HubError(f"{repo} is gated: accept its terms on the Hub and log in with "
                       f"`hf auth login`, then retry") from None
    except RepositoryNotFoundError:
        raise HubError(f"dataset repo {repo} not found on the Hub (or it is private: log in "
                       f"with `hf auth login`); check the repo id in drake/catalog/") from None
    except RevisionNotFoundError:
        raise HubError(f"dataset repo {repo} has no revision {revision!r}; pass an existing "
                       f"branch, tag or commit to --revision") from None
    except EntryNotFoundError:
        raise HubError(f"{what} does not exist on the Hub") from None
    except (HfHubHTTPError, OSError) as exc:
        raise NetworkUnavailable(f"downloading {what} failed ({type(exc).__name__}: {exc}); "
                                 f"{hint}") from None


def hub_file(repo_id: str, filename: str, *, revision: str | None = None,
             cache_dir: str | Path | None = None, hint: str = OFFLINE_HINT) -> Path:
    """Local path of one file of a Hub *dataset* repo, downloaded into the cache if needed.

    Parameters
    ----------
    repo_id, filename : str
        e.g. ``"SNUMPR/DRAKE"``, ``"IRFL.tar"``.
    revision : str, optional
        Branch, tag or commit; the repo's default branch when None.
    cache_dir : path, optional
        See :func:`hub_cache_dir`.
    hint : str
        What to tell the user when neither the Hub nor the cache has the file.

    Raises
    ------
    NetworkUnavailable
        The Hub is off or unreachable and the cache lacks the file (fails in seconds).
    HubError
        The Hub answered that the repo, revision or file does not exist or is gated.
    """
    from huggingface_hub import hf_hub_download

    online = _online()
    cache = hub_cache_dir(cache_dir)
    at = f"@{revision}" if revision else ""
    host = _hub_host()[0]
    why = (f"no answer from {host}" if online else "HF_HUB_OFFLINE is set" if hub_offline()
           else f"{host} did not answer within {PROBE_TIMEOUT:g} s")
    # a Hub that accepts the connection but never answers must not stall the build either
    timeout = {} if os.environ.get("HF_HUB_ETAG_TIMEOUT") else {"etag_timeout": ETAG_TIMEOUT}
    where = cache or "the default Hugging Face cache"
    path = hub_call(
        lambda: hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision,
                                cache_dir=cache, local_files_only=not online, **timeout),
        repo=repo_id, revision=revision, what=f"{repo_id}{at}/{filename}", hint=hint,
        not_cached=f"{repo_id}{at}/{filename} is not in the Hugging Face cache ({where}) and "
                   f"the Hub cannot be reached ({why}); {hint}")
    return Path(path)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (whose disk a new folder there would use)."""
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def hub_sizes(repo_id: str, filenames: Iterable[str], *, revision: str | None = None
              ) -> dict[str, int]:
    """Bytes of each named file of a Hub dataset repo (one metadata request, no download)."""
    from huggingface_hub import HfApi

    names = list(filenames)
    at = f"@{revision}" if revision else ""
    infos = hub_call(lambda: HfApi().get_paths_info(repo_id, names, revision=revision,
                                                    repo_type="dataset"),
                     repo=repo_id, revision=revision, what=f"{repo_id}{at} file sizes",
                     hint=OFFLINE_HINT, not_cached=f"the Hub cannot be reached for {repo_id}; "
                     f"{OFFLINE_HINT}")
    return {info.path: int(getattr(info, "size", 0) or 0) for info in infos}


def check_download_space(repo_id: str, filenames: Iterable[str], *,
                         revision: str | None = None,
                         cache_dir: str | Path | None = None) -> None:
    """Refuse, before anything is downloaded, when the files of ``repo_id`` that the cache
    lacks need more room than the cache's disk has free.

    Offline (or with every file cached) there is nothing to download and nothing to check.

    Raises
    ------
    DiskSpaceError
        Naming the files' total size, the folder and its free space.
    """
    if not _online():
        return
    from huggingface_hub import constants, try_to_load_from_cache

    cache = hub_cache_dir(cache_dir)
    missing = [f for f in dict.fromkeys(filenames)
               if not isinstance(try_to_load_from_cache(repo_id, f, cache_dir=cache,
                                                        revision=revision,
                                                        repo_type="dataset"), str)]
    if not missing:
        return
    need = sum(hub_sizes(repo_id, missing, revision=revision).values())
    folder = _existing(cache or Path(constants.HF_HUB_CACHE))
    free = shutil.disk_usage(folder).free
    if need > free:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                         else "")
        raise DiskSpaceError(f"downloading {len(missing)} file(s) of {repo_id} ({shown}) needs "
                             f"{_gib(need)} in {folder}, which has {_gib(free)} free; nothing "
                             f"was downloaded: free space, or pass --cache-dir on a larger "
                             f"disk")


# --------------------------------------------------------------------------------------------
# Real-data sources


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot store a {type(obj).__name__} in the conversion cache")


class AdapterSource:
    """The builder's :class:`TaskSource` on top of :mod:`drake.adapters`.

    Life cycle (driven by :func:`drake.build.build`):

    1. :meth:`fetch`: every adapter that defines ``prefetch(tasks)`` downloads the files its
       tasks need. Runs before the build writes anything, so a missing network fails clean.
    2. :meth:`prepare`: ``Adapter.convert`` for each task split, once; the counts must reconcile
       (``source_rows == kept + dropped + rejected``); the kept records go to
       ``<partial>/.sources/<task>/<split>.json``. A resumed build reuses that cache.
    3. :meth:`num_rows` / :meth:`rows`: the shard writers (any process) read the cache and call
       ``Adapter.sample``.
    """

    def __init__(self, spec: BenchmarkSpec, options: Any) -> None:
        self.spec = spec
        self.options = options
        self.workdir: Path | None = None
        self.counts: dict[str, dict[str, dict[str, Any]]] = {}
        self.origins: dict[str, dict[str, Any]] = {}
        self.rejections: list[dict[str, str]] = []
        self._adapters: dict[str, Any] = {}
        self._records: dict[tuple[str, str], list[Any]] = {}

    # pickled into --num-proc workers: adapters (open files) and loaded records stay behind
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_adapters"] = {}
        state["_records"] = {}
        state["rejections"] = []
        return state

    def fingerprint(self) -> str:
        """Identity of where the data comes from (part of the resume key)."""
        opts = self.options
        blob = {"source_dir": str(opts.source_dir or ""), "revision": opts.revision or "",
                "kinds": sorted({t.source for t in self.spec.tasks})}
        if opts.subsets != "released":  # the default leaves earlier fingerprints as they were
            blob["subsets"] = opts.subsets
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()

    def adapter(self, kind: str):
        if kind not in self._adapters:
            from drake.adapters import adapter_class

            try:
                cls = adapter_class(kind)
            except ImportError as exc:
                raise BuildError(f"the source adapter for kind {kind!r} is not available in "
                                 f"this version of the suite ({exc}); `drake build --benchmark "
                                 f"drake-synth` builds offline") from None
            self._adapters[kind] = cls(self.options)
        return self._adapters[kind]

    def _by_kind(self) -> dict[str, list[TaskSpec]]:
        groups: dict[str, list[TaskSpec]] = {}
        for task in self.spec.tasks:
            groups.setdefault(task.source, []).append(task)
        return groups

    def fetch(self) -> None:
        for kind, tasks in self._by_kind().items():
            prefetch = getattr(self.adapter(kind), "prefetch", None)
            if prefetch is not None:
                prefetch(tasks)

    def _cache_path(self, task: str, split: str) -> Path:
        assert self.workdir is not None, "AdapterSource.prepare() must run first"
        return self.workdir / SOURCE_CACHE / task / f"{split}.json"

    def _cache_key(self, task: TaskSpec, split: str) -> str:
        blob = {"task": task.to_dict(), "split": split, "seed": self.options.seed,
                "source": self.fingerprint()}
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()

    def prepare(self, workdir: Path,
                progress: Callable[[Iterable, int], Iterable] | None = None) -> list[dict]:
        """Convert every task split once (or reuse the cache); return all rejections."""
        self.workdir = Path(workdir)
        jobs = [(task, split) for task in self.spec.tasks
                for split in self.adapter(task.source).splits(task)]
        items: Iterable = progress(jobs, len(jobs)) if progress else jobs
        rejections: list[dict[str, str]] = []
        for task, split in items:
            path = self._cache_path(task.id, split)
            key = self._cache_key(task, split)
            cached = None
            if path.is_file():
                try:
                    cached = json.loads(path.read_text())
                except json.JSONDecodeError:
                    cached = None
                if cached is not None and cached.get("key") != key:
                    cached = None
            if cached is None:
                cached = self._convert(task, split, key)
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_text(json.dumps(cached, default=_json_default, sort_keys=True))
                os.replace(tmp, path)
            self.counts.setdefault(task.id, {})[split] = cached["counts"]
            if cached.get("origin"):
                self.origins[task.id] = cached["origin"]
            rejections.extend(cached["rejected"])
        self.rejections = rejections
        self._records = {}
        return rejections

    def _convert(self, task: TaskSpec, split: str, key: str) -> dict[str, Any]:
        adapter = self.adapter(task.source)
        conv = adapter.convert(task, split)
        if conv.task != task.id or conv.split != split:
            raise BuildError(f"adapter {task.source!r} returned the conversion of "
                             f"{conv.task}/{conv.split} for {task.id}/{split}")
        if not conv.reconciles():
            c = conv.counts()
            raise BuildError(
                f"task {task.id} split {split}: counts do not reconcile: source rows "
                f"{c['source_rows']} != kept {c['kept']} + dropped {c['dropped']} + rejected "
                f"{c['rejected']} (a bug in the {task.source!r} adapter)")
        describe = getattr(adapter, "describe", None)
        return {"key": key, "counts": conv.counts(), "kept": list(conv.kept),
                "rejected": [r.to_dict() for r in conv.rejected],
                "origin": describe(task) if describe else None}

    def num_rows(self, task: TaskSpec, split: str) -> int:
        return int(self.counts.get(task.id, {}).get(split, {}).get("kept", 0))

    def _kept(self, task: str, split: str) -> list[Any]:
        if (task, split) not in self._records:
            cached = json.loads(self._cache_path(task, split).read_text())
            self._records = {(task, split): cached["kept"]}  # one split at a time per worker
        return self._records[(task, split)]

    def rows(self, task: TaskSpec, split: str, start: int, stop: int) -> Iterator[dict[str, Any]]:
        records = self._kept(task.id, split)
        adapter = self.adapter(task.source)
        for index in range(start, stop):
            yield adapter.sample(task, split, records[index], index)


def source_for(spec: BenchmarkSpec, seed: int, image_size: int = 64,
               options: Any = None) -> TaskSource:
    """The source that builds ``spec``: synthetic, or the real-data adapters.

    ``options`` is an :class:`drake.adapters.AdapterOptions` (where the source lives); its seed
    is replaced by ``seed``. Nothing is read or downloaded here: see :class:`AdapterSource`.
    """
    kinds = {t.source for t in spec.tasks}
    if kinds == {"synth"}:
        return SynthSource(seed, image_size)
    if "synth" in kinds:
        raise BuildError(f"benchmark {spec.name!r} mixes synthetic and real tasks; build them "
                         f"as separate benchmarks")
    from dataclasses import replace

    from drake.adapters import AdapterOptions

    options = replace(options or AdapterOptions(), seed=seed)
    return AdapterSource(spec, options)
