"""A run folder's suite.json: the suite a run was started with, as SweepSpec.to_dict() writes it
(JSON: tuples as lists), with its writer (the run context, merge) and reader (a resume, merge,
explain and the report); run.folder rebuilds the SweepSpec from it, settings added since at
their defaults. It is what makes a folder resumable, so it is written whole and durably."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from gpubench.config.registry import SETTINGS
from gpubench.store import shaped, typed_json
from gpubench.store.results import ResultStore

FILE = "suite.json"


def write(run_dir: Path, saved: dict[str, Any]) -> Path:
    """suite.json in `run_dir` holding `saved` (SweepSpec.to_dict()), written whole and
    durably."""
    return ResultStore(run_dir).write_json(FILE, saved)


def read(run_dir: str | Path, skip_odd: bool = False) -> dict[str, Any] | None:
    """The suite saved in `run_dir`'s suite.json (None where it has none); typed_json.RecordError
    (one line: the file and what is wrong) where it is not JSON, holds no object, holds an axis
    or a table of the wrong shape (SCHEMA: what a resume, explain and the report read) or more
    than MAX_VALUES values on an axis or MAX_POINTS points in all. With `skip_odd` (a reader:
    explain, the report) a suite.json of the wrong shape is left out with a warning that says
    the same (None), and the folder is read without it."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    try:
        saved = typed_json.value(path)
        if not isinstance(saved, dict):
            raise typed_json.RecordError(f"{path} is not a saved suite: it holds no JSON object")
        odd = shaped.problem(saved, SCHEMA, "suite") or _too_many(saved)
        if odd is not None:
            raise typed_json.RecordError(f"{path} is not a saved suite: {odd}")
    except typed_json.RecordError as e:
        if not skip_odd:
            raise
        warnings.warn(f"{e}; read without it", stacklevel=2)
        return None
    return saved


# The most values one axis of a saved suite may list, and the most points its axes may make
# (the product of their lengths): far beyond a sweep anyone runs (100,000 points of a second
# each take more than a day), and small enough that planning them takes a moment, not memory
# for millions of points.
MAX_VALUES = 10_000
MAX_POINTS = 100_000


def _too_many(saved: dict[str, Any]) -> str | None:
    """Why the axes of `saved` are too large to plan (MAX_VALUES, MAX_POINTS); None where not."""
    points = 1
    for axis in _AXES:
        values = saved.get(axis)
        if isinstance(values, list):
            if len(values) > MAX_VALUES:
                return f"{axis} lists {len(values):,} values; allowed: at most {MAX_VALUES:,}"
            points *= max(1, len(values))
            if points > MAX_POINTS:
                return (
                    f"its axes make more than {MAX_POINTS:,} points (at {axis}); allowed: at "
                    f"most {MAX_POINTS:,} in one run folder"
                )
    return None


def _axis_shape(setting: Any) -> Any:
    """The shape of a setting's axis in suite.json: one value (a scalar axis) or a list of
    them; a word in its place too ("auto": a rule that picks the values)."""
    one = _ONE.get(setting.type, object)
    return (one, str) if setting.sweep == "scalar" else ([one], str)


_ONE: dict[Any, Any] = {str: str, int: int, bool: bool, str | None: str, int | None: int}
_ONE |= {bool | None: bool}
_AXES = [s.axis for s in SETTINGS if s.axis is not None and s.sweep != "scalar"]
_TABLE = {"*": object}
SCHEMA: dict[str, Any] = {
    **{s.axis: _axis_shape(s) for s in SETTINGS if s.axis is not None},
    "name": str,
    "mode": str,
    "budget": {"*": shaped.LIMIT},
    "convergence": dict,
    "model_options": dict,
    "profile": bool,
    "grow_batch_sizes": [str],  # device types ("cpu", "cuda") whose series grow
    "skip_emulated": bool,
    "prices": {"usd_per_hour": {"*": float}, "epoch_samples": float},
    "cpu_watts": float,
    "noise_budget_s": float,
}
