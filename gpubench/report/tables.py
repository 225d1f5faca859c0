"""The report's tables: the per-series summary, the speedups over the CPU, failed points and
every point. A table shows each identity field that differs among its rows as a column of its
own, and states the ones that are the same on every row once, above it (issue 21)."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

import pandas as pd

from gpubench.config import registry
from gpubench.config.labels import cell
from gpubench.config.spec import PRECISION_NOTE
from gpubench.report import analysis as A
from gpubench.report import html as H
from gpubench.report import series as S
from gpubench.store import wording

# Identity fields beyond model, size, device, precision, optimizer and batch: every setting with
# a table heading (config.registry), with it.
OPTION_COLUMNS = {s.name: s.heading for s in registry.SETTINGS if s.heading is not None}


def option_columns(frame: pd.DataFrame, skip: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """The OPTION_COLUMNS (but `skip`) that differ among `frame`'s rows, and a sentence naming
    the values of those that are the same on all of them ('' when there are none)."""
    present = [c for c in OPTION_COLUMNS if c in frame and c not in skip]
    differ = [c for c in present if len({cell(c, v) for v in frame[c]}) > 1]
    same = [c for c in present if c not in differ]
    if frame.empty or not same:
        return differ, ""
    first = frame.iloc[0]
    facts = ", ".join(f"{OPTION_COLUMNS[c]} {cell(c, first[c])}" for c in same)
    return differ, f"Same on every row: {facts}."


BATCH: H.Column = ("batch", lambda r: (str(int(r["batch_size"])), r["batch_size"]))


def _identity(fields: tuple[str, ...], differ: list[str]) -> list[H.Column]:
    """Columns of `fields` as they are, then of the OPTION_COLUMNS in `differ` as table cells."""
    plain: list[H.Column] = [(f, itemgetter(f)) for f in fields]
    return plain + [(OPTION_COLUMNS[c], lambda r, c=c: cell(c, r[c])) for c in differ]


def _cell_text(cell: tuple[str, object] | str) -> str:
    return cell[0] if isinstance(cell, tuple) else cell


def summary(frame: pd.DataFrame, capacity: dict[tuple[str, str], int | None]) -> str:
    """One line per model and series: best throughput, throughput-optimal batch, latency floor,
    memory per sample, predicted largest batch and first OOM batch."""
    s = A.series_summary(frame, capacity)
    if s.empty:
        return "<h2>Summary</h2>\n" + H.note("These runs hold no rows.")
    names = S.labels(frame, exclude=S.PANEL)
    marks = best_marks(frame)
    columns: list[H.Column] = [
        ("model", lambda r: r["model"]),
        ("series", lambda r: names[r["series"]]),
        ("points ok", lambda r: (str(r["points_ok"]), r["points_ok"])),
        ("best samples/s", lambda r: _marked(r, marks)),
        ("throughput-optimal batch", lambda r: H.cell(r["throughput_optimal_batch"], "d")),
        ("latency floor (ms)", lambda r: H.cell(r["latency_floor_s"], ",.4g", 1e3)),
        ("memory per sample (MiB)", lambda r: H.cell(r["memory_per_sample_bytes"], ",.2f", 2**-20)),
        ("predicted largest batch", lambda r: H.cell(r["predicted_max_batch"], ",d")),
        ("first OOM batch", lambda r: H.cell(r["oom_batch"], "d")),
    ]
    records = s.to_dict("records")
    # A column with nothing in any series (memory and OOM on a CPU run, say) is left out.
    keep = [c for c in columns if any(_cell_text(c[1](r)) for r in records)]
    dropped = [c[0] for c in columns if c not in keep]
    absent = f" Not measured in these runs, so not shown: {', '.join(dropped)}." if dropped else ""
    same = S.common(frame, [f for f in S.FIELDS if f not in (*S.PANEL, "batch_size")])
    stated = f" Every series: {same}." if same else ""
    return (
        "<h2>Summary</h2>\n"
        '<p class="caption">Per model and series (a series is a point\'s whole identity but '
        "its batch size; it is named by what differs among the series)."
        f"{H.e(stated)} The throughput-optimal batch is the smallest "
        "within 5% of the best samples/s; the latency floor is the shortest median step; the "
        "memory per sample and predicted largest batch come from the fitted memory line and the "
        f"device's memory (GPUs). {H.e(MARKS_NOTE)}{H.e(absent)} {H.e(PRECISION_NOTE)}</p>\n"
        + H.columns_table(keep, records, sortable=True)
    )


MARKS_NOTE = (
    "A figure marked (re-measured) is the verdict's re-measurement of that configuration in "
    "fresh processes, the one the verdict quotes; one marked (unstable) was re-measured outside "
    "its row's own 95% interval."
)


def best_marks(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (model as the summary names it, series): ' (re-measured)' or ' (re-measured,
    unstable)' where the series' best samples/s is the verdict's re-measurement
    (science.remeasured), '' elsewhere."""
    out: dict[tuple[str, str], str] = {}
    if "remeasured" not in frame:
        return out
    one_size = frame["model_size"].nunique() == 1
    ok = A.ok_rows(frame)
    for (model, size, series), g in ok.groupby(["model", "model_size", "series"], sort=True):
        if g["samples_per_s"].notna().sum() == 0:
            continue
        best = g.loc[g["samples_per_s"].idxmax()]
        name = model if one_size else f"{model}/{size}"
        if best.get("remeasured") is True:
            unstable = best.get("unstable") is True
            out[(name, str(series))] = " (re-measured, unstable)" if unstable else " (re-measured)"
    return out


