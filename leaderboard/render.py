"""A static, self-contained HTML page of the leaderboard.

The page needs no server and loads nothing from outside: styles, the sorting and filtering
script and the plots are inline, and a Content-Security-Policy admits only the page's own
script and style (by hash), so even an escaping mistake could not run injected script. Every
string from the leaderboard is HTML-escaped. It works from ``file://``.

Layout, top to bottom:

1. Filters (shown once the script runs): provenance (reported / reproduced) and benchmark.
   The filter state is kept in the URL fragment (``#provenance=reproduced&benchmark=drake``),
   so a filtered view can be linked to.
2. A summary matrix: one row per method and provenance, one column per benchmark (grouped by
   paper). A cell is the method's mean rank group over the benchmark's scenarios, coloured by
   its position within each ranking (darker is better); hovering gives the ranks per scenario.
3. The DRAKE benchmark's scenarios, then the other benchmarks grouped by the paper whose
   tables the reported entries come from (the paper of DRAKE first, then alphabetically), then
   benchmarks no paper reports on (drake-synth and the other offline twins).

Each scenario is one table ranked as in :mod:`leaderboard.ranking`, reported and reproduced
entries together (a Provenance column tells them apart). Reported entries show the paper's ±
where the paper prints one; reproduced entries show mean ± sample std with the Student-t 95%
interval and link to their run record. Clicking a column header sorts by it (click again to
reverse). Where reproduced entries carry a per-round curve, an inline SVG plots the mean
Self score (solid) and Others score (dashed) over rounds, one colour per entry.

Test hooks: opened with the URL fragment ``#test-sort``, the page clicks each table's Method
header once and twice and records the row order before and after in the table's
``data-order-before``, ``data-order-after`` and ``data-order-after2`` attributes. With
``#test-filter`` it records where the matrix, the DRAKE section and the first other section
are (``data-top-*`` on ``<body>``, in CSS pixels, with ``data-viewport``), then picks
"reproduced" in the provenance filter and records the visible entry rows before and after in
``data-rows-before`` and ``data-rows-after``. Once the script has run, ``<body>`` carries
``data-js="ok"``.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from leaderboard.jsonio import atomic_write_text
from leaderboard.metrics import metric_order, metric_spec
from leaderboard.model import Entry, Leaderboard
from leaderboard.ranking import RankedBoard, RankedRow, rank

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;
color:#222}
h1{font-size:1.6rem}h2{font-size:1.15rem;margin-top:2.2rem}
table.lb{border-collapse:collapse;width:100%;margin:.5rem 0}
table.lb th,table.lb td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;
vertical-align:top}
table.lb th{cursor:pointer;background:#f4f4f4;user-select:none;white-space:nowrap}
table.lb th[aria-sort=ascending]::after{content:" \\25B2"}
table.lb th[aria-sort=descending]::after{content:" \\25BC"}
tr.reproduced td{background:#eef7ee}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
small{color:#666}.legend span{margin-right:1rem}
svg{max-width:100%;height:auto;border:1px solid #eee}
h2.paper{font-size:1.35rem;margin-top:1.6rem;border-bottom:2px solid #ccc}
form.filters{margin:.6rem 0;padding:.4rem .6rem;background:#f6f6f6;border-radius:4px}
form.filters label{margin-right:1.2rem}
div.mbox{max-height:55vh;overflow:auto;display:inline-block;max-width:100%}
table.matrix{border-collapse:collapse;font-size:11px;line-height:1.2;margin:.3rem 0}
table.matrix th,table.matrix td{padding:0 4px;border:1px solid #fff;text-align:center;
white-space:nowrap}table.matrix th a{color:inherit;text-decoration:none}
table.matrix th.b{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;
text-align:left;padding:4px 1px}
table.matrix th.m{text-align:left}table.matrix td.p{color:#666;text-align:left}
table.matrix td a{color:inherit;text-decoration:none;display:block}
[hidden]{display:none!important}
"""

