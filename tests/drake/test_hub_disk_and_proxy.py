"""The Hub path on a real cluster: the reachability probe honours HTTPS_PROXY, a download that
cannot fit is refused before it starts, and a full disk is reported as a full disk."""

import errno
import socket
import threading

import pytest

import drake.sources as sources
from drake.cli import main
from drake.errors import DiskSpaceError, NetworkUnavailable
from tests.drake.test_hub_build import write_drake_tar


class RecordingProxy:
    """A loopback HTTP proxy that records each request line and answers CONNECT with
    ``status``, opening no tunnel."""

    def __init__(self, status: bytes = b"200 Connection established") -> None:
        self.status = status
        self.requests: list[str] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(4096).decode()
                self.requests.append(data.split("\r\n", 1)[0])
                conn.sendall(b"HTTP/1.1 " + self.status + b"\r\n\r\n")

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def clean_hub_env(monkeypatch):
    for key in ("HF_HUB_OFFLINE", "HF_ENDPOINT", "NO_PROXY", "no_proxy", "ALL_PROXY",
                "all_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(key, raising=False)
    sources._PROBED.clear()
    yield monkeypatch
    sources._PROBED.clear()


@pytest.mark.parametrize(("status", "reachable"), [(b"200 Connection established", True),
                                                   (b"403 Forbidden", False)])
def test_the_hub_probe_goes_through_the_https_proxy(clean_hub_env, status, reachable):
    proxy = RecordingProxy(status)
    try:
        clean_hub_env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        assert sources.hub_reachable(timeout=3) is reachable
        assert proxy.requests == ["CONNECT huggingface.co:443 HTTP/1.1"]
        # an HF_ENDPOINT is probed through the proxy too, at its own host and port
        clean_hub_env.setenv("HF_ENDPOINT", "https://hub.example.org:8443")
        sources.hub_reachable(timeout=3)
        assert proxy.requests[-1] == "CONNECT hub.example.org:8443 HTTP/1.1"
    finally:
        proxy.close()


def test_no_proxy_for_the_hub_host_probes_directly(clean_hub_env):
    proxy = RecordingProxy()
    try:
        clean_hub_env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        clean_hub_env.setenv("NO_PROXY", "localhost,huggingface.co")
        assert sources.hub_proxy("huggingface.co") is None
        sources.hub_reachable(timeout=1)
        assert proxy.requests == []
        assert sources.hub_proxy("hub.example.org") == ("127.0.0.1", proxy.port)
    finally:
        proxy.close()


@pytest.fixture
def online_build(clean_hub_env, tmp_path):
    """A build that believes the Hub is up, with a download that must never start."""
    clean_hub_env.setattr(sources, "_online", lambda: True)
    calls = []

    def no_download(*args, **kwargs):
        calls.append(args)
        raise AssertionError("nothing may be downloaded")

    import huggingface_hub

    clean_hub_env.setattr(huggingface_hub, "hf_hub_download", no_download)
    clean_hub_env.setenv("HF_HOME", str(tmp_path / "home"))
    return clean_hub_env, calls


def test_a_download_larger_than_the_free_space_is_refused_before_it_starts(online_build,
                                                                           tmp_path, capsys):
    monkeypatch, calls = online_build
    asked = []

    def sizes(repo, files, revision=None):
        asked.append((repo, list(files)))
        return {f: 10 * 2**30 for f in files}

    monkeypatch.setattr(sources, "hub_sizes", sizes)
    monkeypatch.setattr(sources.shutil, "disk_usage",
                        lambda path: type("Usage", (), {"free": 2**30})())
    argv = ["build", "--tasks", "IRFL-0,IRFL-1", "--out", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "downloading 1 file(s) of SNUMPR/DRAKE (IRFL.tar) needs 10.0 GiB" in err
    assert "1.0 GiB free; nothing was downloaded" in err and "--cache-dir" in err
    assert "network" not in err and "offline" not in err
    assert asked == [("SNUMPR/DRAKE", ["IRFL.tar"])] and calls == []
    assert not (tmp_path / "out" / "drake").exists()


def test_a_cached_source_needs_no_space_check(online_build, tmp_path):
    monkeypatch, _ = online_build
    from drake.hub import populate_cache

    tar = write_drake_tar(tmp_path / "IRFL.tar")
    populate_cache("SNUMPR/DRAKE", {"IRFL.tar": tar}, cache_dir=tmp_path / "cache",
                   commit="c" * 40)
    monkeypatch.setattr(sources, "hub_sizes", lambda *a, **k: pytest.fail("asked the Hub"))
    sources.check_download_space("SNUMPR/DRAKE", ["IRFL.tar"], cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_disk_that_fills_during_a_download_is_not_a_network_failure(online_build, tmp_path,
                                                                      code):
    monkeypatch, _ = online_build
    import huggingface_hub

    def fill(*args, **kwargs):
        raise OSError(code, "No space left on device")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fill)
    with pytest.raises(DiskSpaceError, match="the disk filled up while downloading "
                       "SNUMPR/DRAKE/IRFL.tar") as caught:
        sources.hub_file("SNUMPR/DRAKE", "IRFL.tar", cache_dir=tmp_path / "cache")
    assert not isinstance(caught.value, NetworkUnavailable)
    assert "offline alternatives" not in str(caught.value)


def test_a_full_disk_while_writing_says_so(monkeypatch, tmp_path, capsys):
    import drake.build

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "shard.parquet"))

    monkeypatch.setattr(drake.build, "build", full)
    assert main(["build", "--benchmark", "drake-synth", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "the disk is full" in err and "resume where they stopped" in err
