"""The verdicts of run folders (science.verdict over their rows), for `explain`, the end of a
sweep and the top of the report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gpubench.report.runs import Run, combine, load_runs
from gpubench.science.verdict import ModelVerdict, verdicts
from gpubench.store import confirmations


def cpu_energy_reason(runs: Sequence[Run]) -> str | None:
    """Why CPU package energy is missing, from the runs' env.json (None when it was readable
    or no run says)."""
    for r in runs:
        rapl = r.env.get("rapl")
        if isinstance(rapl, dict) and rapl.get("unavailable_reason"):
            return str(rapl["unavailable_reason"])
    return None


def run_verdicts(runs: Sequence[Run], frame: pd.DataFrame | None = None) -> list[ModelVerdict]:
    """One verdict per partition over all of `runs` together (`frame`: their combined rows),
    with each run's confirmation of its leaders (for a single run: several runs' rows compete
    together, and their leaders were never re-measured side by side)."""
    found = confirmations.read(runs[0].path) if len(runs) == 1 else None
    return verdicts(combine(runs) if frame is None else frame, cpu_energy_reason(runs), found)


def explain_runs(dirs: Sequence[str | Path]) -> tuple[list[ModelVerdict], list[str]]:
    """The verdicts of the run folders `dirs`, and the folders' names."""
    runs = load_runs(dirs)
    return run_verdicts(runs), [r.name for r in runs]
