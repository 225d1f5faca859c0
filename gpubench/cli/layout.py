"""How a printed table's cells read, and how it fits a terminal's width without cutting a name
(rich, given too little width, shortens every cell to "mlp/…"): see fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.table import Table

# A cell's padding (one space each side) and the line at its left; the table's right edge.
_PER_COLUMN, _EDGE = 3, 1


@dataclass(frozen=True)
class Column:
    header: str
    cells: tuple[str, ...]
    short: str | None = None  # the header where space is short
    right: bool = False  # numbers, aligned right
    constant_to_title: bool = False  # one value in every row: may be said once, in the title
    wraps: bool = False  # may wrap onto more lines at its spaces (an error's text)
    least: int = 0  # for a column that wraps: the width its cells need at least

    def label(self, short: bool) -> str:
        """The header, or its short form where `short`."""
        return (self.short or self.header) if short else self.header

    def width(self, short: bool = False) -> int:
        """The width the column needs, in terminal cells (without padding)."""
        header = cell_len(self.label(short))
        if self.wraps:
            return max(header, self.least)
        return max([header, *(cell_len(c) for c in self.cells)])

    def constant(self) -> str | None:
        """The one value every row holds, or None."""
        values = set(self.cells)
        return self.cells[0] if len(values) == 1 and self.cells[0] else None


@dataclass(frozen=True)
class Fitted:
    """The columns kept, whether under short headers, those said in the title (header, value),
    and whether it fits."""

    columns: tuple[Column, ...]
    short: bool
    in_title: tuple[tuple[str, str], ...]
    fits: bool


def needed(columns: Sequence[Column], short: bool = False) -> int:
    """The width a rich table of these columns needs, with its default box and padding."""
    return sum(c.width(short) for c in columns) + _PER_COLUMN * len(columns) + _EDGE


def fit(columns: Sequence[Column], width: int | None, drop: Sequence[str]) -> Fitted:
    """The columns as they fit in `width` terminal cells (all where `width` is None), each step
    taken only while the table is still too wide: 1, short headers; 2, columns with one value
    in every row move to the title; 3, the columns named in `drop` leave, in that order. A
    kept cell stays whole (only a `wraps` column wraps, at its spaces); `fits` is False where
    even that is too wide (every cell may then wrap rather than be cut)."""
    kept = tuple(columns)
    if width is None or needed(kept) <= width:
        return Fitted(kept, False, (), True)
    if needed(kept, short=True) <= width:
        return Fitted(kept, True, (), True)
    moving = [c for c in kept if c.constant_to_title and c.constant() is not None]
    title = tuple((c.header, c.constant() or "") for c in moving)
    kept = tuple(c for c in kept if c not in moving)
    for header in drop:
        if needed(kept, short=True) <= width:
            break
        kept = tuple(c for c in kept if c.header != header)
    return Fitted(kept, True, title, needed(kept, short=True) <= width)


def table(fitted: Fitted, title: str, caption: str | None = None) -> Table:
    """A rich table of the fitted columns; the values moved out are said after `title`."""
    if fitted.in_title:
        title += "; every row: " + ", ".join(f"{h} {v}" for h, v in fitted.in_title)
    out = Table(title=title, caption=caption, caption_justify="left")
    for c in fitted.columns:
        whole = fitted.fits and not c.wraps  # a cell kept whole may not wrap
        out.add_column(
            c.label(fitted.short),
            justify="right" if c.right else "left",
            no_wrap=whole,
            overflow="fold",  # where a cell must break, it breaks: never cut to "…"
            min_width=c.width(fitted.short) if whole else None,
        )
    for i in range(len(fitted.columns[0].cells) if fitted.columns else 0):
        out.add_row(*(c.cells[i] for c in fitted.columns))
    return out


def plain_table(title: str, headers: Sequence[str], rows: Any, right: Sequence[str] = ()) -> Table:
    """A rich table of `rows` (tuples of cells) under `headers`; those in `right` align right.
    No rules between cells: it reads the same in a terminal, a log and a README."""
    out = Table(title=title, box=None)
    for h in headers:
        out.add_column(h, justify="right" if h in right else "left")
    for row in rows:
        out.add_row(*row)
    return out
