"""The verdicts of run folders (science.verdict over their rows), for `explain`, the end of a
sweep and the top of the report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gpubench.report.runs import Run, combine, load_runs
from gpubench.science.verdict import ModelVerdict, verdicts


def cpu_energy_reason(runs: Sequence[Run]) -> str | None:
    """Why CPU package energy is missing, from the runs' env.json (None when it was readable
    or no run says)."""
    for r in runs:
        rapl = r.env.get("rapl")
        if isinstance(rapl, dict) and rapl.get("unavailable_reason"):
            return str(rapl["unavailable_reason"])
    return None


def run_verdicts(runs: Sequence[Run], frame: pd.DataFrame | None = None) -> list[ModelVerdict]:
    """One verdict per model over all of `runs` together (`frame`: their combined rows)."""
    return verdicts(combine(runs) if frame is None else frame, cpu_energy_reason(runs))


def explain_runs(dirs: Sequence[str | Path]) -> tuple[list[ModelVerdict], list[str]]:
    """The verdicts of the run folders `dirs`, and the folders' names."""
    runs = load_runs(dirs)
    return run_verdicts(runs), [r.name for r in runs]
