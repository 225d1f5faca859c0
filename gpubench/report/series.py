"""A chart's series and how it is named: a series is every identity field of a point (the
device by its name, and the run where two runs share a device name: `series_run`) but the
chart's x axis; its label names only the fields that differ among the series drawn together."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from gpubench.config.labels import MAIN, accumulation, model_label, model_options, options
from gpubench.config.registry import BY_NAME
from gpubench.store.wording import missing


def short_device(device_name: str) -> str:
    """'cuda (NVIDIA H100 80GB HBM3)' -> 'H100 80GB HBM3'; 'cpu (Intel Xeon ...)' -> 'CPU';
    a device index other than 0 is kept ('cuda:1 H100 80GB HBM3')."""
    if device_name.startswith("cpu"):
        return "CPU"
    m = re.match(r"cuda(:\d+)? \((.*)\)$", device_name)
    if not m:
        return device_name
    name = m.group(2).removeprefix("NVIDIA ").strip()
    return f"cuda{m.group(1)} {name}" if m.group(1) not in (None, ":0") else name


def _int(value: Any) -> str:
    return "auto" if missing(value) else str(int(value))


def _options(row: Mapping[str, Any]) -> str:
    opts = options(row, skip=("data",))
    return ", ".join(opts) if opts else "eager"


# The fields a series can differ in, in the order a label names them: (name, how a row's value
# is written, config.labels' words where it has them). Together they cover every IDENTITY column:
# the device by its name, the speed options (config.registry's settings with a word) as one
# field, and the parallel layout (parallel, processes, nodes, scaling) as one.
Render = Callable[[Mapping[str, Any]], str]
FIELDS: dict[str, Render] = {
    "run": lambda r: f"[{r['series_run']}]" if r.get("series_run") else "",
    "device_name": lambda r: short_device(str(r["device_name"])),
    "model": lambda r: str(r["model"]),
    "model_size": lambda r: f"size={r['model_size']}",
    "precision": lambda r: str(r["precision"]),
    "optimizer": lambda r: str(r["optimizer"]),
    "options": _options,
    "data": lambda r: f"{r.get('data')} data",
    "threads": lambda r: str(MAIN["threads"]({"threads": r.get("threads")}, True)),  # as asked
    "parallel": lambda r: str(MAIN["parallel"](r, True)),
    "lr_scaling": lambda r: f"lr {BY_NAME['lr_scaling'].value(r) or 'fixed'}",
    "accumulate": lambda r: accumulation(int(BY_NAME["accumulate"].value(r))),
    "checkpoint": lambda r: f"checkpoint {BY_NAME['checkpoint'].value(r)}",
    "model_options": lambda r: model_options(r.get("model_options")),
    "seed": lambda r: str(MAIN["seed"](r, True)),
    "batch_size": lambda r: f"B={_int(r.get('batch_size'))}",
}
# Fields a chart's panel title names (a panel per model and size), so its legend need not.
PANEL = ("model", "model_size")
# Fields a chart draws by line style and by marker; the rest set a series' colour.
LINE_FIELD = "optimizer"
MARKER_FIELD = "options"


def panel(frame: pd.DataFrame) -> list[str]:
    """Each row's chart panel: model/size (a user's model, 'module:Class', has no size)."""
    pairs = zip(frame["model"], frame["model_size"], strict=True)
    return [model_label(m, z) for m, z in pairs]


def _write(row: Mapping[str, Any], name: str, full: bool = False) -> str:
    """A field of `row` as a label writes it; `full` writes the device by its whole name
    ('cpu (Intel Xeon ...)', not 'CPU')."""
    if full and name == "device_name":
        return str(row.get("device_name", row.get("device")))
    return FIELDS[name](row)


def written(records: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    """Each record's `names` written as a label would ('CPU bf16 compiled threads=1'), short
    where that tells them apart as well as the whole device names do (two CPU models are both
    'CPU' short)."""
    short, full = (
        [" ".join(t for n in names if (t := _write(r, n, whole))) for r in records]
        for whole in (False, True)
    )
    return short if len(set(short)) == len(set(full)) else full


def key(row: Mapping[str, Any], without: Sequence[str] = ("batch_size",)) -> str:
    """A series' identity as text: every field but `without`, the device by its full name
    (two GPUs of one model differ in their index). Equal keys mean the same series."""
    written = (_write(row, n, full=True) for n in FIELDS if n not in without)
    return " | ".join(w for w in written if w)


def assign(
    frame: pd.DataFrame, column: str = "series", without: Sequence[str] = ("batch_size",)
) -> pd.DataFrame:
    """`frame` with `column` set to each row's series key (see key)."""
    records = frame.to_dict("records")
    return frame.assign(**{column: [key(r, without) for r in records]})


def varying(frame: pd.DataFrame, column: str = "series", exclude: Iterable[str] = ()) -> list[str]:
    """The fields (FIELDS order) whose written value differs among the series of `frame`."""
    firsts = frame.drop_duplicates(column).to_dict("records")
    skip = set(exclude)
    return [n for n in FIELDS if n not in skip and len({_write(r, n, True) for r in firsts}) > 1]


def labels(
    frame: pd.DataFrame,
    column: str = "series",
    exclude: Iterable[str] = (),
    fallback: Sequence[str] = ("device_name", "precision", "optimizer"),
) -> dict[str, str]:
    """Per series of `frame`: the fields that differ among them (not `exclude`, which a panel's
    title already names). A lone series (nothing differs) is named by `fallback`."""
    names = varying(frame, column, exclude) or list(fallback)
    firsts = frame.drop_duplicates(column).to_dict("records")
    return {str(r[column]): w for r, w in zip(firsts, written(firsts, names), strict=True)}


def common(frame: pd.DataFrame, names: Iterable[str]) -> str:
    """The named fields that are the same on every row of `frame`, written once
    ('eager, device data, threads=auto'); '' when none is."""
    records = frame.to_dict("records")
    if not records:
        return ""
    out = [FIELDS[n](records[0]) for n in names if len({FIELDS[n](r) for r in records}) == 1]
    return ", ".join(o for o in out if o)  # a field that writes nothing (no run named) is left out
