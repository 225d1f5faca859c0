"""The shared look of the report's charts: one panel per model, a colour per series, a shared
legend, log2 batch axes, and saving a PNG at a small resolution."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no screen: render to files only

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

DPI = 100  # keeps a chart's PNG in the tens of kilobytes
PANEL_W, PANEL_H = 4.6, 3.4  # inches per model panel
MAX_COLS = 3
MIN_W = 9.5  # inches: room for a three-column legend under a single panel


@dataclass(frozen=True)
class Chart:
    """A rendered chart: its PNG's file name (in plots/), a title and a caption for the page."""

    file: str
    title: str
    caption: str


def palette(series: Iterable[str]) -> dict[str, tuple[float, float, float, float]]:
    """A stable colour per series label (sorted, so the same label gets the same colour in every
    chart of one report)."""
    names = sorted(set(series))
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def panels(titles: Sequence[str], rows_per_title: int = 1) -> tuple[MplFigure, list[list[Axes]]]:
    """A figure with one column of `rows_per_title` panels per title (wrapping after MAX_COLS).
    Returns the figure and, per title, its list of axes."""
    n = len(titles)
    cols = min(MAX_COLS, n)
    groups = math.ceil(n / cols)
    fig, grid = plt.subplots(
        groups * rows_per_title,
        cols,
        figsize=(max(PANEL_W * cols, MIN_W), PANEL_H * groups * rows_per_title + 0.5),
        squeeze=False,
    )
    out = []
    for i, title in enumerate(titles):
        g, c = divmod(i, cols)
        axes = [grid[g * rows_per_title + r][c] for r in range(rows_per_title)]
        axes[0].set_title(title, fontsize=10)
        out.append(axes)
    for j in range(n, groups * cols):  # hide the unused panels of the last row
        g, c = divmod(j, cols)
        for r in range(rows_per_title):
            grid[g * rows_per_title + r][c].set_visible(False)
    return fig, out


def batch_axis(ax: Axes, batch_sizes: Iterable[float]) -> None:
    """A log2 batch-size axis ticked at the batch sizes measured."""
    ticks = sorted({int(b) for b in batch_sizes if b is not None and not math.isnan(b)})
    ax.set_xscale("log", base=2)
    if ticks:
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.set_xticklabels([str(t) for t in ticks], fontsize=8)
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch size (samples per step, log scale)")
    ax.grid(True, which="major", alpha=0.3)


def _plain(value: float, _pos: object = None) -> str:
    """A tick label without powers of ten: 0.05, 3, 250, 12k, 3.5M."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:g}{suffix}"
    return f"{value:g}"


def log_y(ax: Axes) -> None:
    """A log-scaled y axis with plainly written tick labels; under about a decade of range the
    minor ticks at 2 and 5 x 10^k are labelled too."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _p: _minor_label(ax, v)))


def _minor_label(ax: Axes, value: float) -> str:
    low, high = ax.get_ylim()
    if not (low > 0 and high / low < 200) or value <= 0:  # up to two decades: 2 and 5 too
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return _plain(value) if round(mantissa, 6) in (2.0, 5.0) else ""


# Legend entries for marks drawn in every series' colour: shown once, in grey.
STAR = "throughput-optimal batch (within 5% of best)"
KEYS: dict[str, dict[str, Any]] = {
    STAR: {"marker": "*", "markersize": 12, "mec": "black", "linestyle": "none"},
    "latency floor (shortest step measured)": {"linestyle": (0, (1, 1)), "linewidth": 0.8},
    "out of memory at this batch": {"linestyle": ":", "linewidth": 1.5},
    "fitted line: fixed + per-sample x batch": {"linestyle": ":", "linewidth": 1},
    "predicted largest batch": {
        "marker": "v",
        "markersize": 9,
        "mec": "black",
        "linestyle": "none",
    },
    "recommended batch (least time to target)": {"linestyle": "--", "linewidth": 1.5},
    "device memory": {"color": "red", "linewidth": 1},
}


def save(
    fig: MplFigure,
    plots_dir: Path,
    file: str,
    title: str,
    keys: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Give `fig` its title and one legend for all panels, save it as plots_dir/file, close it.
    Marks labelled with a KEYS (or `keys`) label get one grey legend entry, whatever their
    colour, after the series' entries."""
    styles = {**KEYS, **(keys or {})}
    handles: dict[str, Artist] = {}
    grey: dict[str, Artist] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label in styles:
                style = {"color": "grey", **styles[label]}
                grey.setdefault(label, Line2D([], [], **style))
            elif not label.startswith("_"):
                handles.setdefault(label, handle)
    handles.update(grey)
    if handles:
        ncol = min(3, len(handles))
        fig.legend(
            list(handles.values()),
            list(handles.keys()),
            loc="lower center",
            ncol=ncol,
            fontsize=8,
            frameon=False,
        )
        rows = math.ceil(len(handles) / ncol)
        legend_h = 0.2 * rows + 0.15  # inches: a legend row is about 0.2 inch at 8 points
        height = fig.get_figheight() + legend_h
        fig.set_figheight(height)
        bottom = legend_h / height
    else:
        height, bottom = fig.get_figheight(), 0.0
    fig.suptitle(title, fontsize=12, y=1 - 0.08 / height, va="top")
    fig.tight_layout(rect=(0, bottom, 1, 1))  # tight_layout leaves room for the suptitle
    plots_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(plots_dir / file, dpi=DPI)
    plt.close(fig)


def empty_panel(ax: Axes, text: str) -> None:
    """A panel that says why it has nothing to show."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
