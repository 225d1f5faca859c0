"""A run folder's confirm.json: the verdict's interleaved re-measurement of its leaders, with its
writer (run.confirm) and reader (the verdict: report.explain; scripts/acceptance.py).

```
{"share": of the sweep's point seconds, "seconds": the whole confirmation,
 "sweep_point_seconds": what the sweep's points took, "partitions": [Partition...]}
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.store import row_schema, shaped
from gpubench.store.shaped import shown
from gpubench.store.typed_json import Record

FILE = "confirm.json"
# phases.json's name of the sweep's confirmation (run.context), recorded from its start: with
# no confirm.json beside it, the confirmation was interrupted (report.explain)
CONFIRMATION_PHASE = "confirmation"
STATUSES = ("confirmed", "cut short", "failed", "skipped", "not needed")
# written whatever the status (null where it has none); every other field only where it has one
_ALWAYS = ("fixed", "candidates", "decision", "status", "reason")


@dataclass(frozen=True, kw_only=True)
class Partition:
    """One partition's confirmation (run.confirm).

    - fixed: the partition's fixed fields; candidates: the points re-measured (Point.to_dict),
      unmeasured: the others the verdict ties with the leader unmeasured
    - status: one of STATUSES; reason: why it is not confirmed (null: it is); decision:
      science.leaders' decision over the rounds (null: none)
    - budget_s: the rounds' budget; seconds: what the re-measurement took, setup_s of it the
      building, compiling and warming (outside the budget); first_step_s: each candidate's
      first step; resident: "together" or "one at a time"
    - samples_per_s[c][r]: candidate c's figure in round r; processes[k]: how many of the
      rounds, in order, fresh worker process k ran; window_steps[c]: the steps of its first
      window; other_load_cores, busy: the machine's other load over the rounds
    - traceback: where the re-measurement failed
    """

    fixed: dict[str, Any]
    candidates: list[dict[str, Any]]
    decision: dict[str, Any] | None = None
    unmeasured: list[dict[str, Any]] | None = None
    status: str
    reason: str | None = None
    budget_s: float | None = None
    seconds: float | None = None
    setup_s: float | None = None
    first_step_s: list[float] | None = None
    resident: str | None = None
    window_steps: list[int] | None = None
    samples_per_s: list[list[float]] | None = None
    processes: list[int] | None = None
    other_load_cores: float | None = None
    busy: bool | None = None
    traceback: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is none of {', '.join(STATUSES)}")
        if self.decision is not None and (why := decision_problem(self.decision, self)):
            raise ValueError(why)
        n = len(self.candidates)
        for i, candidate in enumerate(self.candidates):  # points: their settings typed as rows'
            if not isinstance(candidate, dict):
                raise ValueError(f"candidates[{i}] is {shown(candidate)}, not an object")
            if why := row_schema.problem(candidate):
                raise ValueError(f"candidates[{i}]: {why}")
        for name in ("first_step_s", "window_steps", "samples_per_s"):
            listed = getattr(self, name)
            if listed is not None and len(listed) > n:
                raise ValueError(f"{name} lists {len(listed)} candidates of {n}")

    def to_dict(self) -> dict[str, Any]:
        """The partition as confirm.json holds it, and as the verdict reads it."""
        out = dataclasses.asdict(self)
        return {k: v for k, v in out.items() if k in _ALWAYS or v is not None}


# A decision as science.leaders.Decision.to_dict writes it (store.shaped): read back by
# Decision.from_dict, which takes `rounds` and `leader` and each comparison's four keys.
_COMPARISON = {"candidate": int, "ratio": float, "low": float, "high": float}
DECISION: dict[str, Any] = {
    "rounds": int,
    "leader": int,
    "winner": int,
    "tied": [int],
    "comparisons": [_COMPARISON],
    "median_samples_per_s": [float],
    "margin": float,
    "processes": [int],
    "low_samples_per_s": [float],
    "high_samples_per_s": [float],
}


def decision_problem(decision: dict[str, Any], partition: Partition) -> str | None:
    """Why `decision` is not a decision over `partition`'s candidates as the verdict reads it
    (its fields' types, `rounds` and `leader` present, each candidate index one of the
    partition's, a figure per candidate at most); None where it is one."""
    if (why := shaped.problem(decision, DECISION, "decision")) is not None:
        return why
    for key in ("rounds", "leader"):
        if decision.get(key) is None:
            return f"decision.{key} is missing"
    n = len(partition.candidates)
    indices = [("leader", decision["leader"]), ("winner", decision.get("winner"))]
    indices += [(f"tied[{i}]", c) for i, c in enumerate(decision.get("tied") or [])]
    for i, c in enumerate(decision.get("comparisons") or []):
        if set(c) != set(_COMPARISON) or any(v is None for v in c.values()):
            return f"decision.comparisons[{i}] does not hold {', '.join(_COMPARISON)}"
        indices.append((f"comparisons[{i}].candidate", c["candidate"]))
    for where, index in indices:
        if index is not None and not 0 <= index < n:
            return f"decision.{where} is {index}, not one of the {n} candidates' indices"
    for key in ("median_samples_per_s", "low_samples_per_s", "high_samples_per_s"):
        if len(decision.get(key) or []) > n:
            return f"decision.{key} lists more figures than the {n} candidates"
    return None


@dataclass(frozen=True)
class Confirmations(Record):
    """The whole of confirm.json: its budget's `share` of the sweep's `sweep_point_seconds`,
    the `seconds` it took, and each partition's confirmation."""

    FILE = FILE
    WHAT = "a confirmation record"

    share: float
    seconds: float
    sweep_point_seconds: float
    partitions: tuple[Partition, ...]

    def to_dict(self) -> dict[str, Any]:
        """confirm.json's object: each partition as Partition.to_dict gives it."""
        return {**dataclasses.asdict(self), "partitions": [p.to_dict() for p in self.partitions]}


read = Confirmations.read


def partitions(run_dir: str | Path) -> list[dict[str, Any]] | None:
    """The partitions of `run_dir`'s confirm.json as the verdict reads them (science.standing
    takes them as the file's objects); None where it has none."""
    found = read(run_dir)
    return None if found is None else [p.to_dict() for p in found.partitions]


def unconfirmed(rows: list[dict[str, Any]], reason: str) -> list[Partition]:
    """One record per partition of `rows` (config.keys.partition_key) saying that it was not
    confirmed and `reason` (the verdict says "not re-measured (reason)")."""
    from gpubench.config.keys import FIXED, partition_key

    fixed = {partition_key(r): {k: r.get(k) for k in FIXED} for r in rows}
    return [
        Partition(fixed=f, candidates=[], status="skipped", reason=reason) for f in fixed.values()
    ]
