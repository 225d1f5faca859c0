"""The sweep's results table: one line per point, each cell as the report and the verdict
name it."""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich.cells import cell_len
from rich.table import Table

from gpubench.cli import layout
from gpubench.cli.layout import Column
from gpubench.config import labels
from gpubench.config.spec import model_label
from gpubench.harness.step_stats import min_samples_for_ci
from gpubench.science import scaling
from gpubench.store.wording import cell, number


def _options(row: dict[str, Any]) -> str:
    """The settings beyond the defaults, e.g. 'ddp x2 weak, 1 thread, compiled, CUDA graph'."""
    return ", ".join(labels.extras(row))


def model_cell(row: dict[str, Any]) -> str:
    """'mlp/small', or a user's model as 'module:function' with its Workload's own name."""
    label = model_label(row["model"], row.get("model_size"))
    name = row.get("workload")
    if ":" in row["model"] and pd.notna(name) and str(name) not in label:
        label += f" ({name})"
    return label


def _ci_cell(row: dict[str, Any]) -> str:
    """The CI's half-width in percent; where too few steps were measured to have one, says so."""
    if ci := cell(row["step_time_ci_rel"], ".1f", 100):
        return f"{ci}%"
    n, least = row.get("steps_measured"), min_samples_for_ci()
    if n is None or pd.isna(n) or row["status"] != "ok":
        return ""
    return f"n<{least}" if n < least else ""


def _status_cell(row: dict[str, Any]) -> str:
    marks = [m for m in ("noisy", "busy") if row.get(m) is True]
    status = row["status"] + (f" ({', '.join(marks)})" if marks else "")
    if row["status"] != "ok" and row.get("error"):
        status += f": {row['error'][:60]}"
    return status


_LOSS = "synthetic loss first→last"


def _loss_caption() -> str:
    """What the synthetic loss column shows (its batches' count from data.synthetic, which
    imports torch: read when a table has the column, not when the console is imported)."""
    from gpubench.data.synthetic import DISTINCT_BATCHES

    return (
        f"{_LOSS}: the training loss at the first and last step, on {DISTINCT_BATCHES} random "
        "batches cycled, which a model memorises (so it can fall to 0.000): it shows the steps "
        "train, not how well the model learns; a convergence run measures that"
    )


# The columns given up first where the terminal is narrow (layout.fit), in order; identity,
# status and step time always stay.
DROPPED_FIRST = (_LOSS, "samples/s", "efficiency", "±CI")


def summary_table(frame: pd.DataFrame, width: int | None = None) -> Table:
    """One line per point, fitted to `width` terminal cells (None: every column) by layout.fit,
    dropping DROPPED_FIRST; a column empty in every row is left out."""
    records = frame.to_dict("records")
    # a row whose baseline came later (a resumed or merged run) gets its efficiency here
    scaling.fill_efficiency(records)
    status = tuple(_status_cell(r) for r in records)
    options = tuple(_options(r) for r in records)
    columns = [
        Column("model", tuple(model_cell(r) for r in records)),
        Column("device", tuple(str(r["device"]) for r in records), constant_to_title=True),
        Column("precision", tuple(r["precision"] for r in records), "prec", False, True),
        Column("optimizer", tuple(r["optimizer"] for r in records), "optim", False, True),
        Column(
            "options",
            options,
            constant_to_title=True,
            wraps=True,
            least=max((cell_len(o) for s in options for o in s.split(", ")), default=0),
        ),
        Column("batch", tuple(str(r["batch_size"]) for r in records), right=True),
        Column(
            "status",
            status,
            wraps=True,
            least=_least(status),
        ),
        Column("step ms", tuple(cell(r["step_time_s"], ".2f", 1e3) for r in records), right=True),
        Column("±CI", tuple(_ci_cell(r) for r in records), right=True),
        Column("samples/s", tuple(cell(r["samples_per_s"], ",.0f") for r in records), right=True),
        Column(
            "efficiency", tuple(scaling.efficiency_words(r) for r in records), "eff", right=True
        ),
        Column(_LOSS, tuple(_loss_cell(r) for r in records), "loss"),
    ]
    shown = [c for i, c in enumerate(columns) if i < 4 or any(c.cells)]
    fitted = layout.fit(shown, width, DROPPED_FIRST)
    loss = [c.label(fitted.short) for c in fitted.columns if c.header == _LOSS]
    caption = loss[0] + _loss_caption().removeprefix(_LOSS) if loss else None
    return layout.table(fitted, "gpubench results", caption)


def _least(status: tuple[str, ...]) -> int:
    """The status column's least width: a status with its marks ('ok (noisy, busy)') on one
    line, and an error's words unbroken up to 20 cells (a longer one, a path say, folds)."""
    heads = (cell_len(s.split(": ")[0]) for s in status)
    words = (min(cell_len(w), 20) for s in status for w in s.split())
    return max([*heads, *words, 0])


def _loss_cell(row: dict[str, Any]) -> str:
    if pd.notna(row["loss_first"]) and pd.notna(row["loss_last"]):
        return f"{number(row['loss_first'])}→{number(row['loss_last'])}"
    return ""
