"""tune_target.json: a time-to-target search's trajectory and answer beside the rows
(written by gpubench.tune.target as the search stands, read by the report's search section and
scripts/acceptance_target.py, the acceptance against the grid), with its writer and reader.
Times in seconds; a figure not recorded is null. A file from an older tune --target, without a
field added since, reads with that field at its default.

```
{"version": 1, "kind": "target", "model", "size", "device", "precision", "optimizer", "seed"
 (the first seed), "data", "model_options", "dataset", "metric", "target", "budget_s",
 "max_steps" (the top rung's step cap, or null), "elapsed_s" (wall seconds so far), "spent_s"
 (the runs' cost), "eta", "rungs_s": [training-time limit of each rung], "seeds",
 "space": {"batch_sizes", "configs": [{batch_size, lr_scaling, lr_base, lr}]},
 "covered": {"measured", "space_size"}, "stopped_by_budget", "finished",
 "trials": [TargetRun...], "best_so_far_s", "answer": null or TargetAnswer,
 "optuna": null or {"sampler", "pruner", "reduction_factor", "states": {state: count}}}
```
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpubench.store import typed_json

VERSION = 1
FILE = "tune_target.json"


@dataclass(frozen=True)
class TargetRun:
    """One run of the search, in the order it ran (`run`): configuration `id` (`config`,
    `label`) at `rung` on `seed` for up to `limit_s` training seconds; its row's status,
    training seconds, best held-out `metric` and training seconds to the target (null: not
    met); `cost_s`, its wall seconds, between `t_start_s` and `t_end_s` of the search's spent
    time; the `decision` (reached, kept, stopped, seed) and its `reason`; the best time to
    target so far; the Optuna trial and the value it was told."""

    config: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    rung: int = 0
    seed: int | None = None
    limit_s: float | None = None
    status: str = ""
    elapsed_s: float | None = None
    best_metric: float | None = None
    time_to_target_s: float | None = None
    cost_s: float | None = None
    error: str | None = None
    t_start_s: float | None = None
    t_end_s: float | None = None
    decision: str = ""
    reason: str = ""
    best_so_far_s: float | None = None
    run: int | None = None
    id: int | None = None
    metric: str | None = None
    optuna_trial: int | None = None
    value: float | None = None


@dataclass(frozen=True)
class TargetAnswer:
    """The configuration the search names, and its time to target over seeds
    (science.target_time.TargetTime.as_dict and describe; null where not measured)."""

    config: dict[str, Any]
    label: str
    time_to_target: dict[str, Any] | None = None
    describe: str | None = None


@dataclass(frozen=True)
class OptunaStudy:
    """The study the search ran on: its sampler, pruner, reduction factor and how many of its
    trials ended in each state."""

    sampler: str
    pruner: str
    reduction_factor: int
    states: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetRecord(typed_json.Record):
    """The whole of tune_target.json (see the module docstring)."""

    FILE = FILE
    WHAT = "a target search record"

    trials: tuple[TargetRun, ...]
    model: str | None = None
    size: str | None = None
    device: str | None = None
    precision: str | None = None
    optimizer: str | None = None
    seed: int | None = None
    data: str | None = None
    model_options: dict[str, Any] = field(default_factory=dict)
    dataset: str | None = None
    metric: str | None = None
    target: float | None = None
    budget_s: float | None = None
    max_steps: int | None = None
    elapsed_s: float | None = None
    spent_s: float | None = None
    eta: int | None = None
    rungs_s: tuple[float, ...] = ()
    seeds: int | None = None
    space: dict[str, Any] = field(default_factory=dict)
    covered: dict[str, Any] = field(default_factory=dict)
    stopped_by_budget: bool = False
    finished: bool = False
    best_so_far_s: float | None = None
    answer: TargetAnswer | None = None
    optuna: OptunaStudy | None = None
    version: int = VERSION
    kind: str = "target"

    def __post_init__(self) -> None:
        if self.version != VERSION:
            raise ValueError(f"version {self.version}, not {VERSION}")

    def to_dict(self) -> dict[str, Any]:
        """tune_target.json's object, `version` first."""
        out = asdict(self)
        return {"version": out.pop("version"), **out}


def read(run_dir: str | Path) -> TargetRecord:
    """`run_dir`'s tune_target.json; typed_json.RecordError (one line: the file and what is
    wrong) where it is missing or not what tune --target writes."""
    return typed_json.read(Path(run_dir) / FILE, TargetRecord, TargetRecord.WHAT)
