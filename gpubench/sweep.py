"""Expands a SweepSpec into points, drives the runner, and writes the run folder."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench import batch_science, convergence, env
from gpubench.probes import nvml
from gpubench.results import ResultStore, load_results
from gpubench.runner import InProcessRunner
from gpubench.spec import SweepSpec, validate

OnRow = Callable[[dict[str, Any], int, int], None]


def default_run_dir(root: str | Path = "results") -> Path:
    """results/<UTC timestamp>, with a suffix if that folder already exists."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    path = Path(root) / stamp
    n = 1
    while path.exists():
        n += 1
        path = Path(root) / f"{stamp}-{n}"
    return path


def run_sweep(
    spec: SweepSpec, out: str | Path | None = None, on_row: OnRow | None = None
) -> pd.DataFrame:
    """Measure every point of `spec` into run folder `out` (default results/<timestamp>) and
    return its rows. Each row is on disk before the next point starts."""
    validate(spec)
    if spec.mode == "convergence":
        convergence.prepare(spec)
    points = spec.points()
    store = ResultStore(out if out is not None else default_run_dir())
    store.write_json("suite.json", spec.to_dict())
    store.write_json(
        "env.json", env.capture(spec.resolved_devices(), spec.precisions, recalibrate=True)
    )
    nvml.warn_if_unavailable()  # once per sweep: the rows' NVML fields will be null
    runner = InProcessRunner()
    try:
        for i, point in enumerate(points):
            if spec.mode == "convergence":
                row = convergence.run_point(point, spec)
            else:
                row = runner.run(point, spec.budget)
            store.append(row)
            if on_row is not None:
                on_row(row, i + 1, len(points))
    finally:
        runner.close()
        store.write_csv()
    if spec.mode == "convergence":
        batch_science.write_analysis(store.dir)
    return load_results(store.dir)
