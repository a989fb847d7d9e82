"""Reading source files safely: every read is size-capped and stays inside its root.

Source archives and folders are untrusted input. A record may name ``../outside/secret.png``,
a folder may hold a symbolic link to ``/etc``, and a 1 kB gzip tar may declare a 1 GiB member.
None of these may put a byte into a build that did not come from the source, or exhaust memory:

* :func:`confined` resolves ``root / name`` and refuses any name that is absolute, climbs with
  ``..``, or reaches its file through a symbolic link (where ``links=False``);
* :func:`read_capped` refuses a file larger than its cap before reading it, and reads at most
  ``cap + 1`` bytes from a stream whose size it cannot know in advance.

Both raise :class:`UnsafeSource`, an ``OSError`` as well as a ``BuildError``: adapters that
reject unreadable rows one by one (``except OSError``) record it as that row's rejection, and
anything else reaches the CLI as one line.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from drake.errors import BuildError

MIB = 1 << 20
MAX_IMAGE_BYTES = 64 * MIB    # one encoded image; DRAKE's largest source image is under 20 MiB
MAX_TEXT_BYTES = 512 * MIB    # one annotation file (JSON, CSV, split list)


class UnsafeSource(BuildError, OSError):
    """A source path leaves its root, goes through a link, or is larger than its cap."""


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n} bytes"


def check_name(name: str, where: str) -> None:
    """Refuse a relative name that is absolute or climbs out with ``..``."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or (parts and parts[0].endswith(":")) or ".." in parts:
        raise UnsafeSource(f"{name!r} points outside {where}; a source may only name files "
                           f"inside its own folder or archive")


def confined(root: Path, name: str | Path, *, links: bool = False) -> Path:
    """``root / name``, refused when it leaves ``root``.

    Parameters
    ----------
    root : Path
        The folder every read must stay in (may itself be reached through a link).
    name : str or Path
        A path relative to ``root``, as a source record or a listing gives it.
    links : bool
        Allow symbolic links whose target stays inside ``root`` (the Hugging Face cache is built
        of them). A user's folder (``--source-dir``) allows none: a tar's links are refused too.
    """
    base = Path(os.path.realpath(root))
    rel = Path(name)
    if rel.is_absolute():  # a listing's own absolute path: fine while it lies under the root
        inside = next((r for r in (Path(root), base) if rel.is_relative_to(r)), None)
        rel = rel.relative_to(inside) if inside is not None else rel
    check_name(rel.as_posix(), str(root))
    path = base / rel
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(base):
        raise UnsafeSource(f"{root / rel} resolves to {real}, outside {root}; a source may only "
                           f"name files inside its own folder (copy the file in instead of "
                           f"linking it)")
    if not links and real != path:
        raise UnsafeSource(f"{root / rel} is reached through a symbolic link; source folders "
                           f"may not contain links (copy the file in instead)")
    return path


def read_capped(path: Path, cap: int, what: str = "file") -> bytes:
    """The bytes of ``path``, refused (before reading) when it is larger than ``cap``."""
    size = os.stat(path).st_size
    if size > cap:
        raise UnsafeSource(too_large(str(path), size, cap, what))
    with open(path, "rb") as handle:
        return read_stream(handle, cap, str(path), what)


def read_stream(handle: BinaryIO, cap: int, label: str, what: str = "file") -> bytes:
    """At most ``cap`` bytes of ``handle``; a longer stream is refused, not truncated."""
    data = handle.read(cap + 1)
    if len(data) > cap:
        raise UnsafeSource(too_large(label, None, cap, what))
    return data


def too_large(label: str, size: int | None, cap: int, what: str) -> str:
    declared = f"is {_size(size)}" if size is not None else "is longer than that"
    return (f"{label}: the {what} {declared}, over the {_size(cap)} cap on one source "
            f"{what}; the source is damaged or hostile (a real one never is): download it again")
