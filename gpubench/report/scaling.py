"""The report's parallel section: throughput, scaling efficiency, collective share and per-rank
memory against the processes; only where the runs hold parallel points."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.report import html as H
from gpubench.report.figure import Chart, empty_panel, palette, panels, save
from gpubench.science import scaling as S
from gpubench.store.wording import plural

MiB = 2**20


# What tells one line of the scaling chart from another, in the order its label names them (the
# scaling is drawn by line style, the model by panel).
LINE_FIELDS = ("parallel", "batch_size", "nodes", "device_name", "precision", "optimizer")


def parallel_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of parallel points, with `processes` (the world size), `is_baseline`, `line`
    (line_labels) and the scaling efficiency filled in where a baseline is in these runs."""
    if "parallel" not in frame:
        return frame.iloc[0:0]
    rows = frame[frame["parallel"].fillna("none") != "none"].copy()
    if rows.empty:
        return rows
    records = rows.to_dict("records")
    for r in records:  # a null read back as NaN
        for column in ("scaling_efficiency", "scaling_efficiency_noisy"):
            if pd.isna(r.get(column)):
                r[column] = None
    S.fill_efficiency(records)
    for column in ("scaling_efficiency", "scaling_efficiency_noisy"):
        rows[column] = [r.get(column) for r in records]
    rows["processes"] = [S.world_size(r) for r in records]
    rows["is_baseline"] = [S.is_baseline(r) for r in records]
    rows["line"] = line_labels(rows)
    return rows


def line_labels(rows: pd.DataFrame) -> list[str]:
    """Each row's chart line, naming only the LINE_FIELDS whose values differ among `rows` (the
    ones shared by all are said once, in the chart's title), so that the legend stays short."""
    cells = {c: [_cell(c, v) for v in rows[c]] for c in LINE_FIELDS if c in rows}
    differ = [c for c in cells if len(set(cells[c])) > 1 or c == "parallel"]
    return [" ".join(cells[c][i] for c in differ) for i in range(len(rows))]


def shared_fields(rows: pd.DataFrame) -> str:
    """The LINE_FIELDS every row of `rows` shares, as text ('B=16 cpu fp32 adamw')."""
    cells = {c: {_cell(c, v) for v in rows[c]} for c in LINE_FIELDS if c in rows}
    shared = [next(iter(v)) for c, v in cells.items() if len(v) == 1 and c != "parallel"]
    return " ".join(x for x in shared if x != _cell("nodes", 1))  # one node goes without saying


def _cell(column: str, value: Any) -> str:
    if column == "batch_size":
        return f"B={int(value)}"
    if column == "nodes":
        return plural(1 if pd.isna(value) else int(value), "node")
    return str(value)


@dataclass(frozen=True)
class Line:
    """One line of the scaling chart: its legend label, the layout's `line` (its colour), its
    scaling ('weak', 'strong', or '' for a layout measured in one process only) and rows."""

    label: str
    layout: str
    scaling: str
    rows: pd.DataFrame

    @property
    def style(self) -> str:
        return "s--" if self.scaling == "strong" else "o-"


def chart_lines(ok: pd.DataFrame) -> list[Line]:
    """The lines of one model's chart: a line per layout and scaling, its one-process baseline
    the first point of both the weak and the strong line (the one measurement they share); a
    layout measured in one process only is a line of its own."""
    out = []
    for line, g in ok.groupby("line", sort=True):
        base = g[g["is_baseline"]]
        scalings = sorted(str(s) for s in g.loc[~g["is_baseline"], "scaling"].dropna().unique())
        if not scalings:
            out.append(Line(str(line), str(line), "", base))
        for how in scalings:
            mine = g[~g["is_baseline"] & (g["scaling"] == how)]
            out.append(Line(f"{line} {how}", str(line), how, pd.concat([base, mine])))
    return out


