"""How counts and numbers read in the text gpubench prints: "1 point", "2 points"; "x100", not
"x1e+02". In store/ because every stage that writes sentences sits above it (tests/test_layout)."""

from __future__ import annotations

import math


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 point', '0 points', '2 points'; `many` where the plural is not noun + 's'
    ('1 batch', '2 batches')."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def number(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant figures, written out as a person would: 0.0123, 1.5,
    250, 1,234 (a number with more whole digits than `digits` keeps them all, rounded to a
    whole number; never 1.23e+03). Only a magnitude below 1e-4 is written with an exponent,
    where zeros would hide the figure; nan and infinities as Python writes them."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    text = f"{value:.{digits}g}"
    if "e" in text and abs(value) >= 1e-4:  # rounding up to 10**digits (999.7 at 3 digits)
        return f"{float(text):,.0f}"
    return text


def times(ratio: float, digits: int = 2) -> str:
    """A ratio as 'x1.9', 'x100', 'x0.5'."""
    return "x" + number(ratio, digits)