_SCRIPT = """
(function(){
  function key(cell, type){
    var v = cell.getAttribute('data-sort');
    if (type === 'num') { var f = parseFloat(v); return isNaN(f) ? null : f; }
    return (v === null ? cell.textContent : v).toLowerCase();
  }
  function sortBy(table, th){
    var idx = Array.prototype.indexOf.call(th.parentNode.cells, th);
    var type = th.getAttribute('data-type');
    var current = th.getAttribute('aria-sort');
    var dir = current ? (current === 'ascending' ? 'descending' : 'ascending')
                      : (th.getAttribute('data-first') || 'ascending');
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(a, b){
      var x = key(a.cells[idx], type), y = key(b.cells[idx], type);
      if (x === null || y === null) { return (x === null) - (y === null); }
      var r = x < y ? -1 : (x > y ? 1 : 0);
      return dir === 'ascending' ? r : -r;
    });
    rows.forEach(function(r){ body.appendChild(r); });
    Array.prototype.forEach.call(th.parentNode.cells, function(c){
      c.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir);
  }
  function order(table){
    return Array.prototype.map.call(table.tBodies[0].rows, function(r){
      return r.getAttribute('data-key'); }).join(',');
  }
  var tables = document.querySelectorAll('table.lb');
  Array.prototype.forEach.call(tables, function(table){
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th){
      th.tabIndex = 0;
      th.addEventListener('click', function(){ sortBy(table, th); });
      th.addEventListener('keydown', function(e){ if (e.key === 'Enter') { sortBy(table, th); } });
    });
  });
  var form = document.getElementById('filters');
  var prov = document.getElementById('f-provenance');
  var bench = document.getElementById('f-benchmark');
  function visibleRows(){
    return Array.prototype.filter.call(document.querySelectorAll('table.lb tbody tr'),
      function(r){ return r.offsetParent !== null; }).length;
  }
  function apply(){
    var p = prov.value, b = bench.value;
    Array.prototype.forEach.call(document.querySelectorAll('table.lb tbody tr'), function(r){
      r.hidden = p !== '' && r.getAttribute('data-provenance') !== p; });
    Array.prototype.forEach.call(document.querySelectorAll('section.bench'), function(sec){
      var rows = sec.querySelectorAll('table.lb tbody tr:not([hidden])').length;
      sec.hidden = (b !== '' && sec.getAttribute('data-benchmark') !== b) || rows === 0; });
    Array.prototype.forEach.call(document.querySelectorAll('section.paper'), function(sec){
      sec.hidden = sec.querySelectorAll('section.bench:not([hidden])').length === 0; });
    Array.prototype.forEach.call(document.querySelectorAll('[data-for]'), function(el){
      el.hidden = b !== '' && el.getAttribute('data-for') !== b; });
    Array.prototype.forEach.call(document.querySelectorAll('table.matrix tbody tr'), function(r){
      var cells = r.querySelectorAll('td[data-for]:not([hidden]):not(.e)').length;
      r.hidden = (p !== '' && r.getAttribute('data-provenance') !== p) || cells === 0; });
    Array.prototype.forEach.call(document.querySelectorAll('table.matrix th.pp'),
      function(th){
        var n = document.querySelectorAll('table.matrix th.b[data-paper="' +
          th.getAttribute('data-paper') + '"]:not([hidden])').length;
        th.hidden = n === 0; th.colSpan = Math.max(n, 1); });
    var shown = document.getElementById('shown');
    shown.textContent = document.querySelectorAll('table.lb tbody tr:not([hidden])').length;
  }
  function remember(){
    var parts = [];
    if (prov.value) { parts.push('provenance=' + encodeURIComponent(prov.value)); }
    if (bench.value) { parts.push('benchmark=' + encodeURIComponent(bench.value)); }
    history.replaceState(null, '', parts.length ? '#' + parts.join('&') :
                         location.pathname + location.search);
  }
  location.hash.replace(/^#/, '').split('&').forEach(function(pair){
    var kv = pair.split('='), value = decodeURIComponent(kv[1] || '');
    var select = kv[0] === 'provenance' ? prov : (kv[0] === 'benchmark' ? bench : null);
    if (select && Array.prototype.some.call(select.options, function(o){
        return o.value === value; })) { select.value = value; }
  });
  [prov, bench].forEach(function(select){
    select.addEventListener('change', function(){ apply(); remember(); }); });
  form.hidden = false;
  apply();
  if (location.hash === '#test-filter') {
    var top = function(el){ return el ? Math.round(el.getBoundingClientRect().top) : -1; };
    var body = document.body;
    body.setAttribute('data-viewport', window.innerHeight);
    body.setAttribute('data-top-matrix', top(document.querySelector('table.matrix')));
    body.setAttribute('data-top-drake',
                      top(document.querySelector('section.bench[data-benchmark="drake"]')));
    body.setAttribute('data-top-other',
                      top(document.querySelector('section.bench:not([data-benchmark="drake"])')));
    body.setAttribute('data-rows-before', visibleRows());
    prov.value = 'reproduced';
    prov.dispatchEvent(new Event('change'));
    body.setAttribute('data-rows-after', visibleRows());
  }
  if (location.hash === '#test-sort') {
    Array.prototype.forEach.call(tables, function(table){
      var th = table.querySelector('th[data-col="method"]');
      table.setAttribute('data-order-before', order(table));
      th.click();
      table.setAttribute('data-order-after', order(table));
      th.click();
      table.setAttribute('data-order-after2', order(table));
    });
  }
  document.body.setAttribute('data-js', 'ok');
})();
"""

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(metric: str, value: float) -> str:
    return f"{value:.4f}" if metric == "mse" else f"{value:.2f}"


