"""The report's parallel section: throughput, scaling efficiency and the share of the step in
collectives against the number of processes (weak and strong scaling), and per-rank memory of
DDP against FSDP. Drawn only where the runs hold parallel points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.report import html as H
from gpubench.report.figure import Chart, empty_panel, palette, panels, save
from gpubench.science import scaling as S

CHART_FILES = ("scaling.png", "parallel_memory.png")
MiB = 2**20


def parallel_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of parallel points, with a `line` label (layout, batch, device, precision,
    optimizer) and the scaling efficiency filled in where a baseline is in these runs."""
    if "parallel" not in frame:
        return frame.iloc[0:0]
    rows = frame[frame["parallel"].fillna("none") != "none"].copy()
    if rows.empty:
        return rows
    records = rows.to_dict("records")
    for r in records:  # a null read back as NaN
        if pd.isna(r.get("scaling_efficiency")):
            r["scaling_efficiency"] = None
    S.fill_efficiency(records)
    rows["scaling_efficiency"] = [r.get("scaling_efficiency") for r in records]
    rows["processes"] = rows["world_size"].fillna(rows["nproc"]).astype(int)
    rows["line"] = [
        f"{p} {sc} B={int(b)} {dn} {pr} {o}"
        for p, sc, b, dn, pr, o in zip(
            rows["parallel"],
            rows["scaling"],
            rows["batch_size"],
            rows["device_name"],
            rows["precision"],
            rows["optimizer"],
            strict=True,
        )
    ]
    return rows


def scaling_chart(rows: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per model: global samples/s, scaling efficiency and the collective share of the step,
    against the processes; a line per layout and batch."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return None
    colors = palette(rows["line"])
    models = sorted(ok["model"].unique())
    fig, axes = panels(models, rows_per_title=3)
    for model, (tp, eff, comm) in zip(models, axes, strict=True):
        for line, g in ok[ok["model"] == model].groupby("line"):
            g = g.sort_values("processes")
            style = "o-" if "weak" in str(line) else "s--"
            kw: dict[str, Any] = {"color": colors[str(line)], "label": str(line)}
            tp.plot(g["processes"], g["samples_per_s"], style, **kw)
            e = g.dropna(subset=["scaling_efficiency"])
            eff.plot(e["processes"], e["scaling_efficiency"] * 100, style, **kw)
            c = g.dropna(subset=["collective_fraction"])
            comm.plot(c["processes"], c["collective_fraction"] * 100, style, **kw)
        ticks = sorted(ok[ok["model"] == model]["processes"].unique())
        for ax in (tp, eff, comm):
            ax.set_xticks(ticks)
            ax.grid(True, alpha=0.3)
        tp.set_ylabel("global samples/s")
        eff.set_ylabel("scaling efficiency (%)")
        eff.axhline(100, color="grey", linewidth=0.8)
        comm.set_ylabel("step in collectives (%)")
        comm.set_xlabel("processes (world size)")
        if ok[ok["model"] == model]["scaling_efficiency"].isna().all():
            empty_panel(eff, "no nproc = 1 baseline in these runs")
    file = "scaling.png"
    save(fig, plots_dir, file, "Scaling with processes (solid: weak, dashed: strong)")
    return Chart(
        file,
        "Scaling",
        "Global samples per second from the slowest rank's median step; scaling efficiency "
        "is that over the same point at one process times the processes (100% is perfect; weak "
        "scaling keeps each process's batch, strong splits the global batch); the share of the "
        "step in collectives is the time a collective was in flight (torch.profiler, overlap "
        "with compute included) over the profiled step.",
    )


def memory_chart(rows: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per model: each rank's model state (parameters, gradients, optimizer state) for DDP and
    FSDP against the processes."""
    ok = rows[(rows["status"] == "ok") & rows["rank_model_state_bytes"].notna()]
    if ok.empty:
        return None
    ok = ok.assign(
        layout=[f"{p} {sc}" for p, sc in zip(ok["parallel"], ok["scaling"], strict=True)]
    )
    colors = palette(ok["layout"])
    models = sorted(ok["model"].unique())
    fig, axes = panels(models)
    for model, (ax,) in zip(models, axes, strict=True):
        m = ok[ok["model"] == model]
        for layout, g in m.groupby("layout"):
            per = g.groupby("processes")["rank_model_state_bytes"].max().sort_index()
            style = "o-" if str(layout).startswith("ddp") else "s--"
            ax.plot(per.index, per.values / MiB, style, color=colors[str(layout)], label=layout)
        ax.set_xticks(sorted(m["processes"].unique()))
        ax.set_xlabel("processes (world size)")
        ax.set_ylabel("model state per rank (MiB)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    file = "parallel_memory.png"
    save(fig, plots_dir, file, "Model state held by each rank: DDP against FSDP")
    return Chart(
        file,
        "Memory per rank",
        "Parameters, gradients and optimizer state one rank holds after a step (the largest "
        "rank). DDP keeps a whole copy on every rank; FSDP's fully_shard keeps 1/processes of "
        "it, gathering each unit's parameters only while it computes.",
    )


def section(frame: pd.DataFrame, plots_dir: Path) -> str:
    """The parallel section's HTML, or '' where the runs hold no parallel point. Its charts
    from an earlier report of the folder are removed first, so that none lingers undrawn."""
    for name in CHART_FILES:
        (plots_dir / name).unlink(missing_ok=True)
    rows = parallel_rows(frame)
    if rows.empty:
        return ""
    parts = ["<h2>Parallel points</h2>\n"]
    for chart in (scaling_chart(rows, plots_dir), memory_chart(rows, plots_dir)):
        if chart is not None:
            parts.append(f"<h3>{H.e(chart.title)}</h3>\n" + H.figure(chart))
    table = [
        [
            r["model"],
            r["parallel"],
            r["scaling"],
            (str(int(r["processes"])), r["processes"]),
            (H.number(r["global_batch_size"], ".0f"), r["global_batch_size"]),
            (H.number(r["per_process_batch_size"], ".0f"), r["per_process_batch_size"]),
            r["status"],
            (H.number(r["samples_per_s"], ",.0f"), r["samples_per_s"]),
            (H.number(r["scaling_efficiency"], ".0f", 100), r["scaling_efficiency"]),
            (H.number(r["rank_step_time_spread"], ".1f", 100), r["rank_step_time_spread"]),
            (H.number(r["collective_fraction"], ".0f", 100), r["collective_fraction"]),
            (H.number(r["rank_model_state_bytes"], ",.2f", 1 / MiB), r["rank_model_state_bytes"]),
        ]
        for r in rows.to_dict("records")
    ]
    headers = [
        "model",
        "parallel",
        "scaling",
        "processes",
        "global batch",
        "batch per process",
        "status",
        "samples/s",
        "efficiency %",
        "rank spread %",
        "in collectives %",
        "state per rank (MiB)",
    ]
    return "".join(parts) + H.table(headers, table, sortable=True)
