"""A run folder's suite.json: the suite a run was started with, as SweepSpec.to_dict() writes it
(JSON: tuples as lists), with its writer (the run context, merge) and reader (a resume, merge,
explain and the report); run.folder rebuilds the SweepSpec from it, settings added since at
their defaults. It is what makes a folder resumable, so it is written whole and durably."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.store import typed_json
from gpubench.store.results import ResultStore

FILE = "suite.json"


def write(run_dir: Path, saved: dict[str, Any]) -> Path:
    """suite.json in `run_dir` holding `saved` (SweepSpec.to_dict()), written whole and
    durably."""
    return ResultStore(run_dir).write_json(FILE, saved)


def read(run_dir: str | Path) -> dict[str, Any] | None:
    """The suite saved in `run_dir`'s suite.json (None where it has none); typed_json.RecordError
    (one line: the file and what is wrong) where it is not JSON or holds no object."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    saved = typed_json.value(path)
    if not isinstance(saved, dict):
        raise typed_json.RecordError(f"{path} is not a saved suite: it holds no JSON object")
    return saved