def _marked(r: dict[str, Any], marks: dict[tuple[str, str], str]) -> tuple[str, object]:
    """The best samples/s cell, marked where it is the verdict's re-measurement."""
    text, value = H.cell(r["best_samples_per_s"], ",.0f")
    return text + marks.get((str(r["model"]), str(r["series"])), ""), value


def speedups(table: pd.DataFrame) -> tuple[str, str]:
    """The speedup table's caption (the CPU and the thread counts of the CPU rows matched) and
    the table, with a column per identity field that differs among its rows."""
    threads = sorted({int(t) for t in table["cpu_threads"].dropna()})
    cpus = sorted(set(table["cpu_name"]))
    stated = (
        f"The CPU rows matched ({'; '.join(cpus)}) ran with "
        f"{', '.join(map(str, threads))} torch thread(s)."
        if threads
        else f"The CPU ({'; '.join(cpus)}) thread count was not recorded."
    )
    differ, same = option_columns(table)
    columns: list[H.Column] = [
        ("model", lambda r: r["panel"]),
        ("GPU", lambda r: S.short_device(str(r["device_name"]))),
        *_identity(("precision", "optimizer"), differ),
        BATCH,
        ("CPU threads", lambda r: H.cell(r["cpu_threads"], "d")),
        ("CPU ms", lambda r: H.cell(r["cpu_step_time_s"], ",.3f", 1e3)),
        ("GPU ms", lambda r: H.cell(r["gpu_step_time_s"], ",.3f", 1e3)),
        ("speedup", lambda r: (wording.cell(r["speedup"], ",.1f") + "x", r["speedup"])),
    ]
    body = H.columns_table(columns, table.to_dict("records"), sortable=True)
    return f"{stated} {same}".strip(), body


def failures(frame: pd.DataFrame) -> str:
    bad = frame[frame["status"] != "ok"]
    head = "<h2>Failed and unsupported points</h2>\n"
    if bad.empty:
        return head + ("<p>Every point ran.</p>" if len(frame) else "<p>No points.</p>")
    differ, same = option_columns(bad)
    columns: list[H.Column] = [
        *_identity(("run", "model", "device", "precision", "optimizer"), differ),
        BATCH,
        ("status", lambda r: r["status"]),
        ("reason", lambda r: r["error"]),
    ]
    caption = f'<p class="caption">{H.e(same)}</p>\n' if same else ""
    return head + caption + H.columns_table(columns, bad.to_dict("records"), sortable=True)


