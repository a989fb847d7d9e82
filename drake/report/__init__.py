"""``drake report``: tables, plots and a static page from the run folders of ``drake eval``.

A researcher runs a few methods with a few seeds each and wants to see them side by side. The
report reads every results file of the given run folders (``results.json`` and the protocol's
other views, ``results-*.json``), groups them by benchmark, scenario, method and seed-free
config hash (:mod:`drake.report.runs`, which refuses runs that differ in more than the seed
or methods compared on different builds), and writes into the output folder:

- ``table.md`` and ``table.csv``: every metric as mean ± std with the Student-t 95% interval
  over seeds, the number of seeds and the data manifest hash (:mod:`drake.report.page`);
- ``plots/*.png`` and ``plots/*.svg``: curves over rounds with a seed band, the protocol's
  bar charts, the client × task heatmap and the cost per method (:mod:`drake.report.plots`);
- ``index.html``: one static page that shows them.

The plots need matplotlib, the ``report`` extra (``pip install 'drake-pfl[report]'``).

Examples
--------
>>> from pathlib import Path
>>> summary = write_report([Path("runs/fedavg-s0"), Path("runs/fedavg-s1")],
...                        Path("report"))  # doctest: +SKIP
>>> summary.index  # doctest: +SKIP
PosixPath('report/index.html')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from drake.report.page import index_html, table_csv, table_markdown
from drake.report.plots import Plot, draw, require_matplotlib
from drake.report.runs import Panel, ReportError, load_runs, panels

__all__ = ["ReportError", "ReportSummary", "write_report"]


@dataclass(frozen=True)
class ReportSummary:
    """What a report holds and where it was written."""

    index: Path
    panels: list[Panel]
    plots: list[Plot]
    n_files: int


def write_report(run_dirs: Sequence[Path], out: Path) -> ReportSummary:
    """Write the report of ``run_dirs`` into ``out`` (files there of the same names are
    replaced).

    Parameters
    ----------
    run_dirs : sequence of Path
        Run folders of ``drake eval`` (every results file in each), results files, or folders
        whose sub-folders are run folders.
    out : Path
        Output folder, created if needed.

    Raises
    ------
    ReportError
        When matplotlib is missing, a results file is invalid, or runs cannot be compared.
    """
    require_matplotlib()
    runs = load_runs(run_dirs)
    grouped = panels(runs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots = draw(grouped, out / "plots")
    (out / "table.md").write_text(table_markdown(grouped), encoding="utf-8")
    (out / "table.csv").write_text(table_csv(grouped), encoding="utf-8")
    index = out / "index.html"
    index.write_text(index_html(grouped, plots, len(runs)), encoding="utf-8")
    return ReportSummary(index, grouped, plots, len(runs))