def _short_source(entry: Entry) -> str:
    if entry.citation is not None:
        return f"{entry.citation.paper.split(' (', 1)[0]} {entry.citation.table}"
    return f"{entry.submitter}"


def _row_key(entry: Entry) -> str:
    return f"{entry.method.name}|{entry.provenance}|{(entry.method.config_sha256 or '')[:8]}"


def _metric_cell(entry: Entry, metric: str) -> str:
    stats = entry.metrics.get(metric)
    if stats is None:
        return '<td class="num" data-sort="">–</td>'
    text = _fmt(metric, stats.mean)
    if stats.std is not None:
        text += f" ± {_fmt(metric, stats.std)}"
    if stats.ci95 is not None:
        text += f"<br><small>[{_fmt(metric, stats.ci95[0])}, {_fmt(metric, stats.ci95[1])}]</small>"
    return f'<td class="num" data-sort="{stats.mean!r}">{text}</td>'


def _source_cell(entry: Entry) -> str:
    """Reported: the paper and table (linked to the paper). Reproduced: the submitter and a
    link to the run record."""
    label = _e(_short_source(entry))
    if entry.link is not None:
        text = "run record" if entry.provenance == "reproduced" else label
        link = f'<a href="{_e(entry.link)}" rel="noopener noreferrer">{text}</a>'
        label = f"{label} · {link}" if entry.provenance == "reproduced" else link
    details = []
    if entry.citation is not None and entry.citation.note:
        details.append(entry.citation.note)
    if entry.provenance == "reproduced":
        details.append(
            f"manifest {entry.benchmark.manifest_sha256}, config {entry.method.config_sha256}, "
            f"seeds {entry.seeds}"
        )
        if entry.software is not None:
            details.append(
                f"drake {entry.software.package_version} {entry.software.git_hash or ''}"
            )
    title = f' title="{_e(" | ".join(details))}"' if details else ""
    return f'<td data-sort="{_e(_short_source(entry))}"{title}>{label}</td>'


