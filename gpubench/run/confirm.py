"""The verdict's confirmation: before a verdict names a fastest configuration, its candidates
(science.leaders) are re-measured interleaved (harness.interleave) in leaders.PROCESSES fresh
worker processes in turn, each one forked for it and closed after it, so that the figures'
intervals cover the spread between processes (another memory layout, another worker state);
the outcome is kept in the run folder's confirm.json for science.verdict to state.

Its cost is bounded: SHARE of the seconds the sweep spent on its points (MIN_BUDGET_S a
partition at the least), spent on the interleaved rounds; starting the workers and building,
compiling and warming the candidates in each (again for each window where they are built one
at a time, see harness.interleave) are recorded as `setup_s` and not counted against it. The
budget is shared among the partitions in turn, the cheapest first: each may spend what its
candidates need and an even share of what the needs of all leave over (or, where that cannot
cover every need, an even share of what is left, MIN_BUDGET_S at the least). Every candidate
(the leader, the runner-up and each row the rows cannot tell from the leader beyond
leaders.DRIFT, leaders.MAX_CANDIDATES at most) is re-measured, whatever is left (MIN_ROUNDS
rounds of one-step windows at the least: a few of their steps), so neither a tie nor a lead is
the budget's doing: a third row 10% slower by its row, never re-measured, was once called
slower where in the next run it led. Rounds stop at DEADLINE times the budget
(a machine that slowed meanwhile); fewer than ROUNDS_PER_PROCESS in a process then decide
nothing. What it took is recorded.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpubench.config.keys import FIXED, partition_key
from gpubench.config.spec import Point
from gpubench.harness.interleave import Rounds
from gpubench.run.pool import drained_worker
from gpubench.run.worker import Call, WorkerError
from gpubench.science import leaders, standing
from gpubench.store import confirmations
from gpubench.store.confirmations import Confirmations, Partition
from gpubench.store.wording import seconds, times

SHARE = 0.15  # of the partition's measuring time
WINDOW_S = 0.1  # seconds of steps per window
MAX_ROUNDS = 15
DEADLINE = 3.0  # rounds stop at this many times the budget (a machine that slowed meanwhile)
# The least budget of a partition: building, warming and the first steps of each candidate cost
# tens of milliseconds whatever the points took (a tiny model's whole partition may take 1 s),
# and its rounds are split between leaders.PROCESSES processes.
MIN_BUDGET_S = 1.0
TIMEOUT_S = 600.0


def confirm(
    run_dir: Path,
    rows: list[dict[str, Any]],
    max_memory: int | None = None,
    timeout_s: float | None = TIMEOUT_S,
    only: Sequence[Point] | None = None,
    devices: Sequence[str] = (),
) -> Confirmations:
    """Confirm the lead of every partition of `rows` (a speed sweep's), write confirm.json in
    `run_dir` and return what it holds: per partition its candidates, rounds, decision (or why
    there is none), and the seconds it took. The rounds run in fresh workers of their own, each
    closed after its rounds (a sweep's worker is best closed before: on a GPU its cached
    memory is not the candidates'). `only`: confirm again just the partitions of these points
    (a series grown after the first confirmation), the others' records kept as they were.
    `devices`: a drained device pool's (run.pool), whose first device every worker sees."""
    started = time.perf_counter()
    keys = None if only is None else {partition_key(p.to_dict()) for p in only}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if keys is None or partition_key(r) in keys:
            groups.setdefault(partition_key(r), []).append(r)
    measured = sum(float(r.get("point_time_s") or 0.0) for g in groups.values() for r in g)
    # One budget for the sweep, shared in turn: each partition may spend an even share of
    # what is left, a cheap one leaving the rest to the next; the cheapest go first.
    left = max(SHARE * measured, MIN_BUDGET_S * len(groups))
    order = sorted(groups.values(), key=lambda g: leaders.cost_s(_floor(g)))
    needs = [max(leaders.cost_s(_floor(g)), MIN_BUDGET_S) for g in order]
    records = []
    for n, group in enumerate(order):
        share = _share(left, needs[n:])
        spent = time.perf_counter()
        record = _confirm_partition(group, max_memory, timeout_s, share, devices)
        # the rounds' cost: the set-up (workers, compiling above all) is outside the budget
        setup_s = (record.setup_s if record is not None else None) or 0.0
        left -= max(time.perf_counter() - spent - setup_s, 0.0)
        if record is not None:
            records.append(record)
    seconds = time.perf_counter() - started
    before = confirmations.read(run_dir) if keys is not None else None
    if before is not None and keys is not None:  # the partitions not confirmed again, kept
        records[:0] = [p for p in before.partitions if partition_key(p.fixed) not in keys]
        seconds += before.seconds
        measured = before.sweep_point_seconds
    out = Confirmations(SHARE, seconds, measured, tuple(records))
    out.write(run_dir)
    return out


def _share(left_s: float, needs_s: list[float]) -> float:
    """What the first of the partitions still to confirm may spend of the `left_s` seconds,
    where each needs `needs_s` for its candidates: its need and an even share of what
    the needs leave over; an even share of what is left where that does not cover them all."""
    surplus = left_s - sum(needs_s)
    if surplus < 0:
        return max(left_s / len(needs_s), MIN_BUDGET_S)
    return needs_s[0] + surplus / len(needs_s)


def _floor(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates of one partition's rows that are re-measured whatever the budget
    (science.leaders over the verdict's pool, MAX_CANDIDATES at most)."""
    return leaders.candidates(standing.pool(rows))[: leaders.MAX_CANDIDATES]


def _confirm_partition(
    rows: list[dict[str, Any]],
    max_memory: int | None,
    timeout_s: float | None,
    share_s: float,
    devices: Sequence[str] = (),
) -> Partition | None:
    """Re-measure one partition's candidates within `share_s` seconds, every one of them
    whatever that share (MIN_ROUNDS rounds of one-step windows of theirs at the least), in
    leaders.PROCESSES fresh workers in turn."""
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
    # every candidate, whatever the share: neither a tie nor a lead is the budget's doing
    fits = chosen[: leaders.MAX_CANDIDATES]
    budget_s = max(share_s, MIN_BUDGET_S, leaders.cost_s(fits))
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
    started = time.perf_counter()
    try:
        done = rounds_in_fresh_workers(points, budget_s, peaks, max_memory, timeout_s, devices)
    except WorkerError as e:
        return record(
            status="failed",
            reason=f"the re-measurement failed: {e}",
            traceback=e.traceback,
            seconds=time.perf_counter() - started,
        )
    each_s = budget_s / leaders.PROCESSES
    joined = _joined(done)
    processes = _rounds_each(done)
    samples = paired_samples(done)
    measured = functools.partial(
        record,
        budget_s=budget_s,
        seconds=time.perf_counter() - started,
        setup_s=joined.setup_s,
        first_step_s=joined.first_step_s,
        resident=_resident(joined),
        samples_per_s=samples,
        processes=processes,
    )
    if min(processes) < leaders.ROUNDS_PER_PROCESS:
        return measured(
            status="cut short",
            reason=f"the machine slowed: {min(processes)} of {leaders.ROUNDS_PER_PROCESS} rounds "
            f"in a process in {times(DEADLINE)} its {seconds(each_s)} share of the budget",
        )
    return measured(
        status="confirmed",
        window_steps=joined.window_steps,
        other_load_cores=joined.other_load_cores,
        busy=joined.busy,
        decision=leaders.decide(samples, processes=processes).to_dict(),
    )


def rounds_in_fresh_workers(
    points: list[Point],
    budget_s: float,
    peaks: list[Any] | None = None,
    max_memory: int | None = None,
    timeout_s: float | None = TIMEOUT_S,
    devices: Sequence[str] = (),
) -> list[Rounds]:
    """`points` timed interleaved (harness.interleave) in leaders.PROCESSES fresh worker
    processes in turn, each with its even share of `budget_s` (its start and the candidates'
    set-up outside it) and closed after its rounds; `peaks`: the points' peak reserved bytes
    where known (whether they fit the device together); `devices`: a drained device pool's,
    whose first device the workers see (run.pool.drained_worker). WorkerError where one
    fails."""
    each_s = budget_s / leaders.PROCESSES
    most = math.ceil(MAX_ROUNDS / leaders.PROCESSES)
    peaks = peaks if peaks is not None else [None] * len(points)
    args = (points, each_s, WINDOW_S, leaders.ROUNDS_PER_PROCESS, most, DEADLINE * each_s, peaks)
    call = Call("gpubench.harness.interleave:interleave", args, max_memory, points[0].device)
    done: list[Rounds] = []
    for _ in range(leaders.PROCESSES):
        runner = drained_worker(devices, max_memory, timeout_s)
        try:
            t0 = time.perf_counter()
            rounds = runner.call(call, timeout_s)
            # the fresh worker's start is set-up too, outside the rounds' budget
            done.append(_with_setup(rounds, time.perf_counter() - t0 - rounds.seconds))
        finally:
            runner.close()
    return done


def paired_samples(done: list[Rounds]) -> list[list[float]]:
    """Each candidate's samples/s over the rounds of every process in turn, each process's cut
    to the rounds every candidate ran in it (round r of one candidate pairs with round r of
    another: they shared its machine)."""
    processes = _rounds_each(done)
    return [
        [v for r, n in zip(done, processes, strict=True) for v in r.samples_per_s[c][:n]]
        for c in range(len(done[0].samples_per_s))
    ]


def _rounds_each(done: list[Rounds]) -> list[int]:
    """The rounds every candidate ran, in each process in turn."""
    return [min(len(x) for x in r.samples_per_s) for r in done]


def _with_setup(rounds: Rounds, extra_s: float) -> Rounds:
    """`rounds` with `extra_s` (its worker's start and the call's transfer) added to its set-up."""
    return dataclasses.replace(rounds, setup_s=rounds.setup_s + max(extra_s, 0.0))


def _joined(done: list[Rounds]) -> Rounds:
    """The processes' rounds as one record: the first's window steps and first steps, the
    set-up and seconds summed, the most other load any saw, busy where any was, together
    where every one was (samples_per_s: the first's; run.confirm records them all)."""
    loads = [r.other_load_cores for r in done if r.other_load_cores is not None]
    busy = [r.busy for r in done if r.busy is not None]
    return Rounds(
        done[0].samples_per_s,
        done[0].window_steps,
        sum(r.setup_s for r in done),
        sum(r.seconds for r in done),
        max(loads) if loads else None,
        any(busy) if busy else None,
        all(r.together for r in done),
        done[0].first_step_s,
    )


def _resident(rounds: Rounds) -> str:
    """How the candidates were held: "together", or "one at a time" (built, timed for a
    window and freed in turn, where together they would not fit the device)."""
    return "together" if rounds.together else "one at a time"
