"""How a chart tells series apart at a glance: colour by device and precision, line style by
optimizer, marker by speed options; and a legend that lists each of those once (a dozen series
of four devices-and-precisions and two optimizers need six entries, not twelve long names)."""

from __future__ import annotations

import re
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from gpubench.report.runs import options_suffix

LINESTYLES = {"sgd": "-", "adamw": "--", "adam": ":"}
MARKERS = {"": "o", "compiled": "s", "CUDA graph": "^", "channels-last": "D"}
OTHER_MARKERS = ("P", "X", "v", "h")


def short_device(device_name: str) -> str:
    """'cuda (NVIDIA H100 80GB HBM3)' -> 'H100 80GB HBM3'; 'cpu (Intel Xeon ...)' -> 'CPU'."""
    if device_name.startswith("cpu"):
        return "CPU"
    m = re.match(r"cuda(:\d+)? \((.*)\)$", device_name)
    return m.group(2).removeprefix("NVIDIA ").strip() if m else device_name


def short_series(series: str) -> str:
    """A series label with its device named shortly: 'H100 80GB HBM3 bf16 adamw compiled'."""
    m = re.match(r"(cuda(:\d+)? \([^)]*\)|cpu \([^)]*\)|cpu)", series)
    return short_device(m.group(1)) + series[m.end() :] if m else series


class SeriesStyles:
    """The style of every series of `frame` (rows carry series, device_name, run, precision,
    optimizer and the speed options)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        firsts = frame.drop_duplicates("series")
        self.colour_of: dict[str, str] = {}
        self.optimizer_of: dict[str, str] = {}
        self.options_of: dict[str, str] = {}
        for r in firsts.to_dict("records"):
            series = str(r["series"])
            tag = f" [{r['run']}]" if f"[{r['run']}]" in series else ""
            self.colour_of[series] = f"{short_device(str(r['device_name']))}{tag} {r['precision']}"
            self.optimizer_of[series] = str(r["optimizer"])
            self.options_of[series] = options_suffix(r).strip()
        names = sorted(set(self.colour_of.values()))
        cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
        self.colours = {n: cmap(i % cmap.N) for i, n in enumerate(names)}
        options = sorted(set(self.options_of.values()), key=lambda o: (o not in MARKERS, o))
        extra = iter(OTHER_MARKERS * 4)
        self.markers = {o: MARKERS.get(o) or next(extra) for o in options}

    def colour(self, series: str) -> Any:
        return self.colours[self.colour_of[series]]

    def line(self, series: str) -> dict[str, Any]:
        """Keyword arguments for ax.plot: colour, line style and marker of `series`."""
        return {
            "color": self.colour(series),
            "linestyle": LINESTYLES.get(self.optimizer_of[series], "-."),
            "marker": self.markers[self.options_of[series]],
            "markersize": 5,
        }

    def short(self, series: str) -> str:
        opts = self.options_of[series]
        return f"{self.colour_of[series]} {self.optimizer_of[series]}" + (
            f" {opts}" if opts else ""
        )

    def keys(self) -> dict[str, dict[str, Any]]:
        """Legend entries: a colour per device and precision, a line style per optimizer, a
        marker per speed option (only where more than one of each is drawn)."""
        out: dict[str, dict[str, Any]] = {
            name: {"color": c, "linewidth": 6} for name, c in self.colours.items()
        }
        optimizers = sorted(set(self.optimizer_of.values()))
        if len(optimizers) > 1:
            for o in optimizers:
                out[o] = {"color": "black", "linestyle": LINESTYLES.get(o, "-."), "linewidth": 1.2}
        if len(self.markers) > 1:
            for o, m in self.markers.items():
                out[o or "eager"] = {"color": "black", "marker": m, "linestyle": "none"}
        return out

    def add_keys(self, ax: Axes) -> dict[str, dict[str, Any]]:
        """Put the legend entries on `ax` (empty lines, for figure.save to collect) and return
        their styles for save's `keys`."""
        keys = self.keys()
        for name in keys:
            ax.plot([], [], label=name)
        return keys