def _table(board: RankedBoard, index: int) -> str:
    others = metric_order({m for row in board.rows for m in row.entry.metrics} - {board.primary})
    arrow = "↑" if board.higher_is_better else "↓"
    first = "descending" if board.higher_is_better else "ascending"
    head = [
        '<th data-col="rank" data-type="num" data-first="ascending">Rank</th>',
        '<th data-col="method" data-type="text">Method</th>',
        '<th data-col="provenance" data-type="text">Provenance</th>',
        f'<th data-col="{_e(board.primary)}" data-type="num" data-first="{first}">'
        f"{_e(board.primary)} {arrow}</th>",
    ]
    for metric in others:
        up = metric_spec(metric).higher_is_better
        head.append(
            f'<th data-col="{_e(metric)}" data-type="num" '
            f'data-first="{"descending" if up else "ascending"}">'
            f"{_e(metric)} {'↑' if up else '↓'}</th>"
        )
    head += [
        '<th data-col="seeds" data-type="num">Seeds</th>',
        '<th data-col="source" data-type="text">Source</th>',
    ]
    body = []
    for row in board.rows:
        body.append(_row(row, board.primary, others))
    return (
        f'<table class="lb" id="t-{index}"><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _row(row: RankedRow, primary: str, others: Sequence[str]) -> str:
    entry = row.entry
    rank_cell = (
        f'<td class="num" data-sort="{row.group}">{row.group}</td>'
        if row.group is not None
        else '<td class="num" data-sort="">–</td>'
    )
    seeds = entry.n_seeds
    cells = [
        rank_cell,
        f'<td data-sort="{_e(row.label)}">{_e(row.label)}</td>',
        f"<td>{_e(entry.provenance_label)}</td>",
        _metric_cell(entry, primary),
        *(_metric_cell(entry, m) for m in others),
        f'<td class="num" data-sort="{"" if seeds is None else seeds}">'
        f"{'–' if seeds is None else seeds}</td>",
        _source_cell(entry),
    ]
    return (
        f'<tr class="{_e(entry.provenance)}" data-provenance="{_e(entry.provenance)}" '
        f'data-key="{_e(_row_key(entry))}">{"".join(cells)}</tr>'
    )


def _plot(board: RankedBoard) -> str:
    shown = [row for row in board.rows if row.entry.curve is not None]
    if not shown:
        return ""
    width, height, left, right, top, bottom = 640, 300, 48, 16, 16, 40
    rounds = [r for row in shown for r in row.entry.curve.rounds]  # type: ignore[union-attr]
    x_lo, x_hi = min(rounds), max(rounds)
    x_span = (x_hi - x_lo) or 1

    def x(r: float) -> float:
        return left + (r - x_lo) / x_span * (width - left - right)

    def y(v: float) -> float:
        return top + (100.0 - v) / 100.0 * (height - top - bottom)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="Self score over rounds">'
    ]
    for v in (0, 25, 50, 75, 100):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            'stroke="#eee"/>'
            f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v}</text>'
        )
    for r in sorted({x_lo, x_hi, round((x_lo + x_hi) / 2)}):
        parts.append(
            f'<text x="{x(r):.1f}" y="{height - bottom + 16}" font-size="11" '
            f'text-anchor="middle">{r}</text>'
        )
    parts.append(
        f'<text x="{(left + width - right) / 2:.1f}" y="{height - 6}" font-size="12" '
        'text-anchor="middle">round</text>'
    )
    legend = []
    for i, row in enumerate(shown):
        color = _PALETTE[i % len(_PALETTE)]
        curve = row.entry.curve
        assert curve is not None
        pts = " ".join(f"{x(r):.1f},{y(v):.1f}" for r, v in zip(curve.rounds, curve.self))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>')
        if curve.others is not None:
            pts = " ".join(f"{x(r):.1f},{y(v):.1f}" for r, v in zip(curve.rounds, curve.others))
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
                f'stroke-dasharray="5,4" points="{pts}"/>'
            )
        legend.append(
            f'<span><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" '
            f'fill="{color}"/></svg> {_e(row.label)}</span>'
        )
    parts.append("</svg>")
    return (
        "<figure>"
        + "".join(parts)
        + '<figcaption class="legend">'
        + "".join(legend)
        + " <small>solid: Self, dashed: Others (mean over seeds)</small></figcaption></figure>"
    )


OTHER_BENCHMARKS = "Benchmarks no paper reports on"
"""Heading of the benchmarks without paper-reported entries (drake-synth and its twins)."""


def _paper(entry: Entry) -> str:
    assert entry.citation is not None
    return entry.citation.paper.split(" (", 1)[0]


