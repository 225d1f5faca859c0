"""tune_target.json: a target search's settings, its trajectory (every run: configuration,
rung, training seconds, best metric, kept or stopped and why) and its answer.

Schema (version 1; times in seconds; a reader tolerates extra keys):
{"version": 1, "kind": "target", "model", "size", "device", "precision", "optimizer",
 "dataset", "metric", "target", "budget_s", "seed" (the first seed), "data", "max_steps" (the
 top rung's step cap, or null), "model_options", "elapsed_s" (wall seconds so far), "spent_s" (the
 runs' cost), "eta", "rungs_s": [training-time limit of each rung], "seeds",
 "space": {"batch_sizes", "configs": [{batch_size, lr_scaling, lr_base, lr}]},
 "covered": {"measured", "space_size"}, "stopped_by_budget", "finished",
 "trials": [target_search.Step.as_dict()], "best_so_far_s", "answer": null or
 {"config", "label", "time_to_target": TargetTime.as_dict(), "describe"}}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpubench.config.model_options import decode
from gpubench.config.spec import Point
from gpubench.science.target_time import TargetTime
from gpubench.store.results import ResultStore
from gpubench.tune.target_search import Rungs, SearchResult, TargetConfig

FILE = "tune_target.json"
VERSION = 1
# what tune_target.json takes as it is from the runs' Point, and from the Record
_OF_POINT = ("model", "device", "precision", "optimizer", "seed", "data")
_AS_IS = ("dataset", "metric", "target", "budget_s", "max_steps")


@dataclass(frozen=True)
class Record:
    """What a target search writes beside its trajectory."""

    point: Point  # the runs' settings but batch size and lr scaling: seed is the first seed
    dataset: str
    metric: str
    target: float
    budget_s: float
    rungs: Rungs
    seeds: int
    configs: Sequence[TargetConfig]
    batch_sizes: Sequence[int]
    max_steps: int | None = None

    def write(
        self,
        store: ResultStore,
        result: SearchResult,
        elapsed_s: float,
        spread: TargetTime | None = None,
        finished: bool = False,
    ) -> None:
        """Write tune_target.json whole (durably) as the search stands."""
        store.write_json(FILE, self.as_dict(result, elapsed_s, spread, finished))

    def as_dict(
        self,
        result: SearchResult,
        elapsed_s: float,
        spread: TargetTime | None,
        finished: bool,
    ) -> dict[str, Any]:
        answer = None
        if result.best is not None:
            best = self.configs[result.best]
            answer = {
                "config": best.as_dict(),
                "label": best.label(),
                "time_to_target": spread.as_dict() if spread else None,
                "describe": spread.describe() if spread else None,
            }
        return {
            "version": VERSION,
            "kind": "target",
            **{name: getattr(self.point, name) for name in _OF_POINT},
            "size": self.point.model_size,
            "model_options": decode(self.point.model_options),
            **{name: getattr(self, name) for name in _AS_IS},
            "elapsed_s": elapsed_s,
            "spent_s": result.spent_s,
            "eta": self.rungs.eta,
            "rungs_s": list(self.rungs.limits_s),
            "seeds": self.seeds,
            "space": {
                "batch_sizes": list(self.batch_sizes),
                "configs": [c.as_dict() for c in self.configs],
            },
            "covered": {"measured": result.trials_measured(), "space_size": len(self.configs)},
            "stopped_by_budget": result.stopped_by_budget,
            "finished": finished,
            "trials": [s.as_dict(self.metric) for s in result.steps],
            "best_so_far_s": result.best_s,
            "answer": answer,
        }
