"""Prebuilt benchmark folders on the Hugging Face Hub: `drake download` and `drake push`.

A built folder (``manifest.json``, ``tasks/``, ``partitions/``, ``README.md``, and for real data
``rejected.jsonl``) is pushed to a Hub *dataset* repo as it is: its README is a dataset card
whose ``configs`` make ``datasets.load_dataset(repo)`` load every task and
``load_dataset(repo, "<task>")`` one task. ``drake download`` fetches such a folder file by file
(the manifest first, then exactly the files it names), checks every file against the
manifest's sha256, and only then moves the folder into place; a single mismatch leaves
nothing behind.

Prebuilt folders live in one repo per benchmark, ``PREBUILT_ORG/<benchmark>`` (e.g.
``drake-pfl/drake``); ``--repo`` picks another.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from drake.build import CARD, MANIFEST, recover, sha256_file, swap_into_place, target_dir
from drake.errors import BuildError, DrakeError, NetworkUnavailable, VerifyError
from drake.locks import exclusive
from drake.sources import hub_cache_dir, hub_file, hub_offline, hub_reachable

log = logging.getLogger(__name__)

#: The Hub organisation holding one prebuilt dataset repo per benchmark.
PREBUILT_ORG = "drake-pfl"
DOWNLOAD_HINT = ("offline alternatives: `drake build --benchmark drake-synth` builds DRAKE's "
                 "offline twin with no network; `drake build --source-dir DIR` builds from "
                 "source files you already have; or point HF_HOME at a pre-filled Hugging Face "
                 "cache and set HF_HUB_OFFLINE=1")


def prebuilt_repo(benchmark: str) -> str:
    """The default Hub dataset repo of a benchmark's prebuilt folder."""
    return f"{PREBUILT_ORG}/{benchmark}"


def folder_files(manifest: dict[str, Any]) -> list[str]:
    """Every file of a built folder, relative to it: manifest, card, shards, partitions."""
    from drake.verify import manifest_files

    files = [MANIFEST, CARD] + [entry["file"] for entry in manifest_files(manifest)]
    if manifest.get("rejected"):
        files.append(manifest["rejected"]["file"])
    return files


def download(benchmark: str, out: Path, *, repo: str | None = None, revision: str | None = None,
             cache_dir: Path | str | None = None, overwrite: bool = False,
             progress: Callable[[Iterable, int], Iterable] | None = None) -> Path:
    """Fetch the prebuilt ``benchmark`` into ``out/<benchmark>`` and verify it.

    Parameters
    ----------
    benchmark : str
        A registered benchmark name; the folder's manifest must name the same benchmark.
    out : Path
        Parent folder, as for ``drake build``.
    repo : str, optional
        Hub dataset repo (default :func:`prebuilt_repo`).
    revision : str, optional
        Branch, tag or commit; pin a commit to get the same bytes every time.
    cache_dir : path, optional
        Hugging Face cache (default ``$HF_HOME/hub``).
    overwrite : bool
        Replace an existing folder.

    Raises
    ------
    VerifyError
        A file's sha256 differs from the manifest (nothing is left in place).
    NetworkUnavailable
        No network and the files are not in the cache (fails in seconds).
    """
    from drake.registry import get_benchmark

    get_benchmark(benchmark)  # an unknown name fails before any network access
    repo = repo or prebuilt_repo(benchmark)
    final = target_dir(out, benchmark)
    if (final / MANIFEST).exists() and not overwrite:
        raise BuildError(f"{final} already holds a build; pass --overwrite to replace it")
    if final.exists() and not (final / MANIFEST).exists() and any(final.iterdir()):
        raise BuildError(f"{final} exists and is not a DRAKE build; remove it or choose another "
                         f"--out")

    def fetch(name: str) -> Path:
        return hub_file(repo, name, revision=revision, cache_dir=cache_dir, hint=DOWNLOAD_HINT)

    manifest_path = fetch(MANIFEST)
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as exc:
        raise VerifyError(f"{repo}/{MANIFEST} is not valid JSON ({exc}); it is not a DRAKE "
                          f"build") from None
    if manifest.get("benchmark") != benchmark:
        raise VerifyError(f"{repo} holds a build of {manifest.get('benchmark')!r}, not "
                          f"{benchmark!r}; pass the right --repo")
    expected = {MANIFEST: None, CARD: None}
    from drake.verify import manifest_files

    for entry in manifest_files(manifest):
        expected[entry["file"]] = entry["sha256"]
    if manifest.get("rejected"):
        expected[manifest["rejected"]["file"]] = manifest["rejected"]["sha256"]
    for name in expected:
        _check_relpath(name, repo)
    with exclusive(final, "download into", advice="wait for it to finish, or download into "
                   "another --out"):
        recover(final)
        partial = final.parent / f".{final.name}.download"
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
        try:
            names: Iterable[str] = list(expected)
            if progress:
                names = progress(names, len(expected))
            for name in names:
                try:
                    src = manifest_path if name == MANIFEST else fetch(name)
                except DrakeError:
                    if name == CARD:
                        log.warning("%s has no %s; the folder will lack its dataset card", repo,
                                    CARD)
                        continue
                    raise
                dst = partial / name
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
                want = expected[name]
                if want is not None:
                    got = sha256_file(dst)
                    if got != want:
                        raise VerifyError(
                            f"{repo}{'@' + revision if revision else ''}: {name} has sha256 "
                            f"{got[:12]}…, its manifest says {want[:12]}…; refusing the download "
                            f"(nothing was written to {final}). Clear the cached copy "
                            f"(`hf cache delete`) and retry, or report it to the repo owner")
            from drake.verify import verify

            report = verify(partial)
            if not report.ok:
                raise VerifyError(f"{repo}: the downloaded folder fails verification: "
                                  + "; ".join(report.problems))
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        swap_into_place(partial, final)
    return final