def scaling_chart(rows: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per model: global samples/s, scaling efficiency and the collective share of the step,
    against the processes; a line per layout, batch and scaling."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return None
    lines = {m: chart_lines(ok[ok["model"] == m]) for m in sorted(ok["model"].unique())}
    # A colour per layout, its weak and strong lines told apart by style: half the colours.
    colors = palette(ok["line"])
    models = list(lines)
    fig, axes = panels(models, rows_per_title=3)
    for model, (tp, eff, comm) in zip(models, axes, strict=True):
        for line in lines[model]:
            g = line.rows.sort_values("processes")
            kw: dict[str, Any] = {"color": colors[line.layout], "label": line.label}
            tp.plot(g["processes"], g["samples_per_s"], line.style, **kw)
            e = g.dropna(subset=["scaling_efficiency"])
            eff.plot(e["processes"], e["scaling_efficiency"] * 100, line.style, **kw)
            c = g.dropna(subset=["collective_fraction"])
            comm.plot(c["processes"], c["collective_fraction"] * 100, line.style, **kw)
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
            empty_panel(eff, "no one-process baseline in these runs")
    shared = shared_fields(ok)
    file = "scaling.png"
    title = "Scaling with processes (solid: weak, dashed: strong)"
    save(fig, plots_dir, file, f"{title}\n{shared}" if shared else title)
    return Chart(
        file,
        "Scaling",
        "Global samples per second from the slowest rank's median step; scaling efficiency "
        "is that over the same point in one process on the same machine, times the processes "
        "(100% is perfect; weak scaling keeps each process's batch, strong splits the global "
        "batch; the one-process point is measured once and is the first point of both lines); "
        "the share of the step in collectives is the time a collective was in flight "
        "(torch.profiler, overlap with compute included) over the profiled step.",
    )


def memory_chart(rows: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per model: each rank's model state (parameters, gradients, optimizer state) for DDP and
    FSDP against the processes."""
    ok = rows[(rows["status"] == "ok") & rows["rank_model_state_bytes"].notna()]
    if ok.empty:
        return None
    # A rank's model state does not depend on the batch, so weak and strong are one line.
    ok = ok.assign(layout=ok["parallel"].astype(str))
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
    """The parallel section's HTML, or '' where the runs hold no parallel point (its charts
    from an earlier report are then removed by report.chart_record)."""
    rows = parallel_rows(frame)
    if rows.empty:
        return ""
    parts = ["<h2>Parallel points</h2>\n"]
    for chart in (scaling_chart(rows, plots_dir), memory_chart(rows, plots_dir)):
        if chart is not None:
            parts.append(f"<h3>{H.e(chart.title)}</h3>\n" + H.figure(chart))
    columns: list[H.Column] = [
        ("model", lambda r: r["model"]),
        ("parallel", lambda r: r["parallel"]),
        ("scaling", lambda r: "one process" if r["is_baseline"] else r["scaling"]),  # null: ''
        ("processes", lambda r: (str(int(r["processes"])), r["processes"])),
        ("optimizer", lambda r: r["optimizer"]),
        ("global batch", lambda r: H.cell(r["global_batch_size"], ".0f")),
        ("batch per process", lambda r: H.cell(r["per_process_batch_size"], ".0f")),
        ("status", lambda r: r["status"]),
        ("samples/s", lambda r: H.cell(r["samples_per_s"], ",.0f")),
        ("efficiency", lambda r: (S.efficiency_words(r), r["scaling_efficiency"])),
        ("rank spread %", lambda r: H.cell(r["rank_step_time_spread"], ".1f", 100)),
        ("in collectives %", lambda r: H.cell(r["collective_fraction"], ".0f", 100)),
        ("state per rank (MiB)", lambda r: H.cell(r["rank_model_state_bytes"], ",.2f", 1 / MiB)),
    ]
    note = (
        "Efficiency is against the same point in one process on the same machine (one row, "
        "measured once, for weak and strong scaling alike); 'noisy' marks an efficiency whose "
        "point or baseline is noisy (its median step time is not known to the suite's "
        "target_rel_ci)."
    )
    table = H.columns_table(columns, rows.to_dict("records"), sortable=True)
    return "".join(parts) + table + H.note(note)
