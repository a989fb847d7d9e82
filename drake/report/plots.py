"""The report's figures, drawn with matplotlib (Agg, no pyplot) as PNG and SVG.

Per panel (one benchmark scenario, :class:`~drake.report.runs.Panel`):

- ``curves``: the score over rounds, one line per group (mean over seeds) with a band of
  ± one standard deviation over seeds; Self and Others side by side for Self/Others, the
  protocol's main score (``curves.self``) otherwise;
- ``base-novel`` (base/novel protocol): Local, Base, Novel and HM bars;
- ``domains`` (classification with ``acc_<domain>``): one bar per domain and group;
- ``generation`` (generation protocol): one bar chart per metric;
- ``heatmap-<group>`` (Self/Others): each client's score on each task at the last round,
  the mean over seeds (grey: not scored);
- ``cost``: MB sent up and down per round, wall time, peak memory and extra FLOPs (once
  for the views of the same runs).

Per benchmark with generation runs whose scenario carries ``missing_rate``: ``missing-rate``,
each metric against the missing rate, one line per method and view (personalised / global).
Error bars are ± one standard deviation over seeds throughout.

Figures are deterministic for given runs (no dates in the files, a fixed SVG id salt).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from drake.report.runs import Group, Panel, ReportError

INSTALL_HINT = "pip install 'drake-pfl[report]' (in a checkout: pip install -e '.[report]')"
_SERIES_VIEWS = ("personalized", "global")


@dataclass(frozen=True)
class Plot:
    """One figure written as ``<stem>.png`` and ``<stem>.svg`` in the plots folder."""

    stem: str
    title: str
    caption: str
    panel: str | None  # the panel's title, None for a figure across panels


def require_matplotlib() -> None:
    """Fail with the install command when matplotlib (the ``report`` extra) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise ReportError(f"drake report draws its plots with matplotlib, which is not "
                          f"installed; install the report extra: {INSTALL_HINT}") from err


def slug(text: str) -> str:
    """A file-name-safe form of a name (``clip-base2novel/dtd`` -> ``clip-base2novel-dtd``)."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "x"


class _Writer:
    """Saves figures into one folder under unique stems, and remembers what it wrote."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.plots: list[Plot] = []
        self._stems: set[str] = set()

    def save(self, fig: Any, stem: str, title: str, caption: str, panel: str | None) -> None:
        import matplotlib

        unique, n = stem, 2
        while unique in self._stems:
            unique, n = f"{stem}-{n}", n + 1
        self._stems.add(unique)
        with matplotlib.rc_context({"svg.hashsalt": "drake-report"}):
            fig.savefig(self.folder / f"{unique}.png", format="png", dpi=100,
                        metadata={"Software": None})
            fig.set_layout_engine("none")  # laid out once: the SVG keeps the PNG's positions
            fig.savefig(self.folder / f"{unique}.svg", format="svg", metadata={"Date": None})
        self.plots.append(Plot(unique, title, caption, panel))


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _bars(ax: Any, groups: Sequence[Group], names: Sequence[str], ticks: Sequence[str],
          get: Any) -> None:
    """Grouped bars: one cluster per name, one bar per group, ± std error bars."""
    width = 0.8 / max(len(groups), 1)
    x = np.arange(len(names))
    for i, (g, colour) in enumerate(zip(groups, _colours(len(groups)))):
        stats = [get(g, n) for n in names]
        means = [s["mean"] if s else np.nan for s in stats]
        stds = [s["std"] if s else 0.0 for s in stats]
        ax.bar(x + (i - (len(groups) - 1) / 2) * width, means, width, yerr=stds, capsize=3,
               color=colour, label=g.label)
    ax.set_xticks(x, ticks)
    ax.grid(axis="y", alpha=0.3)


