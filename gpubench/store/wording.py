"""How counts and numbers read in the text gpubench prints: "1 point", "2 points"; "x100", not
"x1e+02"; milliseconds, seconds, shares, dollars and sizes, each written one way everywhere. In
store/ because every stage that writes sentences sits above it (tests/test_layout)."""

from __future__ import annotations

import math
import re
from typing import Any

from gpubench.config.registry import null as missing  # the one null check, re-exported


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 point', '0 points', '2 points'; `many` where the plural is not noun + 's'
    ('1 batch', '2 batches')."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def number(value: float, digits: int = 3, zeros: bool = False) -> str:
    """`value` to `digits` significant figures, written out as a person would: 0.0123, 1.5,
    250, 1,234 (a number with more whole digits than `digits` keeps them all, rounded to a
    whole number; never 1.23e+03). Only a magnitude below 1e-4 or of 1e12 and above is
    written with an exponent, where zeros or a row of digit groups would hide the figure (a
    B_noise interval's unbounded end read 4,659,526,795,215,888,415,226,593,280); nan and
    infinities as Python writes them. With `zeros` the trailing zeros stay (1.00, 0.900: a
    measured ratio shows its precision)."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    if abs(value) >= 1e12:
        return f"{value:.{digits}g}"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    text = f"{value:{'#' if zeros else ''},.{digits}g}".replace(".e", "e").removesuffix(".")
    if "e" in text and abs(value) >= 1e-4:  # rounding up to 10**digits (999.7 at 3 digits)
        return f"{float(text):,.0f}"
    return text


def times(ratio: float, digits: int = 3) -> str:
    """A ratio as 'x1.03', 'x1.00', 'x12.5', 'x100', 'x0.500': three significant figures with
    their zeros, enough to tell a ratio from a margin of a few percent (x1.03 against 3%)."""
    return "x" + number(ratio, digits, zeros=True)


def span(low: float, high: float, digits: int = 3) -> str:
    """An interval's two ends, each to `digits` significant figures with their zeros:
    '0.980-1.05', '1,200-1,340'; an infinite upper end reads 'unbounded' ('1.02-unbounded')."""
    top = "unbounded" if high == math.inf else number(high, digits, zeros=True)
    return f"{number(low, digits, zeros=True)}-{top}"


_SIGNIFICANT = re.compile(r",?\.(\d+)g")


def cell(value: Any, spec: str = ",.4g", scale: float = 1.0) -> str:
    """A table's number: `value` times `scale`, formatted by `spec`; an empty cell where it is
    null (or text). A significant-figures spec (".3g") writes the number out (12,345, not
    1.23e+04); an integer spec ("d") rounds first (a frame's 64.0)."""
    if missing(value) or isinstance(value, str):
        return ""
    scaled = float(value) * scale
    if m := _SIGNIFICANT.fullmatch(spec):
        return number(scaled, int(m.group(1)))
    return format(round(scaled), spec) if spec.endswith("d") else format(scaled, spec)


def milliseconds(seconds: float) -> str:
    """A duration given in seconds, in milliseconds: '5.81 ms', '144 ms', '1,126 ms'."""
    return f"{number(seconds * 1e3)} ms"


def seconds(value: float | None) -> str:
    """A duration at a precision that suits its scale: three significant figures, never fewer
    digits than whole seconds, thousands separated ("0.0432 s", "0.410 s", "12.3 s",
    "1,234 s"); an empty string for a missing value."""
    if value is None or missing(value):
        return ""
    s = float(value)
    if s == 0 or not math.isfinite(s):
        return f"{s:g} s"
    decimals = max(0, 2 - math.floor(math.log10(abs(s))))
    return f"{s:,.{decimals}f} s"


def limit(value: float) -> str:
    """A time limit someone set (a timeout, a budget), in seconds as they would write it: '1 s',
    '0.5 s', '900 s' (a measured duration is `seconds`'s, to its precision)."""
    return f"{number(value)} s"


def percent(share: float) -> str:
    """A share as a percentage: 0.03 -> '3%', 0.025 -> '2.5%'."""
    return f"{number(share * 100)}%"


def dollars(value: float) -> str:
    """'$0.02778', '$1,235': four significant figures, enough to tell close prices apart."""
    return f"${number(value, 4)}"


def size(n: float) -> str:
    """Bytes as a short size in powers of 1024: 2147483648 -> '2.0G', 512 -> '512B'."""
    for unit, power in (("T", 4), ("G", 3), ("M", 2), ("K", 1)):
        if n >= 1024**power:
            return f"{n / 1024**power:.1f}{unit}"
    return f"{int(n)}B"


# Characters a terminal acts on rather than shows: C0 controls and DEL, C1 controls (0x9b is a
# CSI on some terminals), and the bidirectional overrides that reorder what follows them.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_BREAKS = re.compile("[\t\n]")


def printable(text: str, lines: bool = False) -> str:
    """`text` (read from a file: a model's name, a label, a run folder's name) as it may be
    printed to a terminal: every control character (an ESC sequence's ESC, \\r, BEL, C1, the
    bidirectional overrides) shown as its escape (\\x1b), as the HTML escapes what it shows; a
    tab or a line break as well, unless `lines` (a text of several lines keeps its breaks and
    tabs)."""

    def shown(m: re.Match[str]) -> str:
        return repr(m.group())[1:-1] if m.group() != "'" else m.group()

    text = _CONTROL.sub(shown, text)
    return text if lines else _BREAKS.sub(shown, text)
