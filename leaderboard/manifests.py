"""Known data manifests: the link from a leaderboard entry to the exact data it ran on.

A built benchmark folder holds ``manifest.json`` (spec, builder version, seed, row counts and
the sha256 of every shard). Its own sha256 (of the file bytes) therefore pins the data down
to the byte. A reproduced entry carries that hash, and is accepted only if the hash is
*known*:

- listed in ``leaderboard/known_manifests.json`` under the entry's benchmark name and
  version (hashes of released builds), or
- the hash of a ``manifest.json`` found under a ``--data DIR`` given on the command line
  (a local build). If that manifest names a benchmark (top-level ``benchmark``/``version``
  as ``drake build`` writes them, or ``name``/``version`` at the top level or under
  ``benchmark`` or ``spec``), it must be the entry's benchmark at the entry's version.

``known_manifests.json`` has the form
``{"schema_version": "1.0", "manifests": {"<benchmark>": {"<version>": ["<sha256>", ...]}}}``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from leaderboard.errors import SubmissionError
from leaderboard.jsonio import MAX_LEADERBOARD_BYTES, loads_strict, read_json, read_limited

KNOWN_MANIFESTS_PATH = Path(__file__).with_name("known_manifests.json")
MAX_MANIFEST_BYTES = MAX_LEADERBOARD_BYTES
MAX_SEARCH_DEPTH = 4
MAX_MANIFESTS_FOUND = 1000
_SHA = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class LocalManifest:
    """A manifest.json found under a --data folder."""

    path: Path
    sha256: str
    name: str | None
    version: str | None


@dataclass
class ManifestIndex:
    """The hashes a submission's ``manifest_sha256`` may match."""

    known: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    local: list[LocalManifest] = field(default_factory=list)

    def check(self, benchmark: str, version: str, sha256: str | None, where: str) -> None:
        """Require ``sha256`` to be a known manifest of ``benchmark`` at ``version``.

        Raises
        ------
        SubmissionError
            If it matches neither the known list nor a compatible local manifest.
        """
        if sha256 is None:
            raise SubmissionError(f"{where}: a data-manifest sha256 is required")
        if sha256 in self.known.get((benchmark, version), frozenset()):
            return
        for found in self.local:
            if found.sha256 != sha256:
                continue
            if found.name is not None and found.name != benchmark:
                raise SubmissionError(
                    f"{where}: {sha256[:12]}… is the manifest of benchmark {found.name!r} "
                    f"({found.path}), not {benchmark!r}"
                )
            if found.version is not None and found.version != version:
                raise SubmissionError(
                    f"{where}: {sha256[:12]}… is the manifest of {benchmark} version "
                    f"{found.version!r} ({found.path}), not {version!r}"
                )
            return
        raise SubmissionError(
            f"{where}: {sha256} matches no known manifest of {benchmark} {version}; run on a "
            "released build, or pass --data DIR pointing at the built folder that holds "
            "its manifest.json"
        )


def sha256_file(path: Path, limit: int = MAX_MANIFEST_BYTES) -> str:
    """sha256 of a file's bytes (the file must be a regular file under ``limit`` bytes)."""
    return hashlib.sha256(read_limited(path, limit)).hexdigest()


def _declared(doc: object) -> tuple[str | None, str | None]:
    if not isinstance(doc, Mapping):
        return None, None
    if isinstance(doc.get("benchmark"), str):  # drake's builder: {"benchmark": name, "version": v}
        version = doc.get("version")
        return doc["benchmark"], version if isinstance(version, str) else None
    for holder in (doc, doc.get("benchmark"), doc.get("spec")):
        if isinstance(holder, Mapping) and isinstance(holder.get("name"), str):
            version = holder.get("version")
            return holder["name"], version if isinstance(version, str) else None
    return None, None


def find_local_manifests(folders: Iterable[Path]) -> list[LocalManifest]:
    """Hash every ``manifest.json`` under the given folders (depth ≤ 4, no symlinked dirs).

    Raises
    ------
    SubmissionError
        If a folder does not exist or holds no manifest.json at all.
    """
    found: list[LocalManifest] = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise SubmissionError(f"--data {folder}: not a directory")
        before = len(found)
        base_depth = len(folder.parts)
        for root, dirs, files in os.walk(folder, followlinks=False):
            if len(Path(root).parts) - base_depth >= MAX_SEARCH_DEPTH:
                dirs[:] = []
            dirs.sort()
            if "manifest.json" not in files:
                continue
            path = Path(root) / "manifest.json"
            data = read_limited(path, MAX_MANIFEST_BYTES)
            try:
                name, version = _declared(loads_strict(data, str(path)))
            except SubmissionError:
                name, version = None, None
            found.append(LocalManifest(path, hashlib.sha256(data).hexdigest(), name, version))
            if len(found) > MAX_MANIFESTS_FOUND:
                raise SubmissionError(f"--data {folder}: more than {MAX_MANIFESTS_FOUND} manifests")
        if len(found) == before:
            raise SubmissionError(f"--data {folder}: no manifest.json found (searched depth 4)")
    return found


def load_known_manifests(
    path: Path = KNOWN_MANIFESTS_PATH,
) -> dict[tuple[str, str], frozenset[str]]:
    """Read ``known_manifests.json`` into ``{(benchmark, version): {sha256, ...}}``.

    Raises
    ------
    SubmissionError
        If the file is malformed.
    """
    doc = read_json(Path(path), MAX_LEADERBOARD_BYTES)
    manifests = doc.get("manifests") if isinstance(doc, dict) else None
    if not isinstance(manifests, dict) or doc.get("schema_version") != "1.0":
        raise SubmissionError(f"{path}: expected {{'schema_version': '1.0', 'manifests': {{...}}}}")
    out: dict[tuple[str, str], frozenset[str]] = {}
    for name, versions in manifests.items():
        if not isinstance(versions, dict):
            raise SubmissionError(f"{path}: manifests.{name} must map versions to hash lists")
        for version, hashes in versions.items():
            if not isinstance(hashes, list) or not all(
                isinstance(h, str) and _SHA.match(h) for h in hashes
            ):
                raise SubmissionError(
                    f"{path}: manifests.{name}.{version} must be a list of lowercase sha256 hex"
                )
            out[(name, version)] = frozenset(hashes)
    return out


def manifest_index(
    data_dirs: Iterable[Path] = (), known_path: Path = KNOWN_MANIFESTS_PATH
) -> ManifestIndex:
    """Known manifests plus those found under ``data_dirs``."""
    return ManifestIndex(load_known_manifests(known_path), find_local_manifests(data_dirs))
