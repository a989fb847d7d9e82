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
