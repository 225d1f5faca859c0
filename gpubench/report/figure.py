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
from matplotlib.axis import Axis
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    Locator,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

DPI = 100  # keeps a chart's PNG in the tens of kilobytes
PANEL_W, PANEL_H = 4.6, 3.4  # inches per model panel
MAX_COLS = 3
MIN_W = 9.5  # inches: room for a three-column legend under a single panel
CHAR_IN, HANDLE_IN = 0.075, 0.7  # inches: a character of an 8-point label, a legend handle
MAX_LEGEND_COLS = 6
EMPTY = "empty panel"  # the gid of a panel that says why it has no data
# The charts save() wrote in this process, by file name, in order (the report's record of what
# it drew: report.chart_record).
SAVED: list[str] = []


@dataclass(frozen=True)
class Chart:
    """A rendered chart: its PNG's file name (in plots/), a title and a caption for the page."""

    file: str
    title: str
    caption: str


def colours(n: int) -> list[Any]:
    """n distinct colours: tab10, else tab20, else tab20 with tab20b and tab20c after it."""
    if n <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(n)]
    pool = [plt.get_cmap(m)(i) for m in ("tab20", "tab20b", "tab20c") for i in range(20)]
    return [pool[i % len(pool)] for i in range(n)]


def palette(series: Iterable[str]) -> dict[str, Any]:
    """A stable colour per series label (sorted, so the same label gets the same colour in every
    chart of one report)."""
    names = sorted(set(series))
    return dict(zip(names, colours(len(names)), strict=True))


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


def panels_of(
    rows: Any, rows_per_title: int = 1, column: str = "panel"
) -> tuple[list[str], MplFigure, list[list[Axes]]]:
    """panels() with a title per value of `rows`' `column` (by default a model and size: the
    frame's `panel`), sorted: the titles, the figure and each title's axes."""
    titles = sorted(rows[column].unique())
    return (titles, *panels(titles, rows_per_title))


def batch_axis(ax: Axes, batch_sizes: Iterable[float], log_ylabel: str | None = None) -> None:
    """A log2 batch-size axis ticked at the batch sizes measured; given `log_ylabel`, against a
    log y axis (log_y) of that label."""
    if log_ylabel is not None:
        log_y(ax)
        ax.set_ylabel(log_ylabel)
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


class ReadableLogLocator(Locator):
    """Major ticks of a log axis that always label at least two values in view: the decades
    where the view spans two or more; else 1, 2 and 5 x 10^k; else 1 to 9 x 10^k; else (a view
    within one step of those, 1.1 to 1.6 say) evenly spaced plain values. Matplotlib's own
    LogLocator leaves a view under a decade with no major tick, so no label."""

    SUBS = ((1.0,), (1.0, 2.0, 5.0), tuple(float(i) for i in range(1, 10)))

    def __call__(self) -> Sequence[float]:
        low, high = self.axis.get_view_interval()  # type: ignore[union-attr]
        return self.tick_values(low, high)

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        low, high = sorted((vmin, vmax))
        if not (low > 0 and math.isfinite(high)):
            return []
        for subs in self.SUBS:
            ticks = [
                m * 10.0**k
                for k in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
                for m in subs
            ]
            inside = [t for t in ticks if low <= t <= high]
            if len(inside) >= 2:
                return inside
        return [t for t in MaxNLocator(4).tick_values(low, high) if low <= t <= high and t > 0]


def log_y(ax: Axes) -> None:
    """A log-scaled y axis whose view always has at least two plainly written tick labels
    (ReadableLogLocator), with unlabelled minor ticks between them."""
    ax.set_yscale("log")
    readable_log(ax.yaxis)


def readable_log(axis: Axis) -> None:
    """Tick a log-scaled `axis` with ReadableLogLocator and plain labels (0.05, 3, 250, 12k)."""
    axis.set_major_locator(ReadableLogLocator())
    axis.set_major_formatter(FuncFormatter(_plain))
    axis.set_minor_locator(LogLocator(subs="auto"))
    axis.set_minor_formatter(NullFormatter())


def labelled_ticks(axis: Axis) -> list[str]:
    """The tick labels `axis` shows inside its view after a draw (major and minor)."""
    low, high = sorted(axis.get_view_interval())
    out = []
    for locs, labels in (
        (axis.get_majorticklocs(), axis.get_majorticklabels()),
        (axis.get_minorticklocs(), axis.get_minorticklabels()),
    ):
        for loc, label in zip(locs, labels, strict=False):
            if low - 1e-9 * abs(low) <= loc <= high + 1e-9 * abs(high) and label.get_text():
                out.append(label.get_text())
    return out


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


def legend_columns(labels: Sequence[str], width_in: float) -> int:
    """How many legend columns of `labels` fit across `width_in` inches (at least 1, at most
    MAX_LEGEND_COLS): a column is as wide as the longest label."""
    column_in = CHAR_IN * max(len(label) for label in labels) + HANDLE_IN
    return max(1, min(len(labels), MAX_LEGEND_COLS, int(width_in // column_in)))


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
        # As many columns as the longest label lets fit across the figure (savefig's tight box
        # keeps a longer one whole): a legend of 16 short labels takes four rows, not six.
        ncol = legend_columns(list(handles), fig.get_figwidth())
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
    # Leaves room for the suptitle, and places every axis's ticks (it measures their labels),
    # so they can be checked below without a draw of their own: savefig draws once in full
    # (after laying the figure out once more for its tight box).
    fig.tight_layout(rect=(0, bottom, 1, 1))
    for ax in fig.axes:
        if ax.get_visible() and ax.get_gid() != EMPTY:
            for axis in (ax.xaxis, ax.yaxis):
                assert labelled_ticks(axis), f"{file}: an axis of {ax.get_title()!r} is unlabelled"
    plots_dir.mkdir(parents=True, exist_ok=True)
    if (plots_dir / file).is_symlink():  # a link planted there is replaced, not written through
        (plots_dir / file).unlink()
    fig.savefig(plots_dir / file, dpi=DPI, bbox_inches="tight", pad_inches=0.1)
    SAVED.append(file)
    plt.close(fig)


def empty_panel(ax: Axes, text: str) -> None:
    """A panel that says why it has nothing to show."""
    ax.set_gid(EMPTY)  # save() does not ask an empty panel for tick labels
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
