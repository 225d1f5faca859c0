"""The levers for a bottleneck, each with its measured effect where the sweep measured it (the
fastest point's samples/s against the same point with that one setting changed), and the next
experiment worth running: never one the run already did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpubench.config import needs, registry
from gpubench.config.keys import Key, identity, same_key, series_key
from gpubench.config.registry import Setting, lever_name
from gpubench.config.spec import Point
from gpubench.science import growth, plan
from gpubench.science.input_bound import workers_lever
from gpubench.science.leaders import MARGIN, Comparison
from gpubench.science.partition import label, norm, series
from gpubench.science.plan import Unreached
from gpubench.store.growth_record import Stop
from gpubench.store.wording import percent, seconds, span, times


@dataclass(frozen=True)
class Effect:
    """One lever's standing at the fastest point: its line, whether it helps by more than the
    margin (or was not measured: then `todo` says how to measure it)."""

    line: str
    helps: bool
    todo: str | None = None


def levers(
    kind: str,
    best: dict[str, Any],
    records: list[dict[str, Any]],
    all_rows: list[dict[str, Any]],
    among: list[str],
    margin: float = MARGIN,
    command: str = "sweep",
    paired: dict[tuple[Any, ...], Comparison] | None = None,
    tied: frozenset[tuple[Any, ...]] = frozenset(),
    unreached: Sequence[Unreached] = (),
    stops: Mapping[Key | str, Stop] | None = None,
) -> tuple[list[str], str | None]:
    """The levers for `kind`: each measured one that helps by more than `margin` (its
    samples/s with it over without, naming the row it is measured against) and each one not
    measured; and the first unmeasured one as the next experiment (a larger batch when the
    fastest is the largest batch measured), as a flag of `command` ("sweep" or "tune").
    `paired`: the interleaved rounds' comparisons of `best` with the rows they measured (by
    identity): where a lever's two rows are among them, its effect is the rounds' ratio.
    `tied`: the identities of the rows the verdict could not tell from `best` by the rows'
    own intervals: a lever measured against one of them is within noise, never a figure.
    `unreached`: the partition's points planned and not measured (science.plan): a lever or
    larger batch among them is said to be planned, not measured, and why.
    `stops`: why each grown series stopped, by its series' key, or its label in an old
    growth.json (GrowthRecord.by_series; {}: none grew; None: not known, read from the rows by
    the growth rule).
    A setting measured slower, or within the margin, is no lever: see no_help()."""
    effects = _effects(kind, best, records, among, margin, paired, tied, unreached)
    found = [e for e in effects if e.helps]
    lines, todo = [e.line for e in found], [e.todo for e in found if e.todo]
    if kind == "input":  # issue 31: the loader's workers, against the fewest measured
        more, todo_more = workers_lever(best, records, margin, tied)
        lines += more
        todo[:0] = [todo_more] if todo_more else []
    line, todo_first = _larger_batch(
        best, records, all_rows, command, unreached, stops, paired, margin
    )
    if kind in ("launch", "memory", "mixed"):  # a larger batch cures overhead, memory traffic
        lines.append(line)
        todo[:0] = [todo_first] if todo_first else []
    elif todo_first and len(series(best, records)) >= 2:
        # under any label, a fastest that is the largest of its measured batches and still
        # rising leaves "which batch" open: said, and measured after the label's own levers
        lines.append(line)
        todo.append(todo_first)
    return lines, (todo[0] if todo else None)


def no_help(
    kind: str,
    best: dict[str, Any],
    records: list[dict[str, Any]],
    among: list[str],
    margin: float = MARGIN,
    paired: dict[tuple[Any, ...], Comparison] | None = None,
    tied: frozenset[tuple[Any, ...]] = frozenset(),
    unreached: Sequence[Unreached] = (),
) -> list[str]:
    """The settings of `kind`'s levers that were measured and do not help here: slower, within
    `margin` of the fastest point, or within noise of it (a row in `tied`); and those left out
    of `unreached` as emulated on this device (slow here, not measured)."""
    effects = _effects(kind, best, records, among, margin, paired, tied, unreached)
    return [e.line for e in effects if not e.helps]


def _effects(
    kind: str,
    best: dict[str, Any],
    records: list[dict[str, Any]],
    among: list[str],
    margin: float,
    paired: dict[tuple[Any, ...], Comparison] | None,
    tied: frozenset[tuple[Any, ...]],
    unreached: Sequence[Unreached] = (),
) -> list[Effect]:
    out = []
    for setting in registry.levers(kind):
        fld, on, name, flag = setting.name, setting.on, lever_name(setting), setting.lever_flag()
        if not _applies(setting, best):
            continue
        # The same point but this setting; failing that, the best at any batch size.
        same = [
            r
            for r in records
            if same_key(r, fld) == same_key(best, fld) and identity(r) != identity(best)
        ]
        anyb = [
            r
            for r in records
            if same_key(r, fld, "batch_size") == same_key(best, fld, "batch_size")
        ]
        where = "at the same batch" if same else "best of each over the batch sizes"
        if setting.is_on(best):
            off = [r for r in same or anyb if not setting.is_on(r)]
            # a lower precision is one against fp32 where fp32 was measured (bf16 over fp16 is
            # no lower precision); else against the best without it, named
            full = [r for r in off if fld == "precision" and r.get("precision") == "fp32"]
            off = full or off
            if not off:
                planned = _planned(setting, best, unreached, on=False)
                out.append(planned or Effect(f"{name}: in use; not measured without it", True))
                continue
            other = max(off, key=lambda r: float(r["samples_per_s"]))
            rounds = (paired or {}).get(identity(other))
            if rounds is not None:  # measured in the same minutes: the rounds' ratio
                text = (
                    f"{name}: in use, {times(rounds.ratio)} the samples/s of "
                    f"{label(other, among)} without it in the interleaved rounds (95% CI "
                    f"{span(rounds.low, rounds.high)})"
                )
                out.append(Effect(text, True) if rounds.holds(margin) else _unshown(text, margin))
                continue
            ratio = float(best["samples_per_s"]) / float(other["samples_per_s"])
            text = (
                f"{name}: in use, {times(ratio)} the samples/s of {label(other, among)} "
                f"without it ({where})"
            )
            out.append(_judged(text, ratio, margin, identity(other) in tied))
        else:
            with_it = [r for r in same or anyb if setting.is_on(r)]
            if not with_it:
                if fld == "precision":  # beside the fastest's own precision
                    flag = f"--precisions {best.get('precision')},{on}"
                todo = f"measure {name}: {flag}"
                planned = _planned(setting, best, unreached, on=True, todo=todo)
                out.append(planned or Effect(f"{name}: not measured", True, todo))
                continue
            top = max(with_it, key=lambda r: float(r["samples_per_s"]))
            ratio = float(top["samples_per_s"]) / float(best["samples_per_s"])
            text = (
                f"{name}: {times(ratio)} the samples/s of {label(best, among)}, the fastest "
                f"({where}, measured)"
            )
            out.append(_judged(text, ratio, margin, identity(top) in tied))
    return out


def _planned(
    setting: Setting,
    best: dict[str, Any],
    unreached: Sequence[Unreached],
    on: bool,
    todo: str | None = None,
) -> Effect | None:
    """Where the fastest point with `setting` turned `on` (or off) was planned and not
    measured (issue 41: never "not measured" as if it had not been planned): the lever said
    so with why, and its next step (finish the run, else `todo`); None where it was not
    planned."""
    fld = setting.name
    planned = [
        u
        for u in unreached
        if same_key(u.point, fld, "batch_size") == same_key(best, fld, "batch_size")
        and setting.is_on(u.point) == on
    ]
    if not planned:
        return None
    name, why = lever_name(setting), planned[0].why()
    if planned[0].reason == plan.EMULATED:  # left out as slow here: said, not a next step
        return Effect(f"{name}: not measured ({why})", False)
    without = "" if on else " without it"
    return Effect(
        f"{name}: planned{without}, not measured ({why})", True, plan.resume(planned) or todo
    )


def _unshown(text: str, margin: float) -> Effect:
    return Effect(f"{text}: not shown to be more than the {percent(margin)} margin", False)


def _judged(text: str, ratio: float, margin: float, noise: bool = False) -> Effect:
    """A measured lever's effect at `margin`: within noise where its two rows are ones the
    verdict cannot tell apart (`noise`), else a help, no practical difference, or slower."""
    if noise:
        return Effect(f"{text}: within noise, the rows cannot tell the two apart", False)
    if ratio > 1 + margin:
        return Effect(text, True)
    if ratio * (1 + margin) < 1:
        return Effect(f"{text}: slower here", False)
    return Effect(f"{text}: no practical difference at the {percent(margin)} margin", False)


def _larger_batch(
    best: dict[str, Any],
    records: list[dict[str, Any]],
    all_rows: list[dict[str, Any]],
    command: str = "sweep",
    unreached: Sequence[Unreached] = (),
    stops: Mapping[Key | str, Stop] | None = None,
    paired: dict[tuple[Any, ...], Comparison] | None = None,
    margin: float = MARGIN,
) -> tuple[str, str | None]:
    """Whether a larger batch is worth measuring: not where the fastest point's series already
    ran out of memory above it (all_rows holds the failed points too), nor where every row
    trains one effective batch in several ways (the batch is the user's; the micro-batch is the
    lever, weighed under "effective batch"), nor after a tune, which searches up to the largest
    batch that fits unless told otherwise. Larger batches of the series that were planned and
    not measured (`unreached`) are named as such: the fastest is then the fastest measured,
    never "the largest" nor "no faster" than them."""
    batches = {int(r["batch_size"]) for r in all_rows or records}
    ways = {
        (int(norm(r.get("accumulate")) or 1), norm(r.get("checkpoint")))
        for r in all_rows or records
    }
    if len(batches) == 1 and len(ways) > 1:
        return (
            f"a larger batch: not searched, every row trains the effective batch "
            f"B={best['batch_size']} ({len(ways)} ways of reaching it, weighed below)",
            None,
        )
    largest = max(int(r["batch_size"]) for r in series(best, records))
    oom = [
        int(r["batch_size"])
        for r in series(best, all_rows)
        if r.get("status") == "oom" and int(r["batch_size"]) > largest
    ]
    above = plan.larger(best, unreached)
    planned = ""
    if above:
        planned = (
            f"; B={', '.join(str(u.point['batch_size']) for u in above)} planned, not "
            f"measured ({above[0].why()})"
        )
    if int(best["batch_size"]) != largest:
        faster = f"no faster there{planned}" if planned else "no faster"
        return f"a larger batch: measured up to B={largest}, {faster}", None
    if oom:
        return (
            f"a larger batch: B={largest} is the largest that fitted and the fastest; "
            f"B={min(oom)} ran out of memory",
            None,
        )
    # issue 42: the growth rule's own reading of the series (science.growth): a largest batch
    # within the noise of the one below it is where throughput flattened, not a batch to grow
    # from; one still rising says why the series stopped there
    measured = [r for r in series(best, all_rows or records) if r.get("status") == "ok"]
    if above:
        first = int(above[0].point["batch_size"])
        devices = len({str(r["device"]) for r in records}) > 1
        where = f" --devices {best['device']}" if devices else ""
        return (
            f"a larger batch: B={largest} is the fastest measured{planned}",
            plan.resume(above) or f"measure B={first}:{where} --batch-sizes {first}",
        )
    flat = growth.flattened(measured)
    by_rows = max(measured, key=lambda r: float(r["samples_per_s"]), default=best)
    rounds = (paired or {}).get(identity(by_rows))
    if flat is not None and int(by_rows["batch_size"]) == largest:
        return f"a larger batch: throughput flattened ({flat})", None
    if flat is not None and rounds is not None and not growth.overturned(measured, rounds, margin):
        # the largest leads the rows' fastest only by a median within the rounds' noise: the
        # rounds do not overturn the rows' flattening
        return (
            f"a larger batch: throughput flattened ({flat}; re-measured, B={largest} "
            f"{times(rounds.ratio)} (95% CI {span(rounds.low, rounds.high)}) over "
            f"B={int(by_rows['batch_size'])}: {rounds.reading(margin)})",
            None,
        )
    device_type = str(best["device"]).split(":")[0]
    # the rows read a smaller batch the fastest, the re-measurement the largest: what stopped
    # the series was the rows' noise, and larger batches may be faster still
    stopped = (
        f" once re-measured; its row read it no faster than B={int(by_rows['batch_size'])}, "
        "so the series stopped growing there: larger batches not measured"
        if flat is not None
        else _stopped(measured, device_type, best, stops)
    )
    if largest >= growth.CEILING:
        return (
            f"a larger batch: B={largest} is the growth's ceiling and the fastest, "
            "larger batches not measured",
            f"measure larger batches: --batch-sizes {2 * largest},{4 * largest}",
        )
    if command == "tune":
        # issue 42: "tune searches up to the largest that fits" was said of B=4 where max-batch
        # timed B=65,536 at 40 times its samples/s: what tune measured is all this can say
        return (
            f"a larger batch: B={largest} is the largest tune measured and the fastest, "
            "throughput still rising there (not bracketed)",
            f"measure larger batches: --batch-sizes {largest},{2 * largest},{4 * largest}",
        )
    if len({str(r["device"]) for r in records}) > 1:
        # the answer is one device's: measure that device's larger batches, not every device's
        device = str(best["device"])
        return (
            f"a larger batch: B={largest} is the largest measured on {device} and the "
            f"fastest{stopped}",
            f"measure larger batches on {device}: --devices {device} --batch-sizes auto",
        )
    return (
        f"a larger batch: B={largest} is the largest measured and the fastest{stopped}",
        "measure larger batches: --batch-sizes auto",
    )


def _stopped(
    measured: list[dict[str, Any]],
    device_type: str,
    best: dict[str, Any],
    stops: Mapping[Key | str, Stop] | None,
) -> str:
    """Why a series whose largest batch is its fastest, still rising, stopped there: its time
    budget, where the growth rule stopped it so (growth.json's `stops`; without them, the rule
    read on the rows under a sweep's or `--batch-sizes auto`'s budget), else not grown (a grid
    of listed batches is not ended by a budget it never had)."""
    if len(measured) < 2:
        return ""
    rising = "; throughput still rising there (not bracketed)"
    if stops is not None:
        # by the series' key; a growth.json before issue 49 named it by its label
        stop = stops.get(series_key(best)) or stops.get(Point.of(best).label(batch=False))
        if stop is not None and stop.reason in ("budget spent", "over budget"):
            return f"; its series' time budget ended it before throughput flattened ({stop.detail})"
        return rising
    for budgets in (growth.SERIES_BUDGET_S, growth.AUTO_BUDGET_S):
        budget = budgets.get(device_type, budgets["cpu"])
        decided = growth.decide(measured, budget)
        if decided.reason in ("budget spent", "over budget"):
            return (
                f"; the series' {seconds(budget)} time budget ended it before throughput flattened"
            )
    return rising


def _applies(setting: Setting, best: dict[str, Any]) -> bool:
    """Whether a lever can act on the fastest point, by what the setting needs
    (config.registry): CUDA (CUDA graphs), a loader's batches (pinned memory), convolutions
    (channels-last, found in the point's profile)."""
    prof = best.get("profile")
    cats = prof.get("category_s", {}) if isinstance(prof, dict) else {}
    # a row holds no model: its profile's convolution time says it has convolutions
    return needs.acts(setting, needs.held(best, conv=bool(cats.get("conv"))))