def _curves(w: _Writer, panel: Panel, stem: str) -> None:
    from matplotlib.ticker import MaxNLocator

    parts = [("self", "Self"), ("others", "Others")] if panel.protocol == "self_others" else [
        ("self", panel.primary_name)]
    fig = _figure(5.2 * len(parts) + 1.5, 3.6)
    axes = fig.subplots(1, len(parts), squeeze=False)[0]
    for ax, (part, name) in zip(axes, parts):
        for g, colour in zip(panel.groups, _colours(len(panel.groups))):
            curve = g.curve(part)
            if curve is None:
                continue
            rounds, mean, std = curve
            ax.plot(rounds, mean, marker="o", color=colour, label=g.label)
            ax.fill_between(rounds, mean - std, mean + std, color=colour, alpha=0.2, lw=0)
        ax.set_title(name)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("score")
    axes[-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    what = "Self and Others" if len(parts) == 2 else parts[0][1]
    w.save(fig, f"curves-{stem}", f"{what} over rounds",
           f"{what} over rounds: mean over seeds, band ± one std", panel.title)


def _fast_adapt(w: _Writer, panel: Panel, stem: str) -> None:
    """FedMosaic's Fig. 5: the mean score on the unseen tasks while fine-tuning on them, from
    each method's aggregated model (solid) and from the pretrained model (dashed)."""
    groups = [g for g in panel.groups if g.fast_adapt("aggregated") is not None]
    if not groups:
        return
    # two legend entries per method: the figure grows with them (Tab. 2's ten methods)
    fig = _figure(6.5, max(3.6, 0.19 * 2 * len(groups) + 0.8))
    ax = fig.subplots()
    for g, colour in zip(groups, _colours(len(groups))):
        for start, style in (("aggregated", "-"), ("pretrained", "--")):
            steps, mean, std = g.fast_adapt(start)
            label = g.label if start == "aggregated" else f"{g.label} (pretrained start)"
            ax.plot(steps, mean, style, marker="o", color=colour, label=label)
            ax.fill_between(steps, mean - std, mean + std, color=colour, alpha=0.15, lw=0)
    ax.set_xlabel("fine-tuning iterations on the unseen task")
    ax.set_ylabel("score (mean over unseen tasks)")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    w.save(fig, f"fast-adapt-{stem}", "Fast adaptation on the unseen tasks",
           "Fast adaptation: the mean score over unseen tasks and architectures while each "
           "start is fine-tuned on them; solid from the method's aggregated model, dashed from "
           "the pretrained model with fresh adapters; mean over seeds, band ± one std",
           panel.title)


def _metric_bars(w: _Writer, panel: Panel, stem: str, names: Sequence[str], kind: str,
                 title: str, ticks: Sequence[str]) -> None:
    fig = _figure(max(5.0, 1.1 * len(names) * max(len(panel.groups), 2) / 2 + 2.5), 3.6)
    ax = fig.subplots()
    _bars(ax, panel.groups, names, ticks, lambda g, n: g.metrics.get(n))
    ax.set_ylabel("score")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    w.save(fig, f"{kind}-{stem}", title, f"{title}: mean over seeds, bars ± one std",
           panel.title)


def _generation(w: _Writer, panel: Panel, stem: str) -> None:
    names = panel.metric_names
    cols = min(len(names), 3)
    rows = -(-len(names) // cols)
    fig = _figure(3.4 * cols + 1.5, 2.8 * rows)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, name in zip(axes, names):
        _bars(ax, panel.groups, [name], [""], lambda g, n: g.metrics.get(n))
        ax.set_title(name)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize="small")
    w.save(fig, f"generation-{stem}", "Generation metrics",
           "Generation metrics: mean over seeds, bars ± one std", panel.title)


def _heatmap(w: _Writer, panel: Panel, group: Group, stem: str) -> None:
    from matplotlib import colormaps

    tasks, matrix = group.last_scores()
    models = group.doc["models_per_client"]
    fig = _figure(min(2.5 + 0.22 * len(tasks), 24.0), 1.6 + 0.3 * len(models))
    ax = fig.subplots()
    cmap = colormaps["viridis"].with_extremes(bad="#d9d9d9")
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=0, vmax=100, aspect="auto",
                      interpolation="nearest")
    ax.set_xticks(range(len(tasks)), tasks, rotation=90, fontsize=7)
    ax.set_yticks(range(len(models)), [f"{c}: {m}" for c, m in enumerate(models)], fontsize=7)
    ax.set_xlabel("task")
    ax.set_ylabel("client")
    fig.colorbar(image, ax=ax, label="score", fraction=0.03)
    last = group.doc["curves"]["rounds"][-1]
    title = f"Client × task scores of {group.label}, round {last}"
    w.save(fig, f"heatmap-{stem}-{slug(group.label)}", title,
           f"{title}: mean over {len(group.runs)} seed(s); grey: not scored", panel.title)


