"""Fixtures for the adapter tests: an offline Hugging Face cache the tests fill themselves.

``hub`` points ``HF_HOME`` / ``HF_DATASETS_CACHE`` into ``tmp_path`` and sets
``HF_HUB_OFFLINE=1``; ``hub.publish(repo, {split: Dataset}, ...)`` writes a snapshot in the Hub
cache layout (``datasets--org--name/{refs/main, snapshots/<sha>/...}``) with the repo's own file
layout and a README whose YAML ``configs`` say which parquet files form which split, the way the
real dataset repos do. Nothing reaches the network. ``module_hub`` is the same, shared by a
module's tests.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pytest

from drake.adapters.base import AdapterOptions

SHA = "0123456789abcdef0123456789abcdef01234567"


def png_bytes(colour=(200, 30, 30), size=(8, 8), mode="RGB") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, size, colour).save(buf, format="PNG")
    return buf.getvalue()


def jpeg_bytes(colour=(30, 200, 30), size=(8, 8)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


CORRUPT = b"\xff\xd8\xff\xe0 not really a jpeg"


@dataclass
class Hub:
    cache: Path  # the hub cache (HF_HOME/hub)
    root: Path   # HF_HOME

    # image makers, reachable from tests through the fixture (test modules cannot import conftest)
    png = staticmethod(png_bytes)
    jpeg = staticmethod(jpeg_bytes)
    corrupt = CORRUPT
    sha = SHA  # the commit id every published snapshot gets

    def options(self, **kw) -> AdapterOptions:
        return AdapterOptions(cache_dir=self.cache, **kw)

    def publish(self, repo: str, splits: dict, *, config: str = "default", data_dir: str = "data",
                configs: dict | None = None, sha: str = SHA,
                shard: str = "{split}-00000-of-00001.parquet") -> Path:
        """Write ``{split: datasets.Dataset}`` (or ``{config: {split: Dataset}}`` via
        ``configs``) as ``<data_dir>/<shard>`` (``shard`` formatted with the split) in a cached
        snapshot."""
        org, name = repo.split("/")
        base = self.cache / f"datasets--{org}--{name}"
        snap = base / "snapshots" / sha
        snap.mkdir(parents=True, exist_ok=True)
        (base / "refs").mkdir(exist_ok=True)
        (base / "refs" / "main").write_text(sha)
        configs = configs or {config: splits}
        lines = ["---", "configs:"]
        for cfg, parts in configs.items():
            folder = cfg if configs and len(configs) > 1 else data_dir
            lines.append(f"- config_name: {cfg}")
            lines.append("  data_files:")
            for split, ds in parts.items():
                rel = f"{folder}/{shard.format(split=split)}"
                (snap / folder).mkdir(parents=True, exist_ok=True)
                ds.to_parquet(str(snap / rel))
                lines += [f"  - split: {split}", f"    path: {rel}"]
        lines.append("---")
        (snap / "README.md").write_text("\n".join(lines) + "\n")
        return snap


def _offline_hub(home: Path, monkeypatch: pytest.MonkeyPatch) -> Hub:
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(home / "datasets"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    cache = home / "hub"
    cache.mkdir(parents=True)
    import datasets

    datasets.disable_progress_bars()
    return Hub(cache=cache, root=home)


@pytest.fixture
def hub(tmp_path, monkeypatch) -> Hub:
    return _offline_hub(tmp_path / "hf", monkeypatch)


@pytest.fixture(scope="module")
def module_hub(tmp_path_factory):
    """``hub`` shared by a module's tests (one filled cache, e.g. for a build that several tests
    read); the environment is restored after the module."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _offline_hub(tmp_path_factory.mktemp("hub") / "hf", monkeypatch)
