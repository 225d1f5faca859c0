"""The speed search's record as the report reads it (tune.json: gpubench.store.tune_record; the
seconds and times are worded alike for tune_target.json: report.search_target), and its chart:
each trial's samples/s against the tune's wall time (its caption in report.search_speed says how
to read it)."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure as MplFigure

from gpubench.config import labels
from gpubench.report.analysis import real
from gpubench.report.figure import empty_panel, palette, panels
from gpubench.store import wording
from gpubench.store.tune_record import RoundRecord, TrialRecord, TuneRecord


def seconds(value: float | None) -> str:
    """'0.373 s', '12.3 s', '225 s', '1,234 s' (wording.number); 'not recorded' for None."""
    return "not recorded" if value is None else f"{wording.number(value)} s"


def time_spent(elapsed: float | None, budget: float | None) -> str:
    """'Time: 30 s in all against a budget of 40 s (10 s to spare)', as far as recorded."""
    text = f"Time: {seconds(elapsed)} in all"
    if budget is not None:
        text += f" against a budget of {seconds(budget)}"
        if elapsed is not None:
            spare = "over" if elapsed > budget else "to spare"
            text += f" ({seconds(abs(elapsed - budget))} {spare})"
    return text


def budget_s(s: TuneRecord) -> float | None:
    """The wall-clock budget the tune was given (None: none, or not a finite number)."""
    b = s.request.get("budget_s")  # the request is a plain dict
    return float(b) if real(b) else None


def in_order(s: TuneRecord) -> list[TrialRecord]:
    """The trials in the order they ended."""
    return sorted(s.trials, key=lambda t: (t.elapsed_s, t.number))


def start_s(t: TrialRecord) -> float | None:
    """The wall second a trial started at (its end less its whole cost), or None."""
    return None if t.point_time_s is None else max(0.0, t.elapsed_s - t.point_time_s)


def decided(r: RoundRecord) -> bool:
    """Whether a round's survivors were chosen: it measured something and left nothing open."""
    return bool(r.measured) and r.open == 0 and r.ended_at_s is not None


def varying(s: TuneRecord) -> list[str]:
    """The config keys worth printing: those whose values differ between trials (the one
    labeler's `varying`), and the batch size."""
    keys = list(dict.fromkeys(k for t in s.trials for k in t.config))
    among = labels.varying([t.config for t in s.trials], keys)
    # the batch always: with a fixed effective batch it names what the micro-batches add to
    return [k for k in keys if k in among or k == "batch_size"] or keys


def label(s: TuneRecord, config: Any) -> str:
    """A configuration as 'key=value' pairs of the keys that vary, in the file's order."""
    if not isinstance(config, dict):
        return str(config)
    shown = varying(s)
    return " ".join(f"{k}={v}" for k, v in config.items() if k in shown) or "(one setting)"


def best_so_far(trials: list[TrialRecord]) -> list[float | None]:
    """Per trial (in the order given), the best samples/s measured up to and including it: the
    file's figure where it gives one, else the running maximum of the trials' own."""
    out: list[float | None] = []
    best: float | None = None
    for t in trials:
        if t.best_so_far_samples_per_s is not None:
            best = t.best_so_far_samples_per_s
        elif t.samples_per_s is not None and (best is None or t.samples_per_s > best):
            best = t.samples_per_s
        out.append(best)
    return out


# A trial's fate as a marker: keyed once in grey in the legend (figure.save's keys).
FATES: dict[str, tuple[str, dict[str, Any]]] = {
    "kept": ("kept for the next round", {"marker": "o"}),
    "pruned": ("pruned", {"marker": "x"}),
    "final": ("measured in the last round", {"marker": "*", "markersize": 10}),
    "open": ("round never decided", {"marker": "o", "markerfacecolor": "none"}),
    "failed": ("failed: no figure (drawn at 0)", {"marker": "v"}),
    "cut": ("cut by the deadline", {"marker": "D", "markersize": 5}),
}
DECIDED = "round decided"
BUDGET = "budget"
WIDTH_IN, HEIGHT_IN = 12.0, 4.6
FAR = 1.5  # a budget beyond 1.5x the search's end is named at the edge, not drawn to scale
LABEL_GAP = 0.025  # of the view's width: closer round decisions share one label
# A label that reads upwards against a vertical line (a round's decision, the budget)
UPRIGHT = {"rotation": 90, "ha": "right", "va": "top", "fontsize": 8, "color": "dimgrey"}


