"""The report's "search" section: how a `tune` run got to its answer, from its tune.json (the
speed search: how it ended and why, its coverage, where its time went, the answer as the verdict
names it, the rounds, each trial's fate) and tune_target.json (report.search_target)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpubench.report import html as H
from gpubench.report import search_speed_chart as chart
from gpubench.report import search_target
from gpubench.report.figure import Chart, save
from gpubench.report.runs import Run
from gpubench.report.search_speed_chart import (
    budget_s,
    decided,
    in_order,
    label,
    seconds,
    start_s,
    time_spent,
)
from gpubench.science.verdict import ModelVerdict
from gpubench.store import target_record, tune_record, wording
from gpubench.store.tune_record import RoundRecord, TrialRecord, TuneRecord
from gpubench.store.typed_json import RecordError


def section(runs: Sequence[Run], plots_dir: Path, verdicts: Sequence[ModelVerdict] = ()) -> str:
    """The search section of the runs that hold a search's file ('' where none does); its
    charts are plots/search*.png (an old one not drawn again is removed). With a single run the
    speed search names its answer as `verdicts` (the Verdict section's) do."""
    for old in plots_dir.glob("search*.png"):
        old.unlink()
    found = list(verdicts) if len(runs) == 1 else []  # several runs' verdicts span them all
    parts: list[str] = []
    for i, r in enumerate(runs):
        suffix = "" if len(runs) == 1 else f"_{i + 1}"
        if (r.path / tune_record.FILE).is_file():
            try:
                speed = tune_record.read(r.path)
            except RecordError as e:
                parts.append(H.note(f"Run {r.name}: {tune_record.FILE} cannot be read ({e})."))
            else:
                parts.append(speed_section(r.name, speed, plots_dir, f"search{suffix}.png", found))
        if (r.path / target_record.FILE).is_file():
            try:
                target = target_record.read(r.path)
            except RecordError as e:
                parts.append(H.note(f"Run {r.name}: {target_record.FILE} cannot be read ({e})."))
            else:
                file = f"search_target{suffix}.png"
                parts.append(search_target.section(r.name, target, plots_dir, file))
    return "<h2>Search</h2>\n" + "\n".join(parts) if parts else ""


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
    share = f" ({measured / size:.0%})" if isinstance(size, int) and size > 0 else ""
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


def _limit(budget_s: float | None) -> str:
    return "fixed steps" if budget_s is None else seconds(budget_s)


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
    fig = chart.figure(s, f"run {name}")
    save(fig, plots_dir, file, title, keys=chart.keys())
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
        f"<h3>{H.e(c.title)}</h3>\n"
        + H.bullets(words)
        + H.figure(c)
        + "<h4>Rounds</h4>\n"
        + rounds_table(s)
        + "<h4>Trials: what was measured, and what was pruned when</h4>\n"
        + trials_table(s)
    )