def _cost(w: _Writer, panel: Panel, stem: str) -> None:
    costs = [g.cost() for g in panel.groups]
    names = [n for n in costs[0] if all(n in c for c in costs)]
    fig = _figure(3.2 * len(names) + 0.5, max(1.8, 0.9 + 0.35 * len(panel.groups)))
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    y = np.arange(len(panel.groups))
    colours = _colours(len(panel.groups))
    for ax, name in zip(axes, names):
        ax.barh(y, [c[name]["mean"] for c in costs], xerr=[c[name]["std"] for c in costs],
                capsize=3, color=colours)
        ax.set_title(name, fontsize="medium")
        ax.set_yticks(y, [g.label for g in panel.groups] if ax is axes[0] else [])
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
    w.save(fig, f"cost-{stem}", "Communication and compute per method",
           "Communication and compute per method: mean over seeds, bars ± one std",
           panel.title)


def _missing_rate(w: _Writer, benchmark: str, panels: Sequence[Panel]) -> None:
    """Each generation metric against the missing rate: one line per method and view."""
    series: dict[str, dict[float, Group]] = {}
    for panel in panels:
        view = next((v for v in _SERIES_VIEWS if panel.scenario.endswith("-" + v)), "")
        for g in panel.groups:
            rate = float(g.doc["scenario"]["partition"].get("missing_rate") or 0.0)
            label = " · ".join(p for p in (g.label, view) if p)
            series.setdefault(label, {})[rate] = g
    names = [n for p in panels for n in p.metric_names]
    names = list(dict.fromkeys(names))
    cols = min(len(names), 3)
    rows = -(-len(names) // cols)
    fig = _figure(3.4 * cols + 2.0, 2.8 * rows)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    colours = _colours(len(series))
    for ax, name in zip(axes, names):
        for (label, by_rate), colour in zip(sorted(series.items()), colours):
            rates = sorted(r for r, g in by_rate.items() if name in g.metrics)
            stats = [by_rate[r].metrics[name] for r in rates]
            ax.errorbar(rates, [s["mean"] for s in stats], yerr=[s["std"] for s in stats],
                        marker="o", capsize=3, color=colour, label=label)
        ax.set_title(name)
        ax.set_xlabel("missing rate")
        ax.grid(alpha=0.3)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize="small")
    title = f"{benchmark}: generation metrics per missing rate"
    w.save(fig, f"missing-rate-{slug(benchmark)}", title,
           f"{title}: mean over seeds, bars ± one std", None)


def draw(panels: Sequence[Panel], folder: Path) -> list[Plot]:
    """Write every figure of ``panels`` into ``folder`` and return what was written."""
    require_matplotlib()
    folder.mkdir(parents=True, exist_ok=True)
    w = _Writer(folder)
    costed: set[tuple[tuple[Path, ...], ...]] = set()
    for panel in panels:
        stem = slug(f"{panel.benchmark}-{panel.scenario}")
        _curves(w, panel, stem)
        names = panel.metric_names
        if panel.protocol == "base_novel":
            order = [n for n in ("local", "base", "novel", "hm") if n in names]
            _metric_bars(w, panel, stem, order, "base-novel", "Local, Base, Novel and HM",
                         [n.capitalize() if n != "hm" else "HM" for n in order])
        domains = [n for n in names if n.startswith("acc_")]
        if panel.protocol == "classification" and domains:
            _metric_bars(w, panel, stem, domains, "domains", "Accuracy per domain",
                         [n[4:] for n in domains])
        if panel.protocol == "generation":
            _generation(w, panel, stem)
        if panel.protocol == "self_others":
            for group in panel.groups:
                _heatmap(w, panel, group, stem)
            _fast_adapt(w, panel, stem)
        folders = tuple(tuple(r.path.parent for r in g.runs) for g in panel.groups)
        if folders not in costed:  # a run's other views (results-*.json) share its cost
            costed.add(folders)
            _cost(w, panel, stem)
    with_rates = {p.benchmark for p in panels if p.protocol == "generation" and any(
        "missing_rate" in g.doc["scenario"]["partition"] for g in p.groups)}
    for benchmark in sorted(with_rates):
        _missing_rate(w, benchmark, [p for p in panels if p.benchmark == benchmark
                                     and p.protocol == "generation"])
    return w.plots
