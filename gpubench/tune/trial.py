"""One trial of tune's search against the wall clock: its measurement bounded so that it ends by
the search's deadline (its warm-up and measuring limits shrunk to the time left, and the
deadline itself handed to the harness, which stops at the step boundary where it passes: a
trial is cut at a step, and killed only as the last resort), and what it cost, split into
fixed and measuring seconds for the plan (gpubench.tune.plan)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from gpubench.config.spec import Budget
from gpubench.harness.step_stats import min_samples_for_ci
from gpubench.science.leaders import CONFIDENCE
from gpubench.tune.plan import TrialCost
from gpubench.tune.search import ROUNDS, Config, round_scale

# Seconds a worker is given past the deadline before it is killed, beyond twice the trial's
# planned fixed cost: the backstop for a first step (a compile) far slower than planned.
KILL_GRACE_S = 10.0


def round_budget(budget: Budget, rnd: int, scale: float = 1.0) -> Budget:
    """How round `rnd` measures a point: the sweep's `budget` in the last round; before it,
    its times (warm-up and measuring) scaled by search.round_scale and no profile; a budget of
    a fixed step count has its steps scaled instead (never under the fewest steps with an
    interval of the median). `scale` (the plan's, at most 1) shortens any round's times
    further where the budget is short."""
    if rnd == ROUNDS - 1 and scale == 1.0:
        return budget
    factor = scale * (round_scale(rnd) if rnd < ROUNDS - 1 else 1.0)
    out = dataclasses.replace(
        budget,
        warmup_min_s=budget.warmup_min_s * factor,
        warmup_max_s=budget.warmup_max_s * factor,
        min_time_s=budget.min_time_s * factor,
        max_time_s=budget.max_time_s * factor,
        profile_steps=budget.profile_steps if rnd == ROUNDS - 1 else 0,
    )
    if budget.min_steps == budget.max_steps:  # Budget.fixed: a step count, not a time
        steps = max(min_samples_for_ci(CONFIDENCE), math.ceil(budget.max_steps * factor))
        out = dataclasses.replace(out, min_steps=steps, max_steps=steps)
    return out


def measuring_limit_s(budget: Budget) -> float:
    """The most seconds `budget` lets a trial warm up and measure (inf: a step count)."""
    return budget.warmup_max_s + budget.max_time_s


def with_deadline(budget: Budget, left_s: float) -> Budget:
    """`budget` with the search's deadline, `left_s` seconds from now, as a time.monotonic()
    value the worker's harness reads (harness.timing stops warm-up and measuring at the step
    boundary where it passes: the row comes back `deadline_cut`)."""
    return dataclasses.replace(budget, deadline=time.monotonic() + max(left_s, 0.0))


def bounded(budget: Budget, room_s: float) -> tuple[Budget, bool]:
    """`budget` with its warm-up and measuring limits shrunk, in proportion, to end within
    `room_s` seconds of measuring, and whether it had to be (the trial is then cut: not a
    full measurement). A step-count budget gets a time limit of `room_s`."""
    limit = measuring_limit_s(budget)
    if limit <= room_s:
        return budget, False
    room_s = max(room_s, 0.0)
    if not math.isfinite(limit):
        return dataclasses.replace(budget, max_time_s=room_s, min_time_s=0.0), True
    f = room_s / limit
    out = dataclasses.replace(
        budget,
        warmup_min_s=min(budget.warmup_min_s, budget.warmup_max_s * f),
        warmup_max_s=budget.warmup_max_s * f,
        min_time_s=min(budget.min_time_s, budget.max_time_s * f),
        max_time_s=budget.max_time_s * f,
    )
    return out, True


def kill_after_s(room_s: float, fixed_s: float, point_timeout_s: float | None) -> float | None:
    """The seconds after which the worker of a trial with `room_s` seconds to its deadline and
    a planned fixed cost of `fixed_s` is killed: the user's --point-timeout where sooner."""
    backstop = max(room_s, 0.0) + 2 * fixed_s + KILL_GRACE_S
    return backstop if point_timeout_s is None else min(point_timeout_s, backstop)


def cost(
    config: Config,
    rnd: int,
    row: dict[str, Any],
    wall_s: float,
    scale: float,
    budget: Budget,
    fresh_worker: bool = False,
) -> TrialCost:
    """What a trial of `config` in round `rnd` under `budget` cost: `wall_s` seconds in all, of
    which measuring is its warm-up after the compile and its measured windows (row fields), the
    rest fixed; `fresh_worker`: the trial started the worker that measured it."""
    compile_s = float(row.get("compile_time_s") or 0.0)
    warm = max(float(row.get("warmup_time_s") or 0.0) - compile_s, 0.0)
    measuring = min(warm + float(row.get("wall_time_s") or 0.0), wall_s)
    limit = measuring_limit_s(budget)
    fixed = wall_s - measuring
    ok = row.get("status") == "ok" and not row.get("deadline_cut")
    return TrialCost(
        config.combo,
        rnd,
        fixed,
        measuring,
        compile_s,
        scale,
        limit,
        config.batch_size,
        step_time_s=float(row.get("step_time_s") or 0.0) if ok else 0.0,
        samples_per_s=float(row["samples_per_s"]) if ok and row.get("samples_per_s") else None,
        # a warm-up its limit ended may run to the confirmation's longer limit there
        warmup_s=warm if row.get("warmup_steady", True) else math.inf,
        point_s=float(row.get("point_time_s") or 0.0),
        ci_rel=_ci_rel(row) if ok else None,
        fresh_worker=fresh_worker,
    )


def _ci_rel(row: dict[str, Any]) -> float | None:
    """The row's step_time_ci_rel, None where it has none (NaN: too few steps)."""
    ci = row.get("step_time_ci_rel")
    return None if ci is None or not math.isfinite(float(ci)) else float(ci)