# (column, header, format, scale) for the table of all rows; a column of nulls is left out.
ROW_COLUMNS = [
    ("step_time_s", "step ms", ",.3f", 1e3),
    ("step_time_iqr_s", "IQR ms", ",.3f", 1e3),
    ("steps_measured", "steps", "d", 1),
    ("samples_per_s", "samples/s", ",.0f", 1),
    ("tokens_per_s", "tokens/s", ",.0f", 1),
    ("tflops", "TFLOP/s", ".3g", 1),
    ("mfu", "MFU %", ".1f", 100),
    ("matmul_roof_fraction", "matmul roof %", ".1f", 100),
    ("torch_peak_allocated_bytes", "alloc MiB", ",.0f", 1 / 2**20),
    ("torch_peak_reserved_bytes", "reserved MiB", ",.0f", 1 / 2**20),
    ("nvml_process_peak_used_bytes", "NVML process MiB", ",.0f", 1 / 2**20),
    ("nvml_peak_used_bytes", "NVML device MiB", ",.0f", 1 / 2**20),  # every process's
    ("host_peak_rss_bytes", "RSS MiB", ",.0f", 1 / 2**20),
    ("energy_j_per_step", "J/step", ".3g", 1),
    ("avg_power_w", "W", ",.0f", 1),
    ("loss_first", "loss first", ".4g", 1),
    ("loss_last", "loss last", ".4g", 1),
    ("eval_loss", "eval loss", ".4g", 1),
    ("eval_accuracy", "eval acc", ".3f", 1),
    ("steps_to_target", "steps to target", ",.0f", 1),
    ("time_to_target_s", "s to target", ",.2f", 1),
    ("torch_threads", "threads", "d", 1),  # issue 14: the threads each point ran with
]


def _any(frame: pd.DataFrame, flag: str) -> bool:
    """Whether any row of `frame` has `flag` true (nulls are not)."""
    return flag in frame and any(v is True or v == True for v in frame[flag])  # noqa: E712


def _flag(flag: str) -> Callable[[dict[str, Any]], str]:
    return lambda r: flag if r.get(flag) is True else ""


def _number(column: str, spec: str, scale: float) -> Callable[[dict[str, Any]], tuple[str, Any]]:
    return lambda r: H.cell(r[column], spec, scale)


def _status(row: dict[str, Any]) -> str:
    """The row's status; a convergence run that never reached its target says it missed it."""
    missed = pd.notna(row.get("target")) and pd.isna(row.get("steps_to_target"))
    return "ok, missed target" if row["status"] == "ok" and missed else str(row["status"])


def all_rows(frame: pd.DataFrame) -> str:
    """Every point: its identity (a column per field that differs among the rows, the rest
    stated once above), status, noisy, busy, remeasured and unstable flags (the last three
    where any row has them), and every measured column (samples/s the re-measured figure where
    `remeasured`)."""
    cols = [c for c in ROW_COLUMNS if c[0] in frame and frame[c[0]].notna().any()]
    differ, same = option_columns(frame, skip=("seed",))  # the seed has its column always
    # issue 41: the verdict's re-measured configurations, and those it found unstable
    shown = ["noisy", *[f for f in ("busy", "remeasured", "unstable") if _any(frame, f)]]
    columns: list[H.Column] = [
        *_identity(("run", "model"), []),
        ("size", lambda r: "" if ":" in r["model"] else r["model_size"]),  # user's models: none
        *_identity(("device", "precision", "optimizer"), differ),
        BATCH,
        ("seed", lambda r: H.cell(r["seed"], ".0f")),
        ("status", _status),
        *[(flag, _flag(flag)) for flag in shown],
        *[(heading, _number(c, f, scale)) for c, heading, f, scale in cols],
    ]
    rows = H.columns_table(columns, frame.to_dict("records"), sortable=True)
    stated = f" {same}" if same else ""
    return (
        '<h2>All points</h2>\n<p class="caption">Click a column\'s heading to sort by it; a wide '
        f"table scrolls sideways.{H.e(stated)}</p>\n" + rows
    )
