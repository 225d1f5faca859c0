"""tune.json: the search's trajectory and outcome beside the rows (written by gpubench.tune,
read by its resume and the report's "search" section), with its writer and reader; versioned by
SCHEMA. Times in seconds, throughput in samples/s; a figure that
was not measured is null.

```
{
  "schema": 1,
  "request": {model, model_size, device, optimizer, data, seed, model_options,
              budget_s (null: none), named (the axes the user named: {axis: [values]})},
  "space": {axes: {axis: [values]}, batch_sizes: [...] (micro-batches where effective_batch is
            set), effective_batch, combos: [{axis: value}] (in the order the search screens
            them: precision first), size, largest_batch_by_checkpoint: {checkpoint mode: the
            largest micro-batch it fits by max-batch} ({} unless the effective batch is fixed)},
  "elapsed_s":   seconds since the tune started (max-batch and confirmation included; a resumed
                 tune adds on),
  "finished":    whether the search ran all its rounds; "stopped": why it ended early, or null,
  "rounds_decided": rounds whose survivors were chosen (3: all),
  "search_deadline_s": elapsed seconds by which the search was to end (the budget less the
                 confirmation's reserve), or null without a budget,
  "overrun_s":   elapsed_s - budget_s (negative: under), or null without a budget,
  "plan":        {measure_all, measure_all_why, own_fixed_s, rounds: [{round, planned_trials,
                  scale, share_s, began_s}]}: gpubench.tune.plan's,
  "coverage":    {configurations_measured, space_size, fraction, combos_measured, combos},
  "best":        {config, samples_per_s, round} at the deepest round reached, or null,
  "one_off":     [{combo, compile_time_s}]: torch.compile's one-off seconds per compiled combo,
                 from its first measurement (never in samples/s),
  "rounds":      [RoundRecord...],
  "trials":      [TrialRecord...],
  "verdict":     {winner: {identity} or null, leader: label, ties: [labels], confidence,
                  confirmation_status} or null before the confirmation
}
```
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpubench.store import typed_json

SCHEMA = 1
FILE = "tune.json"
OUTCOMES = ("kept", "pruned", "final", "failed", "open", "cut")  # a trial's (TrialRecord)


@dataclass(frozen=True)
class TrialRecord:
    """One measurement of the search.

    - number: its place in the search; round: 0, 1 or 2 (gpubench.tune.search)
    - config: the competing settings and batch_size (with a fixed effective batch, accumulate,
      and batch_size the effective batch)
    - budget_s: the round's measuring time limit per configuration; null under --steps
    - status, samples_per_s (null unless ok), compile_time_s (null: eager): the row's;
      point_time_s: all its seconds (building, warm-up, compile, measuring)
    - elapsed_s: seconds since the tune started, when it ended
    - outcome: kept (measured again in a later round), pruned (its round was decided without
      it), final (measured in the last round), failed (no figure), open (the search stopped
      before deciding its round), cut (the deadline cut it short: not ranked)
    - best_so_far_samples_per_s, best_so_far_config: the best up to and including this trial
    - started_s: elapsed when it started; wall_s: its seconds seen from the tune, split into
      fixed_s (building, first step, compile, profile) and measuring_s (warm-up, windows);
      null for a trial replayed from a resumed folder
    """

    number: int
    round: int
    config: dict[str, Any]
    budget_s: float | None
    status: str
    samples_per_s: float | None
    compile_time_s: float | None
    point_time_s: float | None
    elapsed_s: float
    outcome: str
    best_so_far_samples_per_s: float | None
    best_so_far_config: dict[str, Any] | None
    started_s: float | None = None
    wall_s: float | None = None
    fixed_s: float | None = None
    measuring_s: float | None = None
    cut: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is none of {', '.join(OUTCOMES)}")


@dataclass(frozen=True)
class RoundRecord:
    """One round: its measuring time limit per configuration (null: a fixed step count), its
    trials' outcomes, and when its last trial ended (null: none)."""

    round: int
    budget_s: float | None
    measured: int
    kept: int
    pruned: int
    failed: int
    final: int
    open: int
    ended_at_s: float | None


@dataclass(frozen=True)
class TuneRecord(typed_json.Record):
    """The whole of tune.json (see the module docstring)."""

    FILE = FILE
    WHAT = "a tune record"

    request: dict[str, Any]
    space: dict[str, Any]
    elapsed_s: float = 0.0
    finished: bool = False
    stopped: str | None = None
    rounds_decided: int = 0
    search_deadline_s: float | None = None
    overrun_s: float | None = None
    plan: dict[str, Any] | None = None
    coverage: dict[str, Any] = field(default_factory=dict)
    best: dict[str, Any] | None = None
    one_off: tuple[dict[str, Any], ...] = ()
    rounds: tuple[RoundRecord, ...] = ()
    trials: tuple[TrialRecord, ...] = ()
    verdict: dict[str, Any] | None = None
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if self.schema != SCHEMA:
            raise ValueError(f"schema {self.schema}, not {SCHEMA}")

    def to_dict(self) -> dict[str, Any]:
        """tune.json's object, `schema` first."""
        out = asdict(self)
        return {"schema": out.pop("schema"), **out}


def read(run_dir: str | Path) -> TuneRecord:
    """`run_dir`'s tune.json; typed_json.RecordError (one line: the file and what is wrong) where
    it is missing or not what the tune writes."""
    return typed_json.read(Path(run_dir) / FILE, TuneRecord, TuneRecord.WHAT)
