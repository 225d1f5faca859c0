"""The time-to-target search (tune_target.json: gpubench.store.target_record) in the report's
search section: its words, chart and table of runs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from gpubench.report import html as H
from gpubench.report.figure import Chart, empty_panel, palette, panels, save
from gpubench.report.search_speed import mark, seconds, time_spent
from gpubench.store.target_record import TargetRecord, TargetRun
from gpubench.store.wording import number

MARKERS = {"reached": "*", "kept": "o", "stopped": "x", "seed": "D"}
FATE = {
    "reached": "reached the target",
    "kept": "kept",
    "stopped": "stopped",
    "seed": "re-run on a further seed",
}


def lines(record: TargetRecord) -> list[str]:
    """The search in words: how it ended, its coverage and runs' fates, time, best, answer."""
    out, runs = [], record.trials
    if record.finished:
        out.append("Finished: every rung decided and the answer re-run on its further seeds.")
    elif record.stopped_by_budget:
        out.append("Stopped early by its budget.")
    else:
        out.append(
            "Not finished, and no reason recorded: written while the search ran, or cut off."
        )
    fates = Counter(r.decision for r in runs)
    told = [f"{fates[d]} {FATE[d]}" for d in FATE if fates[d] and d != "stopped"]
    if fates["stopped"]:
        why = Counter(r.reason.split(":")[0] for r in runs if r.decision == "stopped")
        told.append(
            f"{fates['stopped']} stopped (" + ", ".join(f"{n} {w}" for w, n in why.items()) + ")"
        )
    told += [f"{n} {d or 'undecided'}" for d, n in fates.items() if d not in FATE]
    out.append(
        f"Coverage: {record.covered.get('measured', '?')} of "
        f"{record.covered.get('space_size', '?')} "
        f"configurations run; {len(runs)} runs: " + ", ".join(told) + "."
    )
    study = record.optuna
    if study:
        ended = ", ".join(f"{n} {s.lower()}" for s, n in study.states.items())
        out.append(
            f"Run on Optuna: {study.sampler} and {study.pruner} (reduction factor "
            f"{study.reduction_factor}); its trials: {ended or 'none'}."
        )
    time = time_spent(record.elapsed_s, record.budget_s)
    spent = record.spent_s
    out.append(time + (f"; the runs cost {seconds(spent)}." if spent is not None else "."))
    reached = [r for r in runs if r.decision == "reached" and r.time_to_target_s is not None]
    if reached:
        best = min(reached, key=lambda r: r.time_to_target_s or 0.0)
        out.append(
            f"Fastest single run: {seconds(best.time_to_target_s)} of training to the target "
            f"({best.label}, seed {best.seed}); one seed, not the answer."
        )
    answer = record.answer
    if answer:
        text = ": ".join(x for x in (answer.label, answer.describe) if x)
        out.append(f"Answer, as the search recorded it: {text or 'not described'}.")
    else:
        out.append(
            "The search named no answer" + ("." if reached else ": no run reached the target.")
        )
    return out


def chart(name: str, record: TargetRecord, plots_dir: Path, file: str) -> Chart:
    """Best time to target so far (left) and each run's best metric (right) against wall time."""
    metric = record.metric or "metric"
    fig, axes = panels(["time to the target", f"each run's best {metric}"])
    fig.set_size_inches(12.0, 4.4)
    best_ax, metric_ax = axes[0][0], axes[1][0]
    done = sorted((r for r in record.trials if r.t_end_s is not None), key=lambda r: r.t_end_s or 0)
    n_rungs = len(record.rungs_s)
    names = {r.rung: "seed re-runs" if r.rung >= n_rungs > 0 else f"rung {r.rung}" for r in done}
    colors = palette(names.values())
    for k in sorted(names):
        best_ax.plot([], [], "s", color=colors[names[k]], label=names[k])
    _time_panel(best_ax, record, done, names, colors)
    _metric_panel(metric_ax, record, done, names, colors)
    budget = record.budget_s
    ends = [x for x in (record.elapsed_s, budget, *(r.t_end_s for r in done)) if x]
    for ax in (best_ax, metric_ax):
        if ax.get_gid() is None:
            if budget is not None:
                ax.axvline(budget, color="red", linestyle="--", linewidth=1.2, label="budget")
            ax.set_xlim(0, max(ends) * 1.02)
            ax.set_xlabel("wall time since the search started (s)")
            ax.grid(True, alpha=0.3)
    keys: dict[str, dict[str, Any]] = {
        FATE[d]: {"marker": m, "linestyle": "none"} for d, m in MARKERS.items()
    }
    keys["target"] = {"color": "red", "linewidth": 1}
    for d, m in MARKERS.items():
        metric_ax.plot([], [], marker=m, linestyle="none", label=FATE[d])
    title = (
        f"Time-to-target search: {record.model or ''} on {record.dataset or ''}, "
        f"{metric} {'' if record.target is None else record.target}"
    )
    save(fig, plots_dir, file, title, keys=keys)
    rungs = ", ".join(number(x) for x in record.rungs_s)
    caption = (
        "Left: each run that reached the target, at the wall second it ended, by the training "
        "seconds it took (seed re-runs as diamonds); the black step line is the least known so "
        "far; the dashed line and band are the answer's median and range over its seeds. Right: "
        f"each run's best held-out {metric} at the second it ended (a line back to its start), "
        f"coloured by its rung (training-time limits {rungs or 'not recorded'} s), marked by "
        "its fate; the red line is the target."
    )
    return Chart(file, f"Time-to-target search of {name}", caption)