def keys() -> dict[str, dict[str, Any]]:
    """The legend's grey entries: one per fate marker, and the round-decision line."""
    out = {label: {"linestyle": "none", **style} for label, style in FATES.values()}
    out[DECIDED] = {"linestyle": ":", "linewidth": 1}
    return out


def figure(s: TuneRecord, title: str) -> MplFigure:
    """The chart of search `s` (unsaved: figure.save gives it its title and legend)."""
    fig, axes = panels([title])
    fig.set_size_inches(WIDTH_IN, HEIGHT_IN)
    ax = axes[0][0]
    placed = in_order(s)
    if not any(t.samples_per_s is not None for t in placed):
        empty_panel(ax, "no trial measured a throughput")
        return fig
    numbers = sorted({t.round for t in placed} | {r.round for r in s.rounds})
    colors = palette(f"round {k}" for k in numbers)
    top = max(t.samples_per_s or 0.0 for t in placed)
    reached = {t.round for t in placed}
    for k in numbers:
        name = f"round {k}" + ("" if k in reached else " (not reached)")
        ax.plot([], [], "s", color=colors[f"round {k}"], label=name)
    for t in placed:
        color = colors[f"round {t.round}"]
        y = 0.0 if t.samples_per_s is None else t.samples_per_s
        label, style = FATES[t.outcome]
        face, size = style.get("markerfacecolor", color), 9 if style["marker"] == "*" else 6
        mark(ax, start_s(t), t.elapsed_s, y, color, style["marker"], label, face=face, size=size)
    best = best_so_far(placed)
    xs = [t.elapsed_s for t, b in zip(placed, best, strict=True) if b is not None]
    ys = [b for b in best if b is not None]
    ax.step(xs, ys, where="post", color="black", linewidth=1.6, label="best samples/s so far")
    end = max(s.elapsed_s, placed[-1].elapsed_s)
    budget = budget_s(s)
    if budget is not None and budget <= FAR * end:  # else the search would be a sliver
        end = max(end, budget)
    ax.set_xlim(0, end * 1.02)
    _phases(ax, s, end)
    failed = any(t.samples_per_s is None for t in placed)
    ax.set_ylim(-0.03 * top if failed else 0, top * 1.12)  # a failed trial's marker sits at 0
    ax.set_xlabel("wall time since the tune started (s)")
    ax.set_ylabel("samples/s (higher is better)")
    ax.grid(True, alpha=0.3)
    return fig


def mark(
    ax: Any,
    start: float | None,
    end: float,
    y: float,
    color: Any,
    marker: str,
    label: str = "_run",
    face: Any = None,
    size: float = 6,
) -> None:
    """A trial or run as a marker at the wall second `end` it ended, with a line back to its
    `start` where known (its whole cost); gid 'trial'."""
    if start is not None:
        ax.hlines(y, start, end, color=color, linewidth=1.5, alpha=0.45)
    face = color if face is None else face
    style = {"marker": marker, "markerfacecolor": face, "markersize": size, "gid": "trial"}
    ax.plot([end], [y], linestyle="none", color=color, label=label, zorder=3, **style)


def _phases(ax: Any, s: TuneRecord, end: float) -> None:
    """Round decisions, the set-up and after-the-last-trial spans, and the budget (named at the
    right edge where it lies far beyond the view's `end`)."""
    placed = in_order(s)
    labelled: float | None = None
    for r in s.rounds:
        if decided(r) and r.ended_at_s is not None:
            ax.axvline(r.ended_at_s, color="grey", linestyle=":", linewidth=1, label=DECIDED)
            if labelled is not None and r.ended_at_s - labelled < LABEL_GAP * end:
                continue  # its label would print over the last one's
            labelled = r.ended_at_s
            at = ax.get_xaxis_transform()  # x in data, y in the axes' height
            ax.text(r.ended_at_s, 0.98, f" round {r.round} decided", transform=at, **UPRIGHT)
    first = start_s(placed[0])
    if first is not None and first > 0:
        ax.axvspan(0, first, color="0.88", zorder=0, label="set-up before the first trial")
    last = placed[-1].elapsed_s
    if s.elapsed_s > last:
        ax.axvspan(last, s.elapsed_s, color="#dbe8f7", zorder=0, label="after the last trial")
    budget = budget_s(s)
    if budget is not None and budget <= end:
        ax.axvline(budget, color="red", linestyle="--", linewidth=1.2, label=BUDGET)
    elif budget is not None:
        text = f"budget {budget:,.0f} s, beyond this edge"
        ax.text(
            0.995, 0.5, text, transform=ax.transAxes, **{**UPRIGHT, "va": "center", "color": "red"}
        )
