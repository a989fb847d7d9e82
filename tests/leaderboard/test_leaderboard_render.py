"""The static HTML page: content, escaping, self-containment, and a real headless browser."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from html.parser import HTMLParser

import pytest

from leaderboard.render import render, render_html
from leaderboard.submit import submit
from leaderboard.validate import load_leaderboard

LINK = "https://github.com/example/drake-runs"


@pytest.fixture(scope="module")
def board_with_runs(tmp_path_factory, seeded_source, manifest_bytes, make_result, write_run):
    """The seeded leaderboard plus two reproduced drake-synth methods (3 seeds each)."""
    root = tmp_path_factory.mktemp("render")
    (root / "data").mkdir()
    (root / "data" / "manifest.json").write_bytes(manifest_bytes)
    board = root / "board.json"
    shutil.copyfile(seeded_source, board)
    for method, level in (("fedavg", 55.0), ("ditto", 70.0)):
        runs = [write_run(root / method / str(s), make_result(s, method, level)) for s in range(3)]
        submit(
            runs,
            submitter="Tester <t@example.org>",
            link=LINK,
            leaderboard_path=board,
            data_dirs=[root / "data"],
            date="2025-06-02",
        )
    return load_leaderboard(board)


class _Tables(HTMLParser):
    """Collect every table.lb: its attributes and its rows' data-key values."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self.body: dict = {}
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "lb" in (a.get("class") or ""):
            self.tables.append({"attrs": a, "rows": []})
        elif tag == "tr" and "data-key" in a and self.tables:
            self.tables[-1]["rows"].append(a["data-key"])
        elif tag == "body":
            self.body = a
        elif tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _parse(text: str) -> _Tables:
    parser = _Tables()
    parser.feed(text)
    return parser


def test_page_has_a_ranked_table_per_scenario(board_with_runs) -> None:
    page = render_html(board_with_runs)
    parsed = _parse(page)
    n_scenarios = len({(e.benchmark.name, e.scenario.name) for e in board_with_runs.entries})
    assert len(parsed.tables) == n_scenarios
    assert sum(len(t["rows"]) for t in parsed.tables) == len(board_with_runs.entries)
    synth = page[page.index('data-benchmark="drake-synth"') :]
    synth_rows = _parse(synth).tables[0]["rows"]
    assert [r.split("|")[:2] for r in synth_rows] == [
        ["ditto", "reproduced"],
        ["fedavg", "reproduced"],
    ]
    assert "<svg" in synth[: synth.index("</section>")]
    assert synth.count("<polyline") >= 4  # Self and Others curve per method


def test_page_is_self_contained_and_deterministic(board_with_runs) -> None:
    page = render_html(board_with_runs)
    assert page == render_html(board_with_runs)
    assert not re.search(r"\bsrc\s*=", page)  # nothing is loaded: no scripts, images, frames
    assert "<link" not in page and "@import" not in page and "url(" not in page
    # the only URLs are the entries' own paper/code links (anchors, not loaded)
    hrefs = set(re.findall(r'href="(https?://[^"]+)"', page))
    assert hrefs <= {
        LINK,
        "https://arxiv.org/abs/2506.11024",
        "https://github.com/sajjad-ucsb/pFedMMA",
    }


def test_csp_admits_exactly_the_inline_script(board_with_runs) -> None:
    page = render_html(board_with_runs)
    (script,) = _parse(page).scripts
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert f"script-src &#x27;sha256-{digest}&#x27;" in csp
    assert "default-src &#x27;none&#x27;" in csp


def test_strings_are_escaped(tmp_path, empty_board, data_dir, make_result, write_run) -> None:
    runs = [write_run(tmp_path / str(s), make_result(s)) for s in range(2)]
    submit(
        runs,
        submitter='<script>alert("x")</script> & "co"',
        link=LINK + "?a=1&b=2",
        leaderboard_path=empty_board,
        data_dirs=[data_dir],
        date="2025-06-02",
    )
    page = render_html(load_leaderboard(empty_board))
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;co&quot;" in page
    assert 'href="https://github.com/example/drake-runs?a=1&amp;b=2"' in page
    assert len(_parse(page).scripts) == 1


def test_render_writes_index(tmp_path, board_with_runs) -> None:
    path = render(board_with_runs, tmp_path / "site")
    assert path == tmp_path / "site" / "index.html"
    assert path.read_text(encoding="utf-8") == render_html(board_with_runs)


@pytest.mark.browser
def test_headless_chromium_renders_and_sorts(tmp_path, board_with_runs, chromium) -> None:
    page = render(board_with_runs, tmp_path / "site")
    static = _parse(page.read_text(encoding="utf-8")).tables
    dom = _parse(chromium.dump_dom(page, "#test-sort"))
    assert dom.body.get("data-js") == "ok"  # the script ran under the page's CSP
    assert len(dom.tables) == len(static) > 0
    by_scenario = {}
    for table, rendered in zip(dom.tables, static):
        before = table["attrs"]["data-order-before"].split(",")
        after = table["attrs"]["data-order-after"].split(",")
        after2 = table["attrs"]["data-order-after2"].split(",")
        assert before == rendered["rows"]  # the browser shows the ranked order first
        assert table["rows"] == after2  # the live DOM holds the last sort
        methods = [k.split("|")[0] for k in before]
        assert [k.split("|")[0] for k in after] == sorted(methods)  # click: Method ascending
        assert [k.split("|")[0] for k in after2] == sorted(methods, reverse=True)  # again: desc
        by_scenario[table["attrs"]["id"]] = (before, after)
    # the header click changed the row order of the ranked Tab. 2 table
    drake = [
        (b, a) for b, a in by_scenario.values() if b[0].startswith("fedmosaic|") and len(b) == 10
    ]
    assert drake and all(b != a for b, a in drake)


@pytest.mark.browser
def test_headless_chromium_without_hook_keeps_rank_order(tmp_path, board_with_runs,
                                                         chromium) -> None:
    page = render(board_with_runs, tmp_path / "site")
    dom = _parse(chromium.dump_dom(page))
    assert dom.body.get("data-js") == "ok"
    first = dom.tables[0]
    assert "data-order-after" not in first["attrs"]
    static = _parse(page.read_text()).tables[0]["rows"]
    assert first["rows"] == static