def _time_panel(
    ax: Axes, record: TargetRecord, done: list[TargetRun], names: dict, colors: dict
) -> None:
    xs: list[float] = []
    ys: list[float] = []
    best: float | None = None
    for r in done:
        if r.decision == "reached" and r.time_to_target_s is not None:
            best = r.time_to_target_s if best is None else min(best, r.time_to_target_s)
        if best is not None and r.t_end_s is not None:
            xs.append(r.t_end_s)
            ys.append(best)
    if not xs:
        empty_panel(ax, "no run reached the target")
        return
    ax.step(xs, ys, where="post", color="black", linewidth=1.6, label="least time to target so far")
    for r in done:
        if r.time_to_target_s is not None and r.t_end_s is not None and r.decision in MARKERS:
            color = colors[names[r.rung]]
            mark(ax, None, r.t_end_s, r.time_to_target_s, color, MARKERS[r.decision])
    spread = (record.answer.time_to_target if record.answer else None) or {}
    median, low, high = (spread.get(k) for k in ("median", "min", "max"))
    if median is not None:
        ax.axhline(
            median,
            color="tab:purple",
            linestyle="--",
            linewidth=1.2,
            label="the answer's median over seeds",
        )
        if low is not None and high is not None:
            ax.axhspan(
                low, high, color="tab:purple", alpha=0.12, label="the answer's range over seeds"
            )
    ax.set_ylim(bottom=0)
    ax.set_ylabel("training seconds to the target")


def _metric_panel(
    ax: Axes, record: TargetRecord, done: list[TargetRun], names: dict, colors: dict
) -> None:
    shown = [r for r in done if r.best_metric is not None]
    if not shown:
        empty_panel(ax, "no run was evaluated")
        return
    for r in shown:
        assert r.best_metric is not None and r.t_end_s is not None  # shown, done: both known
        color = colors[names[r.rung]]
        mark(ax, r.t_start_s, r.t_end_s, r.best_metric, color, MARKERS.get(r.decision, "."))
    if record.target is not None:
        ax.axhline(record.target, color="red", linewidth=1, label="target")
    ax.set_ylabel(f"best {record.metric or 'metric'} reached")


def _seconds(value: float | None) -> tuple[str, float | None]:
    return ("" if value is None else seconds(value), value)


def table(record: TargetRecord) -> str:
    """A row per run, in the order it ran: what it trained, how far, and why it was kept or
    stopped."""
    n_rungs = len(record.rungs_s)
    columns: list[H.Column] = [
        ("config", lambda r: r.label),
        ("rung", lambda r: ("seed re-run" if r.rung >= n_rungs > 0 else f"rung {r.rung}", r.rung)),
        ("seed", lambda r: H.cell(r.seed, "d")),
        ("trained up to", lambda r: _seconds(r.limit_s)),
        (f"best {record.metric or 'metric'}", lambda r: H.cell(r.best_metric, ".3g")),
        ("time to target", lambda r: _seconds(r.time_to_target_s)),
        ("kept or stopped, and why", lambda r: f"{FATE.get(r.decision, r.decision)}: {r.reason}"),
        ("ended at (s)", lambda r: H.cell(r.t_end_s, ",.1f")),
    ]
    return H.columns_table(columns, record.trials, sortable=True)


def section(name: str, record: TargetRecord, plots_dir: Path, file: str) -> str:
    """The target search's part of the section: its words, chart and table."""
    c = chart(name, record, plots_dir, file)
    words = H.bullets(lines(record)) + "\n"
    return f"<h3>{H.e(c.title)}</h3>\n" + words + H.figure(c) + table(record)