def paper_groups(boards: Sequence[RankedBoard]) -> list[tuple[str, list[str]]]:
    """``[(heading, [benchmark, ...]), ...]`` in page order: DRAKE first, then each paper the
    reported entries cite (DRAKE's paper first, then alphabetically) with its benchmarks, then
    the benchmarks no paper reports on. A benchmark's paper is the one most of its reported
    entries cite."""
    cited: dict[str, Counter[str]] = {}
    for b in boards:
        for row in b.rows:
            if row.entry.citation is not None:
                cited.setdefault(b.benchmark, Counter())[_paper(row.entry)] += 1
    paper_of = {bench: c.most_common(1)[0][0] for bench, c in cited.items()}
    names = sorted({b.benchmark for b in boards})
    first = paper_of.get("drake")
    papers = sorted(set(paper_of.values()), key=lambda p: (p != first, p.lower()))
    groups = [("DRAKE", ["drake"])] if "drake" in names else []
    for paper in papers:
        members = [n for n in names if paper_of.get(n) == paper and n != "drake"]
        if members:
            groups.append((paper, members))
    rest = [n for n in names if n not in paper_of and n != "drake"]
    if rest:
        groups.append((OTHER_BENCHMARKS, rest))
    return groups


SHADES = 8
"""Colour steps of the summary matrix (classes ``s0``, best, to ``s7``, worst)."""


def _shade_css() -> str:
    """One class per colour step: dark green (best) to pale; light text on the dark ones."""
    rules = []
    for i in range(SHADES):
        lightness = 28 + 64 * i / (SHADES - 1)
        text = "color:#fff;" if lightness < 55 else ""
        rules.append(f"table.matrix td.s{i}{{{text}background:hsl(140,45%,{lightness:.0f}%)}}")
    return "\n".join(rules) + "\n"


