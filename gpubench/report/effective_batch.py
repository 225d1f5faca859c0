"""The report's effective-batch section (issue 25): samples/s and peak memory against the
effective batch, a line per way of reaching it (accumulation steps, activation checkpointing),
and the verdict's answer per effective batch as a table. Drawn only where the runs swept
`accumulate` or `checkpoint` beyond their defaults."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpubench.report import html as H
from gpubench.report.figure import Chart, batch_axis, empty_panel, palette, panels, save
from gpubench.science import effective_batch as E

CHART_FILE = "effective_batch.png"
MiB = 2**20


def choice_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a run that swept accumulate or checkpoint (none where every row is at
    accumulate 1 without checkpointing), with `way` (e.g. 'accumulate 4, checkpoint') and
    `line` (the way, and the device, precision and optimizer where those vary) labels."""
    if "accumulate" not in frame or "checkpoint" not in frame:
        return frame.iloc[0:0]
    k = frame["accumulate"].fillna(1).astype(int)
    ck = frame["checkpoint"].fillna("none").astype(str)
    if ((k == 1) & (ck == "none")).all():
        return frame.iloc[0:0]
    rows = frame.assign(accumulate=k, checkpoint=ck)
    rows["way"] = [
        f"accumulate {a}" + (", checkpoint" if c == "blocks" else "")
        for a, c in zip(k, ck, strict=True)
    ]
    tell = [c for c in ("device_name", "precision", "optimizer") if rows[c].nunique() > 1]
    rows["line"] = [
        " ".join([str(w), *(str(r[c]) for c in tell)])
        for w, (_, r) in zip(rows["way"], rows.iterrows(), strict=True)
    ]
    rows["panel"] = [f"{m}/{s}" for m, s in zip(rows["model"], rows["model_size"], strict=True)]
    return rows


def chart(rows: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per model: samples/s (per effective sample) and peak memory against the effective
    batch, a line per way; None where no row ran."""
    ok = rows[(rows["status"] == "ok") & rows["samples_per_s"].notna()]
    if ok.empty:
        return None
    column, words = E.memory_column(ok.to_dict("records"))
    colors = palette(rows["line"])
    models = sorted(ok["panel"].unique())
    fig, axes = panels(models, rows_per_title=2)
    for model, (speed, memory) in zip(models, axes, strict=True):
        m = ok[ok["panel"] == model]
        for line, g in m.groupby("line"):
            g = g.sort_values("batch_size")
            style = "s--" if ", checkpoint" in str(line) else "o-"
            kw = {"color": colors[str(line)], "label": str(line)}
            speed.plot(g["batch_size"], g["samples_per_s"], style, **kw)
            held = g[g[column].notna()] if column in g else g.iloc[0:0]
            memory.plot(held["batch_size"], held[column] / MiB, style, **kw)
        for ax in (speed, memory):
            batch_axis(ax, rows[rows["panel"] == model]["batch_size"])
            ax.set_xlabel("effective batch (samples per optimizer step, log scale)")
        speed.set_ylabel("samples/s")
        speed.set_ylim(bottom=0)
        memory.set_ylabel(f"{words} (MiB)")
        if column not in m or m[column].isna().all():
            empty_panel(memory, "no peak memory measured")
        else:
            memory.set_ylim(bottom=0)
    save(fig, plots_dir, CHART_FILE, "Effective batch: accumulation and checkpointing")
    return Chart(
        CHART_FILE,
        "Effective batch",
        "Samples per second (per effective sample: an optimizer step over k micro-batches "
        "counts the effective batch once) and peak memory "
        f"({words}) against the effective batch, a line per way of reaching it: k micro-batches "
        "of batch / k samples each (accumulate k), dashed where the model's repeated blocks "
        "recompute their activations in backward (checkpoint). A way that ran out of memory "
        "has no mark; the table below names it.",
    )


def section(frame: pd.DataFrame, plots_dir: Path) -> str:
    """The section's HTML, or '' where the runs did not sweep accumulate or checkpoint. Its
    chart from an earlier report of the folder is removed first, so that none lingers."""
    (plots_dir / CHART_FILE).unlink(missing_ok=True)
    rows = choice_rows(frame)
    if rows.empty:
        return ""
    parts = ["<h2>Effective batch</h2>\n"]
    c = chart(rows, plots_dir)
    parts.append(H.figure(c) if c else H.note("Effective batch: no way of any batch ran."))
    table = []
    for answer in E.effective_batches(rows.to_dict("records")):
        for choice in answer.choices:
            table.append(
                [
                    answer.where,
                    choice.name,
                    choice.status,
                    (H.number(choice.samples_per_s, ",.0f"), choice.samples_per_s),
                    (H.number(choice.ratio, ".2f"), choice.ratio),
                    (
                        H.number(choice.memory_bytes, ",.0f", 1 / MiB),
                        choice.memory_bytes,
                    ),
                    (H.number(choice.memory_ratio, ".0f", 100), choice.memory_ratio),
                ]
            )
    headers = ["point", "way", "status", "samples/s", "x fastest", "peak MiB", "% of memory"]
    return "".join(parts) + H.table(headers, table, sortable=True)
