"""The verdict's confirmation: before a verdict names a fastest configuration, its candidates
(science.leaders) are re-measured interleaved in a worker (harness.interleave), and the outcome
is kept in the run folder's confirm.json for science.verdict to state.

Its cost is bounded: SHARE of the seconds the sweep spent on its points (MIN_BUDGET_S a
partition at the least), spent on the interleaved rounds; building, compiling and warming the
candidates (again for each window where they are built one at a time, see harness.interleave)
are recorded as `setup_s` and not counted against it. The budget is shared among the partitions
in turn, the cheapest first: each may spend what its leader and runner-up need and an even share
of what the needs of all leave over (or, where that cannot cover every need, an even share of
what is left, or what its two need if that much is left). The candidates are
trimmed, the farthest first, to those whose MIN_ROUNDS rounds (the fewest an interval of the
median needs) fit the partition's budget by their measured step times; where not even two fit,
there is no re-measurement and the verdict goes by the rows' intervals. Rounds stop at
DEADLINE times the budget (a machine that slowed meanwhile); fewer than MIN_ROUNDS then decide
nothing. What it took is recorded.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from gpubench.config.spec import Point
from gpubench.harness.interleave import Rounds
from gpubench.run.worker import Call, WorkerError, WorkerRunner
from gpubench.science import leaders, standing
from gpubench.science.partition import FIXED, partition_key
from gpubench.store.confirmations import Confirmations, Partition

SHARE = 0.15  # of the partition's measuring time
WINDOW_S = 0.1  # seconds of steps per window
MAX_ROUNDS = 15
DEADLINE = 3.0  # rounds stop at this many times the budget (a machine that slowed meanwhile)
# The least budget of a partition: building, warming and the first steps of each candidate cost
# tens of milliseconds whatever the points took (a tiny model's whole partition may take 1 s).
MIN_BUDGET_S = 0.5
TIMEOUT_S = 600.0


def confirm(
    run_dir: Path,
    rows: list[dict[str, Any]],
    max_memory: int | None = None,
    timeout_s: float | None = TIMEOUT_S,
    runner: WorkerRunner | None = None,
) -> Confirmations:
    """Confirm the lead of every partition of `rows` (a speed sweep's), write confirm.json in
    `run_dir` and return what it holds: per partition its candidates, rounds, decision (or why
    there is none), and the seconds it took. The rounds run in `runner`'s worker (the sweep's,
    which has paid its models' first-step costs already; left serving), else in one of its
    own, closed at the end."""
    started = time.perf_counter()
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(partition_key(r), []).append(r)
    measured = sum(float(r.get("point_time_s") or 0.0) for r in rows)
    # One budget for the sweep, shared in turn: each partition may spend an even share of
    # what is left, a cheap one leaving the rest to the next; the cheapest go first.
    left = max(SHARE * measured, MIN_BUDGET_S * len(groups))
    order = sorted(groups.values(), key=lambda g: leaders.cost_s(_chosen(g)[:2]))
    needs = [max(leaders.cost_s(_chosen(g)[:2]), MIN_BUDGET_S) for g in order]
    own = runner is None
    runner = WorkerRunner(max_memory, timeout_s) if runner is None else runner
    records = []
    try:
        for n, group in enumerate(order):
            share = _share(left, needs[n:])
            spent = time.perf_counter()
            record = _confirm_partition(group, runner, max_memory, timeout_s, share, left)
            # the rounds' cost: the set-up (compiling above all) is outside the budget
            setup_s = (record.setup_s if record is not None else None) or 0.0
            left -= max(time.perf_counter() - spent - setup_s, 0.0)
            if record is not None:
                records.append(record)
    finally:
        if own:
            runner.close()
    out = Confirmations(SHARE, time.perf_counter() - started, measured, tuple(records))
    out.write(run_dir)
    return out


def _share(left_s: float, needs_s: list[float]) -> float:
    """What the first of the partitions still to confirm may spend of the `left_s` seconds,
    where each needs `needs_s` for its leader and runner-up: its need and an even share of what
    the needs leave over; an even share of what is left where that does not cover them all."""
    surplus = left_s - sum(needs_s)
    if surplus < 0:
        return max(left_s / len(needs_s), MIN_BUDGET_S)
    return needs_s[0] + surplus / len(needs_s)


def _chosen(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates of one partition's rows (science.leaders over the verdict's pool)."""
    return leaders.candidates(standing.pool(rows))


def _confirm_partition(
    rows: list[dict[str, Any]],
    runner: WorkerRunner,
    max_memory: int | None,
    timeout_s: float | None,
    share_s: float,
    left_s: float,
) -> Partition | None:
    """Re-measure one partition's candidates within `share_s` seconds, or within what is
    `left_s` of the sweep's budget where its leader and runner-up need more than the share."""
    pool = standing.pool(rows)
    if not pool:
        return None
    chosen = leaders.candidates(pool)
    fixed = {k: pool[0].get(k) for k in FIXED}
    record = functools.partial(
        Partition, fixed=fixed, candidates=[Point.of(r).to_dict() for r in chosen]
    )
    if len(chosen) < 2:
        return record(status="not needed", reason=standing.alone(rows))
    parallel = [r for r in chosen if str(r.get("parallel") or "none") != "none"]
    if parallel:
        why = "parallel points are not re-measured interleaved (one process each)"
        return record(status="skipped", reason=why)
    budget_s = share_s
    fits = leaders.affordable(chosen, budget_s)
    if not fits and leaders.cost_s(chosen[:2]) <= left_s:
        budget_s = leaders.cost_s(chosen[:2])
        fits = chosen[:2]
    if not fits:
        return record(
            status="skipped",
            budget_s=budget_s,
            reason=f"{leaders.MIN_ROUNDS} interleaved rounds of the leader and the runner-up "
            f"take about {leaders.cost_s(chosen[:2]):.3g} s, over the {max(left_s, 0):.3g} s "
            f"left of the sweep's budget ({SHARE:.0%} of the time its points took)",
        )
    points = [Point.of(r) for r in fits]
    record = functools.partial(
        Partition,
        fixed=fixed,
        candidates=[p.to_dict() for p in points],
        # the others could be the fastest too: the verdict ties them with the leader, unmeasured
        unmeasured=[Point.of(r).to_dict() for r in chosen[len(fits) :]],
    )
    # the sweep's peaks say whether the candidates fit the device together (issue 28)
    peaks = [r.get("torch_peak_reserved_bytes") for r in fits]
    call = Call(
        "gpubench.harness.interleave:interleave",
        (points, budget_s, WINDOW_S, leaders.MIN_ROUNDS, MAX_ROUNDS, DEADLINE * budget_s, peaks),
        max_memory,
        points[0].device,
    )
    started = time.perf_counter()
    try:
        rounds = runner.call(call, timeout_s)
    except WorkerError as e:
        return record(
            status="failed",
            reason=f"the re-measurement failed: {e}",
            traceback=e.traceback,
            seconds=time.perf_counter() - started,
        )
    measured = functools.partial(
        record,
        budget_s=budget_s,
        seconds=time.perf_counter() - started,
        setup_s=rounds.setup_s,
        first_step_s=rounds.first_step_s,
        resident=_resident(rounds),
        samples_per_s=rounds.samples_per_s,
    )
    done = min(len(x) for x in rounds.samples_per_s)
    if done < leaders.MIN_ROUNDS:
        return measured(
            status="cut short",
            reason=f"the machine slowed: {done} of {leaders.MIN_ROUNDS} rounds in "
            f"{DEADLINE:g}x the {budget_s:.3g} s budget",
        )
    return measured(
        status="confirmed",
        window_steps=rounds.window_steps,
        other_load_cores=rounds.other_load_cores,
        busy=rounds.busy,
        decision=leaders.decide(rounds.samples_per_s).to_dict(),
    )


def _resident(rounds: Rounds) -> str:
    """How the candidates were held: "together", or "one at a time" (built, timed for a
    window and freed in turn, where together they would not fit the device)."""
    return "together" if rounds.together else "one at a time"
