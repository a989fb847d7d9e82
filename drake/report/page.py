"""The report's tables (``table.md``, ``table.csv``) and its static page (``index.html``).

Every metric of every group is written as mean ± std over seeds with the Student-t 95%
interval of the mean (none for a single seed), the seeds, and the data manifest the runs
read. The page shows the same table per panel with the panel's figures, and lists the runs
behind each row. It loads nothing but its own plot files, runs no script, and escapes every
string that comes from a results file.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
from collections.abc import Sequence
from typing import Any

from drake.report.plots import Plot
from drake.report.runs import Group, Panel

CSV_COLUMNS = ("benchmark", "version", "scenario", "protocol", "manifest_sha256", "method",
               "label", "config_sha256", "metric", "n_seeds", "seeds", "mean", "std",
               "ci95_low", "ci95_high", "per_seed")


def fmt(metric: str, value: float) -> str:
    """A metric as printed: 4 decimals for TAP's MSE (not a percentage), else 2."""
    return f"{value:.4f}" if metric == "mse" else f"{value:.2f}"


def cell(metric: str, stats: dict[str, Any] | None) -> str:
    """``mean ± std [lo, hi]``, the interval left out for a single seed; ``–`` when absent."""
    if stats is None:
        return "–"
    text = f"{fmt(metric, stats['mean'])} ± {fmt(metric, stats['std'])}"
    if stats["ci95"] is not None:
        lo, hi = stats["ci95"]
        text += f" [{fmt(metric, lo)}, {fmt(metric, hi)}]"
    return text


def _seeds(group: Group) -> str:
    return f"{len(group.runs)} ({', '.join(str(s) for s in group.seeds)})"


def table_markdown(panels: Sequence[Panel]) -> str:
    """One Markdown table per panel: a row per group, a column per metric."""
    lines = ["# drake report", "",
             "Each cell: mean ± sample std over seeds [Student-t 95% interval of the mean].", ""]
    for panel in panels:
        names = panel.metric_names
        lines += [f"## {panel.title}", "",
                  f"protocol `{panel.protocol}`; build manifest sha256 `{panel.manifest}`", "",
                  "| method | config | seeds | " + " | ".join(names) + " |",
                  "|---|---|---|" + "---|" * len(names)]
        for g in panel.groups:
            row = [g.label.replace("|", "\\|"), f"`{g.preset[:12]}`", _seeds(g),
                   *(cell(m, g.metrics.get(m)) for m in names)]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def table_csv(panels: Sequence[Panel]) -> str:
    """The long form: one row per group and metric, at full precision."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for panel in panels:
        for g in panel.groups:
            for metric, s in g.metrics.items():
                lo, hi = s["ci95"] if s["ci95"] is not None else ("", "")
                writer.writerow([panel.benchmark, panel.version, panel.scenario, panel.protocol,
                                 panel.manifest, g.method, g.label, g.preset, metric,
                                 len(g.runs), " ".join(str(x) for x in g.seeds), repr(s["mean"]),
                                 repr(s["std"]), lo if lo == "" else repr(lo),
                                 hi if hi == "" else repr(hi),
                                 " ".join(repr(v) for v in s["per_seed"])])
    return buf.getvalue()


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:1280px;padding:0 1rem;
color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}
th,td{border-bottom:1px solid #e4e4e4;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption,small{color:#666}code{font-size:.9em;word-break:break-all}
nav li{display:inline;margin-right:.8rem}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _figures(plots: Sequence[Plot]) -> str:
    return "".join(
        f'<figure><a href="plots/{_e(p.stem)}.svg"><img src="plots/{_e(p.stem)}.png" '
        f'alt="{_e(p.title)}"></a><figcaption>{_e(p.caption)} '
        f'(<a href="plots/{_e(p.stem)}.svg">SVG</a>)</figcaption></figure>'
        for p in plots)


def _runs_table(panel: Panel) -> str:
    rows = []
    for g in panel.groups:
        params = ", ".join(f"{k}={v}" for k, v in sorted(g.doc["method"]["hyperparameters"]
                                                         .items()))
        runs = "<br>".join(f"seed {r.seed}: <code>{_e(r.path)}</code>" for r in g.runs)
        rows.append(f"<tr><td>{_e(g.label)}</td><td><code>{_e(g.preset)}</code></td>"
                    f"<td>{runs}</td><td><small>{_e(params)}</small></td></tr>")
    return ("<details><summary>Runs and hyper-parameters</summary><table><thead><tr>"
            "<th>method</th><th>config sha256</th><th>results files</th>"
            f"<th>hyper-parameters</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            "</details>")


def _panel(i: int, panel: Panel, plots: Sequence[Plot]) -> str:
    names = panel.metric_names
    head = "".join(f"<th>{_e(m)}</th>" for m in names)
    body = "".join(
        f"<tr><td>{_e(g.label)}</td><td class=\"num\">{_e(_seeds(g))}</td>"
        + "".join(f'<td class="num">{_e(cell(m, g.metrics.get(m)))}</td>' for m in names)
        + "</tr>" for g in panel.groups)
    return (f'<section id="p-{i}"><h2>{_e(panel.title)}</h2>'
            f"<p>protocol <code>{_e(panel.protocol)}</code>; build manifest sha256 "
            f"<code>{_e(panel.manifest)}</code></p>"
            f'<table class="metrics"><thead><tr><th>method</th><th>seeds</th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>{_runs_table(panel)}"
            f"{_figures([p for p in plots if p.panel == panel.title])}</section>")


def index_html(panels: Sequence[Panel], plots: Sequence[Plot], n_files: int) -> str:
    """The static page: a section per panel (table, figures, runs), then cross-panel figures."""
    style = _STYLE
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    csp = (f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'self' file:; "
           "base-uri 'none'; form-action 'none'")
    nav = "".join(f'<li><a href="#p-{i}">{_e(p.title)}</a></li>' for i, p in enumerate(panels))
    sections = "".join(_panel(i, p, plots) for i, p in enumerate(panels))
    across = [p for p in plots if p.panel is None]
    if across:
        sections += f'<section id="across"><h2>Across scenarios</h2>{_figures(across)}</section>'
    n_groups = sum(len(p.groups) for p in panels)
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>drake report</title><style>{style}</style></head><body>"
        "<h1>drake report</h1>"
        f"<p>{n_files} results file{'s' if n_files != 1 else ''} in {n_groups} group"
        f"{'s' if n_groups != 1 else ''} (a method and configuration on a scenario) and "
        f"{len(panels)} scenario{'s' if len(panels) != 1 else ''}. Each cell: mean ± sample "
        "std over seeds [Student-t 95% interval of the mean]; bands and error bars in the "
        'figures are ± one std. Tables: <a href="table.md">table.md</a>, '
        '<a href="table.csv">table.csv</a>.</p>'
        f"<nav><ul>{nav}</ul></nav>{sections}</body></html>\n"
    )