def _matrix(boards: Sequence[RankedBoard], groups: Sequence[tuple[str, list[str]]],
            anchors: dict[str, int]) -> str:
    """Methods × benchmarks: each cell the mean rank group over the benchmark's scenarios."""
    cells: dict[tuple[str, str], dict[str, list]] = {}
    for b in boards:
        worst = max((r.group for r in b.rows if r.group is not None), default=1)
        best: dict[tuple[str, str], int] = {}
        for row in b.rows:
            if row.group is None:
                continue
            key = (row.entry.method.name, row.entry.provenance)
            best[key] = min(best.get(key, row.group), row.group)
        for key, group in best.items():
            cell = cells.setdefault(key, {}).setdefault(b.benchmark, [])
            cell.append((b.scenario, group, (group - 1) / (worst - 1) if worst > 1 else 0.0))
    columns = [(paper, bench) for paper, benches in groups for bench in benches]

    def overall(key: tuple[str, str]) -> tuple[float, str, str]:
        positions = [p for per in cells[key].values() for _, _, p in per]
        return (sum(positions) / len(positions), key[0], key[1])

    head1 = "".join(
        f'<th class="pp" colspan="{len(benches)}" data-paper="{_e(paper)}" title="{_e(paper)}">'
        f"{_e('other' if paper == OTHER_BENCHMARKS else paper)}</th>"
        for paper, benches in groups
    )
    head2 = "".join(
        f'<th class="b" data-paper="{_e(paper)}" data-for="{_e(bench)}" title="{_e(bench)}">'
        f'<a href="#b-{anchors[bench]}">{_e(bench.rsplit("/", 1)[-1])}</a></th>'
        for paper, bench in columns
    )
    rows = []
    for key in sorted(cells, key=overall):
        method, provenance = key
        tds = []
        for _, bench in columns:
            per = cells[key].get(bench)
            if not per:
                tds.append(f'<td class="e" data-for="{_e(bench)}"></td>')
                continue
            mean_group = sum(g for _, g, _ in per) / len(per)
            shade = round((SHADES - 1) * sum(p for _, _, p in per) / len(per))
            title = (f"{method} ({provenance}) on {bench}: rank "
                     + ", ".join(f"{g} on {scen}" for scen, g, _ in per))
            tds.append(
                f'<td class="s{shade}" data-for="{_e(bench)}" title="{_e(title)}">'
                f'<a href="#b-{anchors[bench]}">{mean_group:.2g}</a></td>'
            )
        rows.append(
            f'<tr data-provenance="{_e(provenance)}"><th class="m">{_e(method)}</th>'
            f'<td class="p">{_e(provenance)}</td>{"".join(tds)}</tr>'
        )
    # the matrix grows with every method and ablation the papers report: it scrolls inside
    # its box so that DRAKE's tables still start on the first screen
    return (
        '<div class="mbox"><table class="matrix" id="summary"><thead>'
        f'<tr><th rowspan="2" class="m">Method</th><th rowspan="2">Provenance</th>{head1}</tr>'
        f"<tr>{head2}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _filters(groups: Sequence[tuple[str, list[str]]]) -> str:
    options = "".join(
        f'<optgroup label="{_e(paper)}">'
        + "".join(f'<option value="{_e(b)}">{_e(b)}</option>' for b in benches)
        + "</optgroup>"
        for paper, benches in groups
    )
    return (
        '<form class="filters" id="filters" hidden>'
        '<label>Provenance <select id="f-provenance"><option value="">all</option>'
        '<option value="reported">reported (paper tables)</option>'
        '<option value="reproduced">reproduced (this suite)</option></select></label>'
        '<label>Benchmark <select id="f-benchmark"><option value="">all</option>'
        f"{options}</select></label>"
        '<small><span id="shown"></span> entries shown</small></form>'
    )


def _section(i: int, b: RankedBoard) -> str:
    n_rep = sum(1 for r in b.rows if r.entry.provenance == "reproduced")
    reported = len(b.rows) - n_rep
    return (
        f'<section class="bench" id="b-{i}" data-benchmark="{_e(b.benchmark)}" '
        f'data-scenario="{_e(b.scenario)}">'
        f"<h2>{_e(b.benchmark)} {_e(b.version)} · {_e(b.scenario)}</h2>"
        f"<p>Ranked by <b>{_e(b.primary)}</b> "
        f"({'higher' if b.higher_is_better else 'lower'} is "
        f"better); entries whose 95% interval overlaps their group leader's share a rank. "
        f"{reported} reported, {n_rep} reproduced.</p>"
        f"{_table(b, i)}{_plot(b)}</section>"
    )


def render_html(board: Leaderboard, title: str = "DRAKE leaderboard") -> str:
    """The whole page as a string (deterministic for a given leaderboard)."""
    boards = rank(board)
    groups = paper_groups(boards)
    order = {bench: i for i, (_, benches) in enumerate(groups) for bench in benches}
    ordered = sorted(boards, key=lambda b: (order[b.benchmark], b.benchmark, b.version,
                                            b.scenario))
    anchors: dict[str, int] = {}
    for i, b in enumerate(ordered):
        anchors.setdefault(b.benchmark, i)
    sections = []
    for paper, benches in groups:
        members = [(i, b) for i, b in enumerate(ordered) if b.benchmark in benches]
        sections.append(
            f'<section class="paper" data-paper="{_e(paper)}"><h2 class="paper">{_e(paper)}</h2>'
            + "".join(_section(i, b) for i, b in members)
            + "</section>"
        )
    style, script = _STYLE + _shade_css(), _SCRIPT
    csp = (
        f"default-src 'none'; style-src {_csp_hash(style)}; script-src {_csp_hash(script)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{style}</style></head><body>"
        f"<h1>{_e(title)}</h1>"
        f"<p>{len(board.entries)} entries on {len(order)} benchmarks, DRAKE first, then by "
        "paper. <b>Reported</b> entries are copied from paper tables, with the paper's ± where "
        "it prints one (hover the source for the citation note); <b>reproduced</b> entries "
        "were built by <code>drake leaderboard submit</code> from this suite's results: mean ± "
        "sample std over seeds, [95% t-interval], and a link to the run record.</p>"
        f"{_filters(groups)}"
        "<p><small><b>Summary.</b> A cell: the method's mean rank over the benchmark's "
        "scenarios (1 = best; overlapping 95% intervals share a rank), darker is better; it "
        "links to the benchmark's tables (click a column header there to sort).</small></p>"
        f"{_matrix(ordered, groups, anchors)}{''.join(sections)}"
        f"<script>{script}</script></body></html>\n"
    )


def render(board: Leaderboard, out_dir: Path, title: str = "DRAKE leaderboard") -> Path:
    """Write ``out_dir/index.html`` (atomically) and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    atomic_write_text(path, render_html(board, title))
    return path
