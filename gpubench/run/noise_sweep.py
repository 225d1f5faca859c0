"""The noise phase of a speed sweep (issue 51): after its points, before the confirmation, each
reference model (mlp, cnn, transformer) and optimizer of the suite measures B_noise on its real
data set (science.noise_phase) in the run's worker, within the suite's `noise_budget_s` in all,
into the folder's noise.json, from which the verdict predicts the batch fastest to a target.

It runs before the confirmation because it uses the sweep's worker as it is (imports done), and
the confirmation closes that worker for fresh ones of its own. Rows on synthetic batches are the
ones it serves: a suite with a loader of its own (real data), a model by name, a model given
options (another model than the preset) or a convergence sweep (its rows have their own
B_noise) gets no phase. A folder that holds noise.json (a resumed sweep) is not measured again.
What it could not measure, and an error of the phase, is one warning line each: the rows
measured before it are on disk already and are never touched.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from gpubench.config.checks import check_noise_budget
from gpubench.config.errors import ConfigError
from gpubench.config.spec import SweepSpec
from gpubench.run.worker import Call, WorkerError, WorkerRunner
from gpubench.store import noise_record
from gpubench.store.noise_record import NoiseEntry, NoiseRecord

PHASE = "noise phase (B_noise on real data)"
# overrides every suite's noise_budget_s where set (a test session sets 0: no phase)
BUDGET_VARIABLE = "GPUBENCH_NOISE_BUDGET_S"
REFERENCE_MODELS = ("mlp", "cnn", "transformer")
TARGET = "gpubench.science.noise_phase:measure_all"  # what the worker runs
# the worker's limit: the budget, and as long again for the data sets and a slow last step
_TIMEOUT_FACTOR = 2.0
_TIMEOUT_EXTRA_S = 60.0


def budget_s(spec: SweepSpec) -> float:
    """The phase's seconds in all: BUDGET_VARIABLE where set (a ConfigError naming it where it
    is not a number of seconds), else `spec`'s noise_budget_s."""
    given = os.environ.get(BUDGET_VARIABLE)
    if given is None:
        return float(spec.noise_budget_s)
    try:
        return check_noise_budget(given)
    except ConfigError as e:
        raise ConfigError(f"{BUDGET_VARIABLE}: {e}") from None


def pairs(spec: SweepSpec) -> list[tuple[str, str, str]]:
    """(model, size, optimizer) for each reference model and optimizer of `spec` whose rows
    run on synthetic batches; [] where its budget (budget_s) is 0 or it is not a speed sweep."""
    if spec.mode != "speed" or not budget_s(spec) or spec.loader is not None:
        return []
    models = [m for m in spec.models if m in REFERENCE_MODELS and not spec.model_options.get(m)]
    return [(m, spec.size, o) for m in models for o in spec.optimizers]


def due(run_dir: Path, spec: SweepSpec) -> bool:
    """Whether the sweep of `spec` into `run_dir` runs the phase: it has pairs, and the folder
    holds no noise.json (a resumed sweep's phase ran before)."""
    return bool(pairs(spec)) and not (run_dir / noise_record.FILE).is_file()


def device_of(spec: SweepSpec) -> str:
    """Where the phase trains: a CUDA device of the sweep's where it has one (B_noise is the
    data's and the model's, not the device's: the fastest device measures the most steps),
    else its first device."""
    devices = spec.resolved_devices()
    return next((d for d in devices if d.startswith("cuda")), devices[0])


def run(run_dir: Path, spec: SweepSpec, runner: WorkerRunner) -> NoiseRecord | None:
    """Measure `spec`'s pairs in `runner`'s worker and write `run_dir`/noise.json with the
    figures measured; each pair not measured, and an error of the whole phase, warned in one
    line. None (nothing run) where it is not `due`."""
    if not due(run_dir, spec):
        return None
    todo = pairs(spec)
    budget = budget_s(spec)
    device = device_of(spec)
    # under the sweep's memory cap (--max-memory), as its points
    call = Call(TARGET, (todo, device, budget), runner.max_memory, device)
    try:
        results = runner.call(call, budget * _TIMEOUT_FACTOR + _TIMEOUT_EXTRA_S)
    except WorkerError as e:
        warnings.warn(f"noise phase: not measured ({e}); the rows are kept", stacklevel=2)
        return None
    entries = tuple(r for r in results if isinstance(r, NoiseEntry))
    for r in results:
        if not isinstance(r, NoiseEntry):
            warnings.warn(r.line(), stacklevel=2)
    record = NoiseRecord(entries)
    record.write(run_dir)
    return record
