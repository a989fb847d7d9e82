"""A static, self-contained HTML page of the leaderboard.

The page needs no server and loads nothing from outside: styles, the sorting script and the
plots are inline, and a Content-Security-Policy admits only the page's own script and style
(by hash), so even an escaping mistake could not run injected script. Every string from the
leaderboard is HTML-escaped.

Layout: one section per benchmark version and scenario, ranked as in
:mod:`leaderboard.ranking`, with reported and reproduced entries in the same table (a
Provenance column tells them apart). Clicking a column header sorts by it (click again to
reverse). Where reproduced entries carry a per-round curve, an inline SVG plots the mean
Self score (solid) and Others score (dashed) over rounds, one colour per entry.

Test hook: opened with the URL fragment ``#test-sort``, the page clicks each table's Method
header once and twice and records the row order before and after in the table's
``data-order-before``, ``data-order-after`` and ``data-order-after2`` attributes; once the
script has run, ``<body>`` carries ``data-js="ok"``.
"""

from __future__ import annotations

import base64
import hashlib
import html
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
nav li{display:inline;margin-right:.8rem}
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
    label = _e(_short_source(entry))
    if entry.link is not None:
        label = f'<a href="{_e(entry.link)}" rel="noopener noreferrer">{label}</a>'
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
        f'<td data-sort="{_e(entry.method.name)}">{_e(entry.method.name)}</td>',
        f"<td>{_e(entry.provenance)}</td>",
        _metric_cell(entry, primary),
        *(_metric_cell(entry, m) for m in others),
        f'<td class="num" data-sort="{"" if seeds is None else seeds}">'
        f"{'–' if seeds is None else seeds}</td>",
        _source_cell(entry),
    ]
    return (
        f'<tr class="{_e(entry.provenance)}" data-key="{_e(_row_key(entry))}">{"".join(cells)}</tr>'
    )


def _plot(board: RankedBoard) -> str:
    curves = [row.entry for row in board.rows if row.entry.curve is not None]
    if not curves:
        return ""
    width, height, left, right, top, bottom = 640, 300, 48, 16, 16, 40
    rounds = [r for e in curves for r in e.curve.rounds]  # type: ignore[union-attr]
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
    for i, entry in enumerate(curves):
        color = _PALETTE[i % len(_PALETTE)]
        curve = entry.curve
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
            f'fill="{color}"/></svg> {_e(entry.method.name)}</span>'
        )
    parts.append("</svg>")
    return (
        "<figure>"
        + "".join(parts)
        + '<figcaption class="legend">'
        + "".join(legend)
        + " <small>solid: Self, dashed: Others (mean over seeds)</small></figcaption></figure>"
    )


def render_html(board: Leaderboard, title: str = "DRAKE leaderboard") -> str:
    """The whole page as a string (deterministic for a given leaderboard)."""
    boards = rank(board)
    nav = "".join(
        f'<li><a href="#b-{i}">{_e(b.benchmark)} · {_e(b.scenario)}</a></li>'
        for i, b in enumerate(boards)
    )
    sections = []
    for i, b in enumerate(boards):
        n_rep = sum(1 for r in b.rows if r.entry.provenance == "reproduced")
        sections.append(
            f'<section id="b-{i}" data-benchmark="{_e(b.benchmark)}" '
            f'data-scenario="{_e(b.scenario)}">'
            f"<h2>{_e(b.benchmark)} {_e(b.version)} · {_e(b.scenario)}</h2>"
            f"<p>Ranked by <b>{_e(b.primary)}</b> "
            f"({'higher' if b.higher_is_better else 'lower'} is "
            f"better); entries whose 95% interval overlaps their group leader's share a rank. "
            f"{len(b.rows) - n_rep} reported, {n_rep} reproduced.</p>"
            f"{_table(b, i)}{_plot(b)}</section>"
        )
    style, script = _STYLE, _SCRIPT
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
        f"<p>{len(board.entries)} entries. Click a column header to sort. Reported entries are "
        "copied from paper tables (hover the source for the citation note); reproduced entries "
        "were built by <code>drake leaderboard submit</code> from this suite's results.</p>"
        f"<nav><ul>{nav}</ul></nav>{''.join(sections)}"
        f"<script>{script}</script></body></html>\n"
    )


def render(board: Leaderboard, out_dir: Path, title: str = "DRAKE leaderboard") -> Path:
    """Write ``out_dir/index.html`` (atomically) and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    atomic_write_text(path, render_html(board, title))
    return path
