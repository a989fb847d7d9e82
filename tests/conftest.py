"""Suite-wide test settings, and the headless Chromium the page tests drive."""

import subprocess
from pathlib import Path

import pytest
import torch

# One intra-op thread: the tiny models gain nothing from more, and on a shared 2-core machine
# spinning OpenMP workers slow every test down by an order of magnitude.
torch.set_num_threads(1)

CHROMIUM = Path("/usr/bin/chromium")


class Chromium:
    """Debian's chromium, headless, offline and with a throw-away profile: opens a local page
    and returns its DOM after the page's scripts ran, or a screenshot of its first screen."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile

    def _run(self, *args: str) -> str:
        cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars", f"--user-data-dir={self.profile}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def dump_dom(self, page: Path, fragment: str = "", size: tuple[int, int] = (1280, 900)
                 ) -> str:
        """The serialised DOM of ``page`` (opened at ``#fragment``) once it has loaded."""
        return self._run(f"--window-size={size[0]},{size[1]}", "--dump-dom",
                         page.as_uri() + fragment)

    def screenshot(self, page: Path, out: Path, fragment: str = "",
                   size: tuple[int, int] = (1280, 900)) -> Path:
        """A PNG of the first ``size`` pixels of ``page``, as a reader sees it on opening."""
        self._run(f"--window-size={size[0]},{size[1]}", f"--screenshot={out}",
                  page.as_uri() + fragment)
        assert out.is_file() and out.stat().st_size > 0
        return out


@pytest.fixture
def chromium(tmp_path_factory) -> Chromium:
    """Headless :class:`Chromium`; the test is skipped where Debian's chromium is absent."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian chromium (/usr/bin/chromium)")
    return Chromium(tmp_path_factory.mktemp("chromium-profile"))


@pytest.fixture(scope="session")
def micro_synth(tmp_path_factory) -> Path:
    """Tiny drake-synth (seed 1) cut to its first four clients with `drake build --tasks`:
    their four tasks each and the public split, both LLaVA families (clients 0-1 Llama, 2-3
    Qwen), for end-to-end runs whose point does not need all ten clients. Built once per
    test process; tests read it and write their runs elsewhere."""
    from drake.build import build, restrict_spec
    from drake.registry import get_benchmark

    spec = get_benchmark("drake-synth", size="tiny")
    spec = restrict_spec(spec, [t for client in spec.clients[:4] for t in client.tasks]
                         + list(spec.public_tasks))
    assert len(spec.clients) == 4 and len(set(spec.model_mixes["hetero"])) == 2
    return build(spec, tmp_path_factory.mktemp("micro-synth"), seed=1)
