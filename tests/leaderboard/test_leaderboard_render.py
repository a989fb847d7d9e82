"""The static HTML page: content, escaping, self-containment, and a real headless browser."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from html.parser import HTMLParser

import pytest
from PIL import Image

from leaderboard.render import render, render_html
from leaderboard.submit import submit
from leaderboard.validate import load_leaderboard

LINK = "https://github.com/example/drake-runs"
HOSTILE = '<script>document.title="pwned"</script> Lab'


@pytest.fixture(scope="module")
def board_with_runs(tmp_path_factory, seeded_source, manifest_bytes, make_result, write_run):
    """The seeded leaderboard plus two reproduced drake-synth methods (3 seeds each), one
    submitted by someone whose name carries a script tag."""
    root = tmp_path_factory.mktemp("render")
    (root / "data").mkdir()
    (root / "data" / "manifest.json").write_bytes(manifest_bytes)
    board = root / "board.json"
    shutil.copyfile(seeded_source, board)
    for method, level in (("fedavg", 55.0), ("ditto", 70.0)):
        runs = [write_run(root / method / str(s), make_result(s, method, level)) for s in range(3)]
        submit(
            runs,
            submitter="Tester <t@example.org>" if method == "fedavg" else HOSTILE,
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


def _sections(page: str) -> list[tuple[str, str]]:
    """``(paper heading, benchmark)`` of every benchmark section, in page order."""
    found, paper = [], None
    for m in re.finditer(r'<section class="(paper|bench)" (?:data-paper|id="b-\d+" '
                         r'data-benchmark)="([^"]+)"', page):
        if m.group(1) == "paper":
            paper = m.group(2)
        else:
            found.append((paper, m.group(2)))
    return found


def test_drake_comes_first_then_the_benchmarks_grouped_by_paper(board_with_runs) -> None:
    sections = _sections(render_html(board_with_runs))
    papers = list(dict.fromkeys(p for p, _ in sections))
    assert papers == ["DRAKE", "FedMosaic", "FediLoRA", "pFedMMA", "TAP",
                      "Benchmarks no paper reports on"]
    assert sections[0] == ("DRAKE", "drake")
    by_paper = {p: {b for q, b in sections if q == p} for p in papers}
    assert by_paper["FedMosaic"] == {"hflb"}
    assert by_paper["Benchmarks no paper reports on"] == {"drake-synth"}
    assert {"cifar10-dir", "domainnet", "clip-base2novel/dtd"} <= by_paper["pFedMMA"]
    page = render_html(board_with_runs)
    assert page.index('class="matrix"') < page.index('<section class="bench"')


def test_the_summary_matrix_ranks_methods_per_benchmark(board_with_runs) -> None:
    page = render_html(board_with_runs)
    matrix = page[page.index('<table class="matrix"') : page.index("</table>",
                                                                    page.index('class="matrix"'))]
    methods = {e.method.name for e in board_with_runs.entries}
    rows = re.findall(r'<tr data-provenance="(\w+)"><th class="m">([^<]+)</th>', matrix)
    assert {m for _, m in rows} == methods
    assert ("reproduced", "ditto") in rows and ("reported", "ditto") in rows
    # drake-synth: ditto (level 70) leads fedavg (level 55), each alone in its rank group
    synth = re.findall(r'<tr data-provenance="reproduced"><th class="m">(\w+)</th>.*?'
                       r'data-for="drake-synth" title="[^"]*"><a href="#b-\d+">([\d.]+)</a>',
                       matrix)
    assert sorted(synth) == [("ditto", "1"), ("fedavg", "2")]
    # fedmosaic leads every DRAKE scenario of FedMosaic Tab. 2
    assert re.search(r'<th class="m">fedmosaic</th><td class="p">reported</td>'
                     r'<td class="s0" data-for="drake" title="[^"]*"><a href="#b-0">1</a>',
                     matrix)


def test_reported_rows_carry_the_paper_s_plus_minus_and_reproduced_their_interval(
    board_with_runs,
) -> None:
    page = render_html(board_with_runs)
    drake = page[page.index('data-benchmark="drake" data-scenario="dynamic-hetero"') :]
    fedmosaic = drake[drake.index('data-key="fedmosaic|reported') :].split("</tr>", 1)[0]
    assert "67.86 ± 0.51" in fedmosaic and "<small>[" not in fedmosaic  # FedMosaic Tab. 2
    synth = page[page.index('data-benchmark="drake-synth"', page.index('class="bench"')) :]
    ditto = synth[synth.index('data-key="ditto|reproduced') :].split("</tr>", 1)[0]
    assert re.search(r"\d+\.\d\d ± \d+\.\d\d<br><small>\[\d+\.\d\d, \d+\.\d\d\]</small>", ditto)
    assert f'<a href="{LINK}" rel="noopener noreferrer">run record</a>' in ditto


def _body(dom: str) -> dict[str, str]:
    return _parse(dom).body


@pytest.mark.browser
def test_headless_chromium_first_screen_holds_the_matrix_then_drake(
    tmp_path, board_with_runs, chromium
) -> None:
    page = render(board_with_runs, tmp_path / "site")
    # 1280 x 1100: headless Chromium's viewport is then 1280 x 957, as on a 1080p screen
    shot = chromium.screenshot(page, tmp_path / "leaderboard.png", size=(1280, 1100))
    with Image.open(shot) as image:
        assert image.size == (1280, 1100)
        colours = {c for _, c in image.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert len(colours) > 8  # the matrix's shades, not a blank page
    body = _body(chromium.dump_dom(page, "#test-filter", size=(1280, 1100)))
    assert body["data-js"] == "ok"
    viewport, matrix = int(body["data-viewport"]), int(body["data-top-matrix"])
    drake, other = int(body["data-top-drake"]), int(body["data-top-other"])
    assert 0 < matrix < drake < viewport < other  # no other benchmark before DRAKE


@pytest.mark.browser
def test_headless_chromium_filters_change_what_is_shown(tmp_path, board_with_runs,
                                                        chromium) -> None:
    page = render(board_with_runs, tmp_path / "site")
    n_reproduced = sum(e.provenance == "reproduced" for e in board_with_runs.entries)
    dom = chromium.dump_dom(page, "#test-filter")
    body = _body(dom)
    assert int(body["data-rows-before"]) == len(board_with_runs.entries)
    assert int(body["data-rows-after"]) == n_reproduced == 2  # picked "reproduced"
    dom = chromium.dump_dom(page, "#benchmark=drake-synth")  # the state a link carries
    shown = re.findall(r'<section class="bench" id="b-\d+" data-benchmark="([^"]+)"[^>]*?'
                       r'(hidden="")?>', dom)
    assert {b for b, hidden in shown if not hidden} == {"drake-synth"}
    assert len(shown) == len({(e.benchmark.name, e.scenario.name)
                              for e in board_with_runs.entries})
    assert re.search(r'<th class="b" data-paper="[^"]+" data-for="drake" [^>]*hidden', dom)
    # the submitter's script tag is text: nothing ran, the page's own script did
    assert _body(dom)["data-js"] == "ok" and "pwned" not in dom.split("<body", 1)[0]
    assert len(_parse(dom).scripts) == 1
    assert "&lt;script&gt;document.title=\"pwned\"&lt;/script&gt; Lab" in dom


def test_a_reproduced_entry_shows_the_preset_it_ran(tmp_path, empty_board, data_dir,
                                                    make_result, write_run) -> None:
    docs = [make_result(s) for s in range(2)]
    for doc in docs:
        doc["method"]["hyperparameters"]["preset"] = "paper"
    submit([write_run(tmp_path / str(s), d) for s, d in enumerate(docs)], submitter="T",
           link=LINK, leaderboard_path=empty_board, data_dirs=[data_dir], date="2025-06-02")
    entry = load_leaderboard(empty_board).entries[0]
    assert entry.provenance == "reproduced"
    assert entry.provenance_label == "reproduced (paper preset)"
    assert "<td>reproduced (paper preset)</td>" in render_html(load_leaderboard(empty_board))
    entry.method.hyperparameters.pop("preset")  # a run from before presets: the plain label
    assert entry.provenance_label == "reproduced"


def test_rows_of_one_method_show_what_sets_them_apart() -> None:
    from leaderboard.model import Leaderboard
    from tests.leaderboard.test_leaderboard_ranking import _variant

    board = Leaderboard(schema_version="1.0", entries=[
        _variant("disentafl", 60.0, {"post_steps": 10}, "a" * 64),
        _variant("disentafl", 50.0, {"post_steps": 0}, "b" * 64),
    ])
    page = render_html(board)
    assert ">disentafl (post_steps=10)</td>" in page
    assert ">disentafl (post_steps=0)</td>" in page