def _check_relpath(name: str, repo: str) -> None:
    parts = Path(name).parts
    if Path(name).is_absolute() or ".." in parts or not parts:
        raise VerifyError(f"{repo}: manifest names an unsafe path {name!r}; refusing it")


def push(folder: Path, repo: str, *, revision: str | None = None, private: bool = False,
         message: str | None = None) -> Any:
    """Verify a built folder, then upload it (with its dataset card) to a Hub dataset repo.

    Only the files the manifest vouches for are uploaded (plus ``manifest.json``, ``README.md``
    and ``rejected.jsonl``), never journals or partial files. Needs a token with write access
    (``hf auth login``). Returns the ``CommitInfo`` of the upload.
    """
    from drake.verify import load_manifest, verify

    folder = Path(folder)
    report = verify(folder)
    if not report.ok:
        raise VerifyError(f"{folder} fails verification, so it is not pushed: "
                          + "; ".join(report.problems))
    manifest = load_manifest(folder)
    if not (folder / CARD).is_file():
        raise VerifyError(f"{folder / CARD} is missing: the dataset card makes the repo load "
                          f"with datasets.load_dataset; rebuild the folder to write it")
    files = folder_files(manifest)
    if hub_offline() or not hub_reachable():
        why = "HF_HUB_OFFLINE is set" if hub_offline() else "it does not answer"
        raise NetworkUnavailable(f"pushing {folder} to {repo} needs the Hugging Face Hub, which "
                                 f"cannot be reached ({why}); retry from a machine with network")
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo, repo_type="dataset", exist_ok=True, private=private)
    if revision:
        api.create_branch(repo, repo_type="dataset", branch=revision, exist_ok=True)
    return api.upload_folder(
        repo_id=repo, repo_type="dataset", folder_path=str(folder), revision=revision,
        allow_patterns=files,
        commit_message=message or f"{manifest['benchmark']} {manifest['version']} "
        f"(builder {manifest['builder_version']}, seed {manifest['seed']}, manifest sha256 "
        f"{sha256_file(folder / MANIFEST)[:12]})")


def populate_cache(repo: str, files: dict[str, Path | bytes], *,
                   cache_dir: Path | str | None = None, revision: str = "main",
                   commit: str | None = None, repo_type: str = "dataset") -> Path:
    """Place files where ``hf_hub_download(..., local_files_only=True)`` finds them.

    For machines without network (and for tests): copy files you obtained some other way into a
    Hugging Face cache laid out as ``<cache>/datasets--org--name/{refs/<revision>,
    snapshots/<commit>/<file>}``. Returns the snapshot folder.

    Parameters
    ----------
    repo : str
        e.g. ``"SNUMPR/DRAKE"``.
    files : dict
        Path inside the repo -> a local file to copy, or the bytes to write.
    cache_dir : path, optional
        See :func:`drake.sources.hub_cache_dir`; required when neither HF_HUB_CACHE nor HF_HOME
        is set, so the user's real cache is never written by accident.
    revision : str
        The branch or tag name to point at the snapshot.
    commit : str, optional
        40-hex commit id of the snapshot (default: derived from the repo and revision).
    """
    import hashlib

    cache = hub_cache_dir(cache_dir)
    if cache is None:
        raise DrakeError("populate_cache needs cache_dir (or HF_HOME / HF_HUB_CACHE set)")
    commit = commit or hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
    root = Path(cache) / f"{repo_type}s--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    for name, content in files.items():
        dst = snapshot / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, (bytes, bytearray)):
            dst.write_bytes(bytes(content))
        else:
            shutil.copyfile(content, dst)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / revision).write_text(commit)
    return snapshot
