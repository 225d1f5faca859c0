"""The report's effective-batch section: samples/s and peak memory of each way of reaching an
effective batch (accumulation, checkpointing), and a table; only where the runs swept them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.axes import Axes

from gpubench.config.labels import way
from gpubench.report import html as H
from gpubench.report import series as S
from gpubench.report.figure import Chart, batch_axis, empty_panel, palette, panels_of, save
from gpubench.science import effective_batch as E

CHART_FILE = "effective_batch.png"
MiB = 2**20


def choice_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a run that swept accumulate or checkpoint (none where every row is at
    accumulate 1 without checkpointing), with `way` (config.labels' words, e.g.
    'as 4 micro-batches, checkpoint blocks') and
    `line` (the way, and the device, precision and optimizer where those vary) labels."""
    if "accumulate" not in frame or "checkpoint" not in frame:
        return frame.iloc[0:0]
    k = frame["accumulate"].fillna(1).astype(int)
    ck = frame["checkpoint"].fillna("none").astype(str)
    if ((k == 1) & (ck == "none")).all():
        return frame.iloc[0:0]
    rows = frame.assign(accumulate=k, checkpoint=ck)
    rows["way"] = [way(a, None, c) for a, c in zip(k, ck, strict=True)]
    tell = [c for c in ("device_name", "precision", "optimizer") if rows[c].nunique() > 1]
    rows["line"] = [
        " ".join([str(w), *(str(r[c]) for c in tell)])
        for w, (_, r) in zip(rows["way"], rows.iterrows(), strict=True)
    ]
    rows["panel"] = S.panel(rows)
    return rows


def chart(rows: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per model: samples/s and peak memory against the effective batch, a line per way (a bar
    per way where every model ran one effective batch: _ways). None where no row ran."""
    ok = rows[(rows["status"] == "ok") & rows["samples_per_s"].notna()]
    if ok.empty:
        return None
    column, words = E.memory_column(ok.to_dict("records"))
    one_batch = bool((rows.groupby("panel")["batch_size"].nunique() == 1).all())
    colors = palette(rows["line"])
    models, fig, axes = panels_of(rows if one_batch else ok, rows_per_title=2)
    draw = _ways if one_batch else _lines
    for model, (speed, memory) in zip(models, axes, strict=True):
        draw(speed, memory, rows[rows["panel"] == model], ok[ok["panel"] == model], column, colors)
        speed.set_ylabel("samples/s")
        memory.set_ylabel(f"{words} (MiB)")
    save(fig, plots_dir, CHART_FILE, "Effective batch: accumulation and checkpointing")
    if one_batch:
        caption = (
            "Samples per second (per effective sample: an optimizer step over k micro-batches "
            f"counts the effective batch once) and peak memory ({words}) of each way of "
            "reaching the one effective batch measured: k micro-batches of batch / k samples "
            "each (accumulate k), with the model's repeated blocks recomputing their "
            "activations in backward (checkpoint) or not. A way that did not run is named by "
            "its status (oom: it ran out of memory); the table below has every figure."
        )
    else:
        caption = (
            "Samples per second (per effective sample: an optimizer step over k micro-batches "
            "counts the effective batch once) and peak memory "
            f"({words}) against the effective batch, a line per way of reaching it: k "
            "micro-batches of batch / k samples each (accumulate k), dashed where the model's "
            "repeated blocks recompute their activations in backward (checkpoint). A way that "
            "ran out of memory has no mark; the table below names it."
        )
    return Chart(CHART_FILE, "Effective batch", caption)


def _lines(
    speed: Axes, memory: Axes, rows: pd.DataFrame, ok: pd.DataFrame, column: str, colors: dict
) -> None:
    """One model's samples/s and memory (`column`) against the effective batch, a line per way
    (`rows`: the model's, `ok`: those that ran)."""
    for line, g in ok.groupby("line"):
        g = g.sort_values("batch_size")
        style = "s--" if ", checkpoint" in str(line) else "o-"
        kw: dict[str, Any] = {"color": colors[str(line)], "label": str(line)}
        speed.plot(g["batch_size"], g["samples_per_s"], style, **kw)
        held = g[g[column].notna()] if column in g else g.iloc[0:0]
        memory.plot(held["batch_size"], held[column] / MiB, style, **kw)
    for ax in (speed, memory):
        batch_axis(ax, rows["batch_size"])
        ax.set_xlabel("effective batch (samples per optimizer step, log scale)")
    speed.set_ylim(bottom=0)
    if column not in ok or ok[column].isna().all():
        empty_panel(memory, "no peak memory measured")
    else:
        memory.set_ylim(bottom=0)


def _ways(
    speed: Axes, memory: Axes, rows: pd.DataFrame, ok: pd.DataFrame, column: str, colors: dict
) -> None:
    """One model measured at one effective batch: a bar per way of its samples/s and of its
    peak memory (`column`); a way that did not run is named with its status where its bar
    would be."""
    m = rows.assign(recomputes=rows["checkpoint"] != "none").sort_values(
        ["accumulate", "recomputes", "line"]
    )
    lines = list(dict.fromkeys(str(x) for x in m["line"]))
    for ax, values in ((speed, "samples_per_s"), (memory, column)):
        for i, line in enumerate(lines):
            got = ok[ok["line"] == line][values].dropna() if values in ok else pd.Series()
            if len(got):
                ax.bar(i, float(got.max()) / (MiB if ax is memory else 1), color=colors[line])
            else:
                status = m[m["line"] == line]["status"].iloc[0]
                said = "not measured" if status == "ok" else str(status)
                ax.text(i, 0, said, ha="center", va="bottom", fontsize=9)
        ax.set_xticks(range(len(lines)), lines, rotation=20, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(lines) - 0.4)
        ax.set_ylim(bottom=0)
    model = str(rows["panel"].iloc[0])
    speed.set_title(f"{model}, effective batch {int(m['batch_size'].iloc[0])}", fontsize=10)


def section(frame: pd.DataFrame, plots_dir: Path) -> str:
    """The section's HTML, or '' where the runs did not sweep accumulate or checkpoint (its
    chart from an earlier report is then removed by report.chart_record)."""
    rows = choice_rows(frame)
    if rows.empty:
        return ""
    parts = ["<h2>Effective batch</h2>\n"]
    c = chart(rows, plots_dir)
    parts.append(H.figure(c) if c else H.note("Effective batch: no way of any batch ran."))
    columns: list[H.Column] = [
        ("point", lambda pair: pair[0].where),
        ("way", lambda pair: pair[1].name),
        ("status", lambda pair: pair[1].status),
        ("samples/s", lambda pair: H.cell(pair[1].samples_per_s, ",.0f")),
        ("x fastest", lambda pair: H.cell(pair[1].ratio, ".2f")),
        ("peak MiB", lambda pair: H.cell(pair[1].memory_bytes, ",.0f", 1 / MiB)),
        ("% of memory", lambda pair: H.cell(pair[1].memory_ratio, ".0f", 100)),
    ]
    answers = E.effective_batches(rows.to_dict("records"))
    pairs = [(answer, choice) for answer in answers for choice in answer.choices]
    return "".join(parts) + H.columns_table(columns, pairs, sortable=True)
