"""What a row read from a file of rows may hold, field by field: each setting (config.registry)
of its type and allowed values, each measured column a finite number of bounded size, true or
false, or text (a name without control characters), each raw series a list; the one check
every reader of rows applies (store.results.read_rows), so that a row edited or damaged by
hand is named in one line (its file, line and field) instead of failing where it is used."""

from __future__ import annotations

import math
import re
import types
import typing
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.registry import SETTINGS, null
from gpubench.store.row import COLUMNS, SERIES, TEXT
from gpubench.store.shaped import MAX_MAGNITUDE, shown
from gpubench.store.wording import printable

# Columns that hold true or false (or null).
FLAGS = frozenset(
    {
        "noisy",
        "busy",
        "warmup_steady",
        "deadline_cut",
        "oversubscribed",
        "remeasured",
        "unstable",
        "scaling_efficiency_noisy",
        "noise_scale_split",  # issue 51
    }
)
# A device as a row names it: where it ran (another machine's CUDA device is no error here).
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")
# Checks of a setting's value that ask this machine (a CUDA device's existence): a row's value
# is checked by its form only.
_BY_FORM = {"device"}
# Settings whose text is a name the row's writer chose (a user's model by its import path or its
# own name): text of any form; nothing builds it from a row (config.user_code).
_FREE = {"model"}
# Text columns of several lines (an error's message, a traceback): their breaks are theirs.
_LINES = {"error", "bottleneck_evidence", "energy_note", "cpu_energy_note"}


def problem(row: dict[str, Any], values: bool = True) -> str | None:
    """Why `row` is not a row as gpubench writes it: the first field whose value is not of its
    type or range, named with the value ("batch_size is 'eight', not a whole number"); None
    where every field is. Columns the schema does not know are left as they are (an older
    version's rows hold some). Without `values` (a row made from another tool's file) a
    setting's value is checked for its type only, not against the values gpubench allows."""
    for s in SETTINGS:
        if s.name in row and (why := _setting(s, row[s.name], values)) is not None:
            return f"{s.name} {why}"
    for name, value in row.items():
        if null(value) or name in _SETTING_NAMES:
            continue
        if name in FLAGS:
            if not isinstance(value, bool):
                return f"{name} is {shown(value)}, not true or false"
        elif name in _TEXT:
            if not isinstance(value, str):
                return f"{name} is {shown(value)}, not text"
            if name not in _LINES and printable(value) != value:
                return f"{name} is {shown(value)}, which holds control characters"
        elif name in _SERIES:
            if name == "traceback":
                if not isinstance(value, str | list):
                    return f"{name} is {shown(value)}, not text"
            elif name == "profile":
                if not isinstance(value, dict):
                    return f"{name} is {shown(value)}, not an object"
            elif not isinstance(value, list):
                return f"{name} is {shown(value)}, not a list"
            elif name.endswith("_s") and (why := _numbers(value)) is not None:
                return f"{name}{why}"
        elif name in _NUMBERS and (why := _number(value)) is not None:
            return f"{name} {why}"
    return None


_SETTING_NAMES = frozenset(s.name for s in SETTINGS)
_TEXT = frozenset(TEXT)
_SERIES = frozenset(SERIES)
_NUMBERS = frozenset(COLUMNS) - _SETTING_NAMES - _TEXT - FLAGS - _SERIES


def _setting(s: Any, value: Any, values: bool) -> str | None:
    """Why `value` is not a value of the setting `s` (None where it is, or is null and the
    setting has a default); without `values`, why it is not of the setting's type."""
    if null(value):
        return "is missing (null)" if s.required and values else None
    want = _base(s.type)
    if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
        return f"is {shown(value)}, not {_NAMES.get(want, want.__name__)}"
    if isinstance(value, str) and printable(value) != value:
        return f"is {shown(value)}, which holds control characters"
    if not values or s.name in _FREE:
        return None
    if s.name in _BY_FORM:
        return None if _DEVICE.match(value) else f"is {shown(value)}, not cpu, cuda or cuda:N"
    try:
        s.checked(value)
    except ConfigError as e:
        return f"is {shown(value)}: {e}"
    return None


def _base(hint: Any) -> type:
    """The type of a setting's annotation without its None (int | None -> int)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return typing.cast(type, inner)
    return typing.cast(type, hint)


_NAMES = {str: "text", int: "a whole number", bool: "true or false", float: "a number"}


def _number(value: Any) -> str | None:
    """Why `value` is not a measured number (None where it is)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is {shown(value)}, not a number"
    if not (isinstance(value, int) or math.isfinite(value)) or abs(value) > MAX_MAGNITUDE:
        return f"is {shown(value)}, beyond {MAX_MAGNITUDE:g} in size"
    return None


def _numbers(values: list[Any]) -> str | None:
    for i, v in enumerate(values):
        if not null(v) and (why := _number(v)) is not None:
            return f"[{i}] {why}"
    return None
