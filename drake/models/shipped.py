"""The tiny families' pretrained weights, shipped inside the package.

Pretraining both tiny families takes about two and three quarter hours on two CPU cores (four
stages, :mod:`drake.models.pretrain`, :mod:`drake.models.lookup_pretrain` and
:mod:`drake.models.label_pretrain`), too long for a
quickstart or a CI run, so the suite ships its result (and tiny-clip's and the tiny TAP
backbones', :mod:`drake.models.clip_pretrain`, :mod:`drake.models.tap_pretrain`):
``weights/<name>/`` holds what ``drake models pretrain`` (default arguments, seed 0) writes to
the model cache (the configuration files as stage 2 wrote them). Each
``model.safetensors`` is pinned below by its sha256 and checked every time it is loaded; a
mismatch (a corrupted or hand-edited file) is an error, never a silent load.

``load_model(name)`` reads the user's model cache first (a model pretrained there wins), then
these files. ``load_model(name, cache_dir=...)`` reads that cache only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from drake.models.errors import ModelLoadError

__all__ = ["SHIPPED_ROOT", "SHIPPED_SHA256", "shipped_folder", "verify_shipped"]

SHIPPED_ROOT = Path(__file__).resolve().parent / "weights"
WEIGHTS_FILE = "model.safetensors"

#: sha256 of each shipped ``model.safetensors``.
SHIPPED_SHA256: Mapping[str, str] = MappingProxyType({
    "tiny-llava-llama": "7853c8b98269262abac1f8d89899ff6d703179cd0d579236e98a783311ab9f3c",
    "tiny-llava-qwen": "77c9c875b28ef4b7e8e27b09bfde8522742ba7276cc337c9e6730ec92976132e",
    # the text side and the image tower's last stage (drake.models.clip_pretrain); the rest of
    # the tower is tiny-llava-llama's
    "tiny-clip": "f18239364712da1e47f0f062fd55716a15d06322241ac83241cd4d2e69afa7f8",
    # the whole small FLAVA / ViLT backbone (drake.models.tap_pretrain)
    "tiny-tap": "d907f84e51f80ca7728d5dbb91d7cb1020f13073f9cef3122237d6df8c29bb1f",
    "tiny-tap-vilt": "5cf955640b270b61b64ba7f26c1417d13e79f422c716ec3ec1730e06d84aac70",
})


def shipped_folder(name: str) -> Path | None:
    """The shipped folder of tiny model ``name``, or None when the package ships none."""
    if name not in SHIPPED_SHA256:
        return None
    folder = SHIPPED_ROOT / name
    return folder if (folder / WEIGHTS_FILE).is_file() else None


def verify_shipped(name: str, folder: Path) -> None:
    """Check the shipped weights of ``name`` against the pinned sha256.

    Raises
    ------
    ModelLoadError
        Naming the file, both digests and the fix.
    """
    path = Path(folder) / WEIGHTS_FILE
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    got, want = digest.hexdigest(), SHIPPED_SHA256[name]
    if got != want:
        raise ModelLoadError(
            f"{path} has sha256 {got}, but this version of drake pins {want} for {name}; the "
            "file is damaged or was replaced. Reinstall drake, or run `drake models pretrain` "
            "to rebuild the weights in your model cache (which load_model reads first)."
        )
