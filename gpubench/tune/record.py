"""tune.json's record (gpubench.store.tune_record) from the search's trials: each trial's figures,
costs and outcome, the rounds, the coverage, the best and the one-off compile costs.

A trial row here is a measurement's result row with the tune's own fields beside it:
`_config` (search.Config), `_elapsed_s` (when it ended), and where it was measured in this run
`_started_s`, `_wall_s`, `_fixed_s`, `_measuring_s`, `_budget_s` (the measuring limit it ran
under) and `_cut`."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from gpubench.store import tune_record as T
from gpubench.store.wording import limit
from gpubench.tune.plan import Planner
from gpubench.tune.search import ROUNDS, Outcome
from gpubench.tune.space import TuneSpace


def trials(trial_rows: list[dict[str, Any]], outcome: Outcome | None) -> list[T.TrialRecord]:
    """The trajectory: each trial's figures, its outcome (open until the search settles it;
    cut where the deadline cut it), and the best so far (cut trials never count)."""
    outcomes = [t.outcome for t in outcome.trials] if outcome is not None else []
    configs = [r["_config"].settings() for r in trial_rows]
    ranked = [
        r.get("samples_per_s") if r.get("status") == "ok" and not r.get("_cut") else None
        for r in trial_rows
    ]
    best = with_best_so_far(ranked, configs)
    out = []
    for n, r in enumerate(trial_rows):
        limit = r.get("_budget_s")
        out.append(
            T.TrialRecord(
                number=n,
                round=int(r["tune_round"]),
                config=configs[n],
                budget_s=limit if limit is not None and math.isfinite(limit) else None,
                status=str(r["status"]),
                samples_per_s=r.get("samples_per_s") if r.get("status") == "ok" else None,
                compile_time_s=r.get("compile_time_s"),
                point_time_s=r.get("point_time_s"),
                elapsed_s=float(r["_elapsed_s"]),
                outcome=outcomes[n] if n < len(outcomes) else ("cut" if r.get("_cut") else "open"),
                best_so_far_samples_per_s=best[n][0],
                best_so_far_config=best[n][1],
                started_s=r.get("_started_s"),
                wall_s=r.get("_wall_s"),
                fixed_s=r.get("_fixed_s"),
                measuring_s=r.get("_measuring_s"),
                cut=bool(r.get("_cut")),
            )
        )
    return out


def filled(
    record: T.TuneRecord,
    outcome: Outcome,
    trial_rows: list[dict[str, Any]],
    budget_s: float | None,
    space: TuneSpace,
    planner: Planner,
) -> T.TuneRecord:
    """`record` with the search's outcome: trials settled, rounds, coverage, best, one-offs,
    the plan (with the combos the search dropped)."""
    settled = trials(trial_rows, outcome)
    stopped = record.stopped
    if outcome.stopped_in_round is not None:
        stopped = (
            f"budget: {limit(budget_s)} reached in round {outcome.stopped_in_round} "
            f"(the rest kept for the confirmation)"
            if budget_s is not None
            else f"stopped in round {outcome.stopped_in_round}"
        )
    configs = {json.dumps(t.config, sort_keys=True) for t in settled}
    combos = {json.dumps(combo_of(t.config), sort_keys=True) for t in settled}
    best = record.best
    if outcome.best is not None:
        deepest = max(
            t.round for t in outcome.trials if t.config == outcome.best and t.outcome != "cut"
        )
        best = {
            "config": outcome.best.settings(),
            "samples_per_s": outcome.best_samples_per_s,
            "round": deepest,
        }
    one_off: dict[str, dict[str, Any]] = {}  # each combo's first compile
    for t in settled:
        if t.compile_time_s is not None:
            combo = {"combo": combo_of(t.config), "compile_time_s": t.compile_time_s}
            one_off.setdefault(json.dumps(combo["combo"], sort_keys=True), combo)
    return dataclasses.replace(
        record,
        trials=tuple(settled),
        rounds_decided=outcome.rounds_decided,
        finished=outcome.rounds_decided == ROUNDS,
        plan={**planner.to_dict(), "dropped": list(outcome.dropped.values())},
        stopped=stopped,
        coverage=coverage(len(configs), space.space.size, len(combos), len(space.combos)),
        best=best,
        one_off=(*record.one_off, *one_off.values()),
        rounds=tuple(rounds(settled, planner)),
    )


def combo_of(config: dict[str, Any]) -> dict[str, Any]:
    """A trial's settings less its size axis (the batch, or a fixed batch's accumulation)."""
    return {k: v for k, v in config.items() if k not in ("batch_size", "accumulate")}


def rounds(trials: list[T.TrialRecord], planner: Planner) -> list[T.RoundRecord]:
    """Each round's trials and what became of them; its budget_s is the measuring limit its
    trials ran under (the first trial's: a cut one ran under less)."""
    out = []
    for rnd in range(ROUNDS):
        mine = [t for t in trials if t.round == rnd]
        limits = [t.budget_s for t in mine if not t.cut]
        count = {o: sum(t.outcome == o for t in mine) for o in ("kept", "pruned", "failed")}
        out.append(
            T.RoundRecord(
                round=rnd,
                budget_s=limits[0] if limits else None,
                measured=len(mine),
                final=sum(t.outcome == "final" for t in mine),
                open=sum(t.outcome in ("open", "cut") for t in mine),
                ended_at_s=max((t.elapsed_s for t in mine), default=None),
                **count,
            )
        )
    return out


def coverage(
    configs_measured: int, space_size: int, combos_measured: int, combos: int
) -> dict[str, Any]:
    """The configurations and combos measured at any round, of the space's."""
    return {
        "configurations_measured": configs_measured,
        "space_size": space_size,
        "fraction": configs_measured / space_size if space_size else 0.0,
        "combos_measured": combos_measured,
        "combos": combos,
    }


def with_best_so_far(
    samples_per_s: list[float | None], configs: list[Any]
) -> list[tuple[float | None, Any]]:
    """The running maximum of the trials' `samples_per_s` (null until one ran), with its config."""
    best: tuple[float | None, Any] = (None, None)
    out = []
    for sps, config in zip(samples_per_s, configs, strict=True):
        if sps is not None and (best[0] is None or sps > best[0]):
            best = (sps, config)
        out.append(best)
    return out
