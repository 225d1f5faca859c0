"""The report's "search" section: how a `tune` run got to its answer. From a run folder's
tune.json (the speed search): the best samples/s so far against the search's wall time (a step
line), every trial as a point coloured by its round, and a table of what was pruned when; from
tune_target.json (the time-to-target search): the best time to target so far and each run's
best held-out metric against wall time, and the table of kept and stopped runs. Drawn only for
runs that hold one of those files; keys a reader does not know are ignored."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from gpubench.report import html as H
from gpubench.report.figure import Chart, empty_panel, palette, panels, save
from gpubench.report.runs import Run

SPEED_FILE = "tune.json"
TARGET_FILE = "tune_target.json"
MARKERS = {"kept": "o", "pruned": "x", "error": "X", "confirmed": "*"}
TARGET_MARKERS = {"reached": "*", "kept": "o", "stopped": "x", "seed": "D"}


def section(runs: Sequence[Run], plots_dir: Path) -> str:
    """The search section of the runs that hold a search's file ('' where none does). Charts
    are plots/search*.png; an old one this report does not draw is removed."""
    for old in plots_dir.glob("search*.png"):
        old.unlink()
    parts: list[str] = []
    for i, r in enumerate(runs):
        suffix = "" if len(runs) == 1 else f"_{i + 1}"
        for name, draw in ((SPEED_FILE, _speed), (TARGET_FILE, _target)):
            path = r.path / name
            if not path.is_file():
                continue
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                parts.append(H.note(f"Run {r.name}: {name} cannot be read ({e})."))
                continue
            if not isinstance(record, dict) or not isinstance(record.get("trials"), list):
                parts.append(H.note(f"Run {r.name}: {name} has no list of trials."))
                continue
            parts.append(draw(r.name, record, plots_dir, suffix))
    return "<h2>Search</h2>\n" + "\n".join(parts) if parts else ""


def _num(value: Any) -> float | None:
    """A finite number, or None (a null, a string, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def config_label(config: Any) -> str:
    """A trial's configuration as "key=value" pairs, in the file's order."""
    if not isinstance(config, dict):
        return str(config)
    return " ".join(f"{k}={v}" for k, v in config.items())


def _seconds(value: Any) -> tuple[str, float | None]:
    v = _num(value)
    return ("" if v is None else f"{v:,.3g} s", v)


def _speed(name: str, record: dict[str, Any], plots_dir: Path, suffix: str) -> str:
    """tune.json: best-so-far samples/s against wall time, trials by round, the pruned."""
    trials = [t for t in record["trials"] if isinstance(t, dict)]
    done = sorted(
        (t for t in trials if _num(t.get("t_end_s")) is not None), key=lambda t: t["t_end_s"]
    )
    title = f"Search: {record.get('model', '')} on {record.get('device', '')}"
    fig, axes = panels([f"run {name}"])
    ax = axes[0][0]
    rounds = sorted({int(t.get("round") or 0) for t in done})
    colors = palette(f"round {k}" for k in rounds)
    for k in rounds:  # a legend entry per round, in its colour; markers are keyed in grey
        ax.plot([], [], "s", color=colors[f"round {k}"], label=f"round {k}")
        for status, marker in MARKERS.items():
            pts = [
                (t["t_end_s"], _num(t.get("samples_per_s")))
                for t in done
                if int(t.get("round") or 0) == k and t.get("status") == status
            ]
            pts = [(x, y) for x, y in pts if y is not None]
            if pts:
                ax.scatter(
                    *zip(*pts, strict=True),
                    marker=marker,
                    color=colors[f"round {k}"],
                    label="_trial",
                    s=40,
                    zorder=3,
                )
    xs, ys = _best_so_far(done)
    if xs:
        ax.step(xs, ys, where="post", color="black", linewidth=1.5, label="best so far")
        _finish(ax, "samples/s (higher is better)")
    else:
        empty_panel(ax, "no trial measured a throughput")
    file = f"search{suffix}.png"
    keys = {
        f"marker: {status}": {"marker": m, "linestyle": "none"} for status, m in MARKERS.items()
    }
    for status, m in MARKERS.items():  # one grey legend entry per marker
        ax.plot([], [], marker=m, linestyle="none", label=f"marker: {status}")
    save(fig, plots_dir, file, title, keys=keys)
    covered = record.get("covered") or {}
    caption = (
        f"Each point is a trial at the wall time it ended, coloured by its round, its marker "
        f"its fate; the black step line is the best samples/s measured so far. Budget "
        f"{_seconds(record.get('budget_s'))[0] or 'not recorded'}, search "
        f"{_seconds(record.get('elapsed_s'))[0] or 'not recorded'}; "
        f"{covered.get('measured', '?')} of {covered.get('space_size', '?')} configurations "
        "measured."
    )
    chart = Chart(file, f"Search of {name}", caption)
    rows = [
        [
            config_label(t.get("config")),
            (str(t.get("round", "")), _num(t.get("round"))),
            (H.number(t.get("samples_per_s"), ",.1f"), _num(t.get("samples_per_s"))),
            str(t.get("status", "")),
            _seconds(t.get("t_end_s")) if t.get("status") == "pruned" else ("", None),
        ]
        for t in trials
    ]
    table = H.table(["trial config", "round", "samples/s", "status", "pruned at"], rows, True)
    return H.figure(chart) + _answer(record) + table


def _best_so_far(done: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """The best samples/s known at each trial's end: the file's best_so_far where given, else
    the running maximum of the trials' samples/s."""
    xs: list[float] = []
    ys: list[float] = []
    best: float | None = None
    for t in done:
        given = _num(t.get("best_so_far"))
        value = _num(t.get("samples_per_s"))
        if given is not None:
            best = given
        elif value is not None and (best is None or value > best):
            best = value
        if best is not None:
            xs.append(float(t["t_end_s"]))
            ys.append(best)
    return xs, ys


def _finish(ax: Axes, ylabel: str) -> None:
    ax.set_xlabel("search wall time (s)")
    ax.set_ylabel(ylabel)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)


def _answer(record: dict[str, Any]) -> str:
    answer = record.get("answer")
    if not isinstance(answer, dict) or not answer:
        return H.note("The search named no answer.")
    text = answer.get("describe") or answer.get("label") or config_label(answer.get("config"))
    return f'<p class="caption">Answer: {H.e(text)}</p>\n'


def _target(name: str, record: dict[str, Any], plots_dir: Path, suffix: str) -> str:
    """tune_target.json: best time to target so far and each run's best metric against wall
    time, and the table of runs with their fate."""
    trials = [t for t in record["trials"] if isinstance(t, dict)]
    done = sorted(
        (t for t in trials if _num(t.get("t_end_s")) is not None), key=lambda t: t["t_end_s"]
    )
    metric = str(record.get("metric", "metric"))
    fig, axes = panels(["best time to target so far", f"each run's best {metric}"])
    best_ax, metric_ax = axes[0][0], axes[1][0]
    xs: list[float] = []
    ys: list[float] = []
    best: float | None = None
    for t in done:
        reached = _num(t.get("time_to_target_s"))
        if t.get("decision") == "reached" and reached is not None:
            best = reached if best is None else min(best, reached)
        if best is not None:
            xs.append(float(t["t_end_s"]))
            ys.append(best)
    if xs:
        best_ax.step(xs, ys, where="post", color="black", linewidth=1.5, label="best so far")
        best_ax.plot(xs[:1], ys[:1], "o", color="black", label="_first")
        _finish(best_ax, "training seconds to the target")
        best_ax.set_ylim(bottom=0)
    else:
        empty_panel(best_ax, "no run reached the target")
    rungs = sorted({int(t.get("rung") or 0) for t in done})
    n_rungs = len(record.get("rungs_s") or [])
    names = {k: "seed re-runs" if k >= n_rungs > 0 else f"rung {k}" for k in rungs}
    colors = palette(names.values())
    for k in rungs:
        metric_ax.plot([], [], "s", color=colors[names[k]], label=names[k])
        for decision, marker in TARGET_MARKERS.items():
            pts = [
                (t["t_end_s"], _num(t.get("best_metric")))
                for t in done
                if int(t.get("rung") or 0) == k and t.get("decision") == decision
            ]
            pts = [(x, y) for x, y in pts if y is not None]
            if pts:
                metric_ax.scatter(
                    *zip(*pts, strict=True),
                    marker=marker,
                    color=colors[names[k]],
                    label="_run",
                    s=40,
                    zorder=3,
                )
    target = _num(record.get("target"))
    if target is not None:
        metric_ax.axhline(target, color="red", linewidth=1, label="target")
    if any(_num(t.get("best_metric")) is not None for t in done):
        _finish(metric_ax, f"best {metric} reached")
    else:
        empty_panel(metric_ax, "no run was evaluated")
    keys = {f"marker: {d}": {"marker": m, "linestyle": "none"} for d, m in TARGET_MARKERS.items()}
    keys["target"] = {"color": "red", "linewidth": 1}
    for d, m in TARGET_MARKERS.items():
        metric_ax.plot([], [], marker=m, linestyle="none", label=f"marker: {d}")
    file = f"search_target{suffix}.png"
    title = (
        f"Time-to-target search: {record.get('model', '')} on {record.get('dataset', '')}, "
        f"{metric} {record.get('target', '')}"
    )
    save(fig, plots_dir, file, title, keys=keys)
    covered = record.get("covered") or {}
    rungs_s = ", ".join(f"{x:.3g}" for x in record.get("rungs_s") or [] if _num(x) is not None)
    caption = (
        f"Left: the least training time to the target known at each point of the search's wall "
        f"time. Right: each run's best held-out {metric} at the wall time it ended, coloured by "
        f"its rung (training-time limits {rungs_s or 'not recorded'} s), its marker its fate. "
        f"Budget {_seconds(record.get('budget_s'))[0] or 'not recorded'}, search "
        f"{_seconds(record.get('elapsed_s'))[0] or 'not recorded'}; "
        f"{covered.get('measured', '?')} of {covered.get('space_size', '?')} configurations "
        "measured."
    )
    chart = Chart(file, f"Search of {name}", caption)
    rows = [
        [
            str(t.get("label") or config_label(t.get("config"))),
            (names.get(int(t.get("rung") or 0), str(t.get("rung", ""))), _num(t.get("rung"))),
            (str(t.get("seed", "")), _num(t.get("seed"))),
            _seconds(t.get("limit_s")),
            (H.number(t.get("best_metric"), ".3g"), _num(t.get("best_metric"))),
            _seconds(t.get("time_to_target_s")),
            f"{t.get('decision', '')}: {t.get('reason', '')}",
            _seconds(t.get("t_end_s")),
        ]
        for t in trials
    ]
    headers = ["config", "rung", "seed", "trained up to", f"best {metric}", "time to target"]
    table = H.table([*headers, "kept or stopped", "at (search wall time)"], rows, True)
    return H.figure(chart) + _answer(record) + table
