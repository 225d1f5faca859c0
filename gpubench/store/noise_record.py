"""A run folder's noise.json (issue 51): the gradient noise scale B_noise that a sweep's noise
phase measured per reference model on its real data set (science.noise_phase writes it), read
by the verdict (science.fastest_to_target) so that a speed sweep's "fastest to target" is
predicted where its own points ran on synthetic batches.

```
{"entries": [{"model": "cnn", "model_size": "small", "optimizer": "adamw", "device": "cpu",
              "dataset": "digits", "batch_size": 32, "b_noise": 41.2, "low": 20.1, "high": 90.3,
              "kind": "preconditioned", "first_step": 8, "last_step": 40, "steps": 33,
              "train_s": 2.9, "cost_s": 3.4, "target_metric": "eval_loss", "target": 0.05,
              "metric_last": 0.048, "reached": true}, ...]}
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpubench.store.typed_json import Record
from gpubench.store.wording import number, plural, seconds

FILE = "noise.json"
KINDS = ("preconditioned", "raw")


@dataclass(frozen=True)
class NoiseEntry:
    """One model's B_noise (its `kind`, its 95% interval `low`-`high`, None: none; `high` None
    with a `low`: unbounded), measured over the optimizer updates `first_step`-`last_step`
    (`steps` of them measured) of a short training at `batch_size` on `dataset`; `train_s`: its
    training seconds, `cost_s`: the phase's whole time for this model (data, model, training).
    A run toward a target (issue 51, item 4) also holds its `target_metric` and `target`, the
    held-out value it ended at (`metric_last`) and whether it `reached` the target; a record
    written before then has None there."""

    model: str
    model_size: str
    optimizer: str
    device: str
    dataset: str
    batch_size: int
    b_noise: float
    low: float | None
    high: float | None
    kind: str
    first_step: int
    last_step: int
    steps: int
    train_s: float
    cost_s: float
    target_metric: str | None = None
    target: float | None = None
    metric_last: float | None = None
    reached: bool | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not (math.isfinite(self.b_noise) and self.b_noise > 0):
            raise ValueError(f"b_noise {self.b_noise!r} is not a positive number")

    def where(self) -> str:
        """Where in training it was taken, e.g. 'steps 0-640 of a 4.1 s noise phase on digits
        (B=64, 160 steps measured), the whole way to eval_loss 0.05'."""
        said = (
            f"steps {self.first_step}-{self.last_step} of a {seconds(self.train_s)} noise phase "
            f"on {self.dataset} (B={self.batch_size}, {plural(self.steps, 'step')} measured)"
        )
        if self.target_metric is None or self.target is None:
            return said
        goal = f"{self.target_metric} {number(self.target)}"
        if self.reached:
            return f"{said}, the whole way to {goal}"
        last = "" if self.metric_last is None else f" at {number(self.metric_last)}"
        return f"{said}, stopped{last}, short of {goal}: the figure leaves out the rest"


@dataclass(frozen=True)
class NoiseRecord(Record):
    """The whole of noise.json: an entry per model, size, optimizer and device measured."""

    FILE = FILE
    WHAT = "a noise-phase record"

    entries: tuple[NoiseEntry, ...] = ()


read = NoiseRecord.read
