"""How a number is shown in a printed table's cell."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from gpubench.store.wording import number

_SIGNIFICANT = re.compile(r"\.(\d+)g")


def fmt(value: Any, spec: str) -> str:
    """`value` formatted by `spec`, or an empty cell where it is missing (None or NaN). A
    significant-figures spec (".3g") writes the number out (12,345, not 1.23e+04)."""
    if value is None or pd.isna(value):
        return ""
    m = _SIGNIFICANT.fullmatch(spec)
    return number(float(value), int(m.group(1))) if m else format(value, spec)
