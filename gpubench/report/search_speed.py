"""The report's speed search (tune.json: gpubench.store.tune_record) in its "search" section: how
a `tune` run got to its answer: how it ended and why, its coverage, where its time went, the
answer as the verdict names it, the rounds, each trial's fate, and its chart (each trial's
samples/s against the tune's wall time). Its seconds and times are worded alike for the
time-to-target search (report.search_target)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as MplFigure

from gpubench.config import labels
from gpubench.report import html as H
from gpubench.report.analysis import real
from gpubench.report.figure import Chart, empty_panel, palette, panels, save
from gpubench.science.verdict import ModelVerdict
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
    """A trial's configuration in the labeler's words, naming the keys that vary."""
    if not isinstance(config, dict):
        return str(config)
    return labels.settings({k: v for k, v in config.items() if k in varying(s)})


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


def outcome(s: TuneRecord) -> str:
    """Finished, stopped early and why, or neither said."""
    of = f"{s.rounds_decided} of {len(s.rounds)} rounds decided" if s.rounds else ""
    if s.finished:
        return f"Finished: the search ran all its rounds ({of or 'count not recorded'})."
    if s.stopped:
        return f"Stopped early: {s.stopped}" + (f"; {of}." if of else ".")
    return (
        "Not finished, and no reason recorded: the file was written while the search ran, or "
        "the search was cut off" + (f"; {of}." if of else ".")
    )


def coverage(s: TuneRecord) -> str:
    """Configurations measured of the space's, and setting combinations of the space's, as the
    file records them (else counted from the trials)."""
    c = s.coverage
    measured = c.get("configurations_measured")
    if not isinstance(measured, int):
        measured = len({repr(sorted(t.config.items())) for t in s.trials})
        counted = " (counted from the trials)"
    else:
        counted = ""
    size = c.get("space_size")
    share = f" ({wording.percent(measured / size)})" if isinstance(size, int) and size > 0 else ""
    combos, of_combos = c.get("combos_measured"), c.get("combos")
    text = f"Coverage: {measured} of {size if isinstance(size, int) else '?'} configurations"
    text += f" measured{share}{counted}"
    if isinstance(combos, int):
        text += f"; {combos} of {of_combos if isinstance(of_combos, int) else '?'} setting "
        text += "combinations measured at some batch size"
    return text + "."


def timing(s: TuneRecord) -> str:
    """The tune's wall time against its budget, and where it went: set-up before the first
    trial, the trials (compile's share), the gaps between them, what came after the last."""
    total = s.elapsed_s
    head = time_spent(total, budget_s(s))
    placed = in_order(s)
    starts = [x for x in map(start_s, placed) if x is not None]
    if not placed or not starts:
        return head + "."
    took = [t.point_time_s for t in placed if t.point_time_s is not None]
    compiled = sum(t.compile_time_s or 0.0 for t in placed)
    first, last = starts[0], placed[-1].elapsed_s
    parts = [f"{seconds(first)} of set-up before the first trial (start-up, max-batch search)"]
    trials = f"{len(placed)} trials took {seconds(sum(took))}"
    if compiled > 0:
        trials += f" (compiling {seconds(compiled)} of it)"
    parts.append(trials)
    between = last - first - sum(took)
    if between > 0:
        parts.append(f"{seconds(between)} between them")
    if total >= last:
        status = (s.verdict or {}).get("confirmation_status")
        what = "the confirmation" + (f", {status}" if status and status != "confirmed" else "")
        parts.append(f"{seconds(total - last)} after the last trial ({what})")
    return f"{head}: " + ", ".join(parts) + "."


def rounds_best(s: TuneRecord) -> str | None:
    """The rounds' highest single figure, which is not the answer (one measurement each)."""
    best = s.best
    if not best or best.get("samples_per_s") is None:
        return None
    at = f", round {best['round']}" if best.get("round") is not None else ""
    return (
        f"Rounds' best: {wording.cell(best.get('samples_per_s'), ',.0f')} samples/s, "
        f"{label(s, best.get('config'))}{at}: a single measurement, not the answer (the "
        "confirmation re-measures the leaders side by side)."
    )


def matching(s: TuneRecord, found: list[ModelVerdict]) -> ModelVerdict | None:
    """The one verdict of the report's whose partition is this search's (model, size,
    optimizer), or None where none or several are."""
    request = s.request
    want = {"model": request.get("model"), "model_size": request.get("size")}
    if request.get("optimizer"):
        want["optimizer"] = request.get("optimizer")
    hits = [v for v in found if all(v.identity.get(k) == w for k, w in want.items())]
    return hits[0] if len(hits) == 1 else None


def answer(s: TuneRecord, verdict: ModelVerdict | None) -> str:
    """The answer where it is recorded, never at odds with the report's verdict: the verdict's
    own headline where the report has one for this search; else the tune's record of its
    confirmation's verdict; else that none was named."""
    if verdict is not None:
        return f"Answer, as the verdict above names it: {verdict.headline()}."
    v = s.verdict
    if v and (v.get("headline") or v.get("leader")):
        how = f" ({v['confirmation_status']})" if v.get("confirmation_status") else ""
        named = v.get("headline") or v["leader"]
        return f"Answer, as this tune's confirmation named it{how}: {named}."
    return "The search named no answer: no confirmation is recorded."


def _round_state(r: RoundRecord) -> str:
    if not r.measured:
        return "not reached"
    if decided(r):
        return f"decided at {seconds(r.ended_at_s)}"
    return "not decided: the search stopped"


def _limit(limit_s: float | None) -> str:
    return "fixed steps" if limit_s is None else seconds(limit_s)


def rounds_table(s: TuneRecord) -> str:
    """A row per round: its measuring limit, what it measured, what became of it, and when."""
    counts = ("measured", "kept", "pruned", "failed", "final", "open")
    columns: list[H.Column] = [
        ("round", lambda r: H.cell(r.round, "d")),
        ("measuring limit per trial", lambda r: (_limit(r.budget_s), r.budget_s)),
        *((n, lambda r, n=n: H.cell(getattr(r, n), "d")) for n in counts),
        ("state", _round_state),
    ]
    return H.columns_table(columns, s.rounds)


def _fate(t: TrialRecord, rounds: dict[int, RoundRecord]) -> str:
    r = rounds.get(t.round)
    if t.outcome == "pruned":
        when = f" at {seconds(r.ended_at_s)}" if r and r.ended_at_s is not None else ""
        return f"pruned when round {t.round} was decided{when}"
    if t.outcome == "kept":
        return f"kept for round {t.round + 1}"
    if t.outcome == "final":
        return "measured in the last round"
    if t.outcome == "failed":
        return f"failed ({t.status}): no figure"
    if t.outcome == "open":
        return f"open: round {t.round} was never decided"
    return t.outcome or t.status


def trials_table(s: TuneRecord) -> str:
    """A row per trial, by the order it ran: what it measured, its fate, when and at what cost."""
    rounds = {r.round: r for r in s.rounds}
    columns: list[H.Column] = [
        ("trial", lambda t: H.cell(t.number, "d")),
        ("round", lambda t: H.cell(t.round, "d")),
        ("configuration", lambda t: label(s, t.config)),
        ("samples/s", lambda t: H.cell(t.samples_per_s, ",.1f")),
        ("fate", lambda t: _fate(t, rounds)),
        ("ended at (s)", lambda t: H.cell(t.elapsed_s, ",.1f")),
        ("took (s)", lambda t: H.cell(t.point_time_s, ",.1f")),
        ("compiling (s)", lambda t: H.cell(t.compile_time_s, ",.1f")),
    ]
    return H.columns_table(columns, sorted(s.trials, key=lambda t: t.number), sortable=True)


def speed_section(
    name: str, s: TuneRecord, plots_dir: Path, file: str, found: list[ModelVerdict]
) -> str:
    """The speed search's part of the section: its words, chart, rounds and trials. `found`
    are the report's verdicts where they belong to this run alone ([] otherwise)."""
    words = [outcome(s), coverage(s), timing(s), rounds_best(s), answer(s, matching(s, found))]
    model = "/".join(str(s.request[k]) for k in ("model", "size") if s.request.get(k))
    title = f"Search: {model or 'model not recorded'} on {s.request.get('device') or '?'}"
    fig = figure(s, f"run {name}")
    save(fig, plots_dir, file, title, keys=keys())
    caption = (
        "Each point is a trial at the wall second it ended, its line back to when it started "
        "(its whole cost: building, warm-up, compile, measuring), coloured by its round and "
        "marked by its fate; the black step line is the best samples/s measured so far; dotted "
        "lines are the rounds' decisions; grey shading is the set-up before the first trial "
        "(start-up and the max-batch search), blue what came after the last (the "
        "confirmation); the dashed red line is the budget (named at the edge where it lies far "
        "beyond the search)."
    )
    c = Chart(file, f"Speed search of {name}", caption)
    return (
        f"<h3>{H.e(c.title)}</h3>\n{H.bullets(words)}\n"
        + H.figure(c)
        + "<h4>Rounds</h4>\n"
        + rounds_table(s)
        + "<h4>Trials: what was measured, and what was pruned when</h4>\n"
        + trials_table(s)
    )


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
        text = f"budget {seconds(budget)}, beyond this edge"
        ax.text(
            0.995, 0.5, text, transform=ax.transAxes, **{**UPRIGHT, "va": "center", "color": "red"}
        )
