"""How a chart tells series apart: a colour per combination of the fields that differ among
them (report.series), a line style per optimizer, a marker per speed options, each listed once
in the legend. No two series differ only in a field nothing shows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from gpubench.report import series as S
from gpubench.report.figure import palette, panels_of

LINESTYLES = {"sgd": "-", "adamw": "--", "adam": ":"}
OTHER_LINESTYLES = ("-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)))
MARKERS = {"eager": "o", "compiled": "s", "CUDA graph": "^", "channels-last": "D"}
OTHER_MARKERS = ("P", "X", "v", "h", "<", ">", "p", "*")


class SeriesStyles:
    """The style of every series of `frame` (rows carry `series` and the identity columns).
    `panel_fields` are named by each panel's title (model and size by default), so a legend
    does not repeat them."""

    def __init__(self, frame: pd.DataFrame, panel_fields: Iterable[str] = S.PANEL) -> None:
        firsts = frame.drop_duplicates("series").to_dict("records")
        differ = S.varying(frame, "series", panel_fields)
        colour_fields = [f for f in differ if f not in (S.LINE_FIELD, S.MARKER_FIELD)]
        if not colour_fields:  # one colour: name it by the device and precision all share
            colour_fields = ["device_name", "precision"]
        self.colour_of: dict[str, str] = {}
        self.optimizer_of: dict[str, str] = {}
        self.options_of: dict[str, str] = {}
        for r, colour in zip(firsts, S.written(firsts, colour_fields), strict=True):
            s = str(r["series"])
            self.colour_of[s] = colour
            self.optimizer_of[s] = S.FIELDS[S.LINE_FIELD](r)
            self.options_of[s] = S.FIELDS[S.MARKER_FIELD](r)
        self.colours = palette(self.colour_of.values())
        other = iter(OTHER_LINESTYLES * 4)
        self.linestyles = {
            o: LINESTYLES.get(o) or next(other) for o in sorted(set(self.optimizer_of.values()))
        }
        options = sorted(set(self.options_of.values()), key=lambda o: (o not in MARKERS, o))
        extra = iter(OTHER_MARKERS * 4)
        self.markers = {o: MARKERS.get(o) or next(extra) for o in options}
        self.same = S.common(frame, [f for f in S.FIELDS if f not in panel_fields])

    def colour(self, series: str) -> Any:
        return self.colours[self.colour_of[series]]

    def line(self, series: str) -> dict[str, Any]:
        """Keyword arguments for ax.plot: colour, line style and marker of `series`."""
        return {
            "color": self.colour(series),
            "linestyle": self.linestyles[self.optimizer_of[series]],
            "marker": self.markers[self.options_of[series]],
            "markersize": 5,
        }

    def label(self, series: str) -> str:
        """The series' legend words: its colour's fields, then optimizer and options where
        those differ among the series."""
        parts = [self.colour_of[series]]
        parts += [self.optimizer_of[series]] if len(self.linestyles) > 1 else []
        parts += [self.options_of[series]] if len(self.markers) > 1 else []
        return " ".join(p for p in parts if p)

    def keys(self) -> dict[str, dict[str, Any]]:
        """Legend entries: a colour per combination of the fields that differ, a line style per
        optimizer and a marker per speed options (only where more than one of each is drawn)."""
        out: dict[str, dict[str, Any]] = {
            name: {"color": c, "linewidth": 6} for name, c in self.colours.items()
        }
        if len(self.linestyles) > 1:
            for o, ls in self.linestyles.items():
                out[o] = {"color": "black", "linestyle": ls, "linewidth": 1.2}
        if len(self.markers) > 1:
            for o, m in self.markers.items():
                out[o] = {"color": "black", "marker": m, "linestyle": "none"}
        return out

    def panels(
        self, rows: pd.DataFrame, rows_per_title: int = 1, column: str = "panel"
    ) -> tuple[list[str], MplFigure, list[list[Axes]], dict[str, dict[str, Any]]]:
        """figure.panels_of(rows, ...) with the legend entries (keys) put on its first panel
        (empty lines, for figure.save to collect): the titles, the figure, each title's axes,
        and the entries' styles for save's `keys`."""
        titles, fig, axes = panels_of(rows, rows_per_title, column)
        keys = self.keys()
        for name in keys:
            axes[0][0].plot([], [], label=name)
        return titles, fig, axes, keys
