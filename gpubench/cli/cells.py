"""How a number is shown in a printed table's cell."""

from __future__ import annotations

from typing import Any

import pandas as pd


def fmt(value: Any, spec: str) -> str:
    """`value` formatted by `spec`, or an empty cell where it is missing (None or NaN)."""
    return "" if value is None or pd.isna(value) else format(value, spec)
