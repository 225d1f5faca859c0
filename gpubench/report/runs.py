"""Loading run folders for the report: rows, environment, batch analysis, and series labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.report import series
from gpubench.report.analysis import real
from gpubench.store import batch_analysis_record, env, suite_record
from gpubench.store.env import gpu_entry, named_device
from gpubench.store.results import load_results
from gpubench.store.row import COLUMNS, IDENTITY, TEXT
from gpubench.store.wording import missing

# Flags: true, false or null, never arithmetic.
FLAGS = ("noisy", "busy", "warmup_steady", "scaling_efficiency_noisy", "oversubscribed")
# Columns the report does arithmetic on; a column of nulls reads as float NaN after coercion.
NUMERIC = [c for c in COLUMNS if c not in IDENTITY and c not in TEXT and c not in FLAGS] + [
    "batch_size",
    "seed",
]


@dataclass(frozen=True)
class Run:
    """One run folder: its rows, its env.json ({} when absent), any batch analysis, and the
    suite it was run with."""

    name: str
    path: Path
    frame: pd.DataFrame
    env: dict[str, Any] = field(default_factory=dict)
    analysis: list[dict[str, Any]] = field(default_factory=list)
    suite: dict[str, Any] = field(default_factory=dict)  # suite.json ({} when absent)

    @property
    def suite_name(self) -> str | None:
        """The suite's name (suite.json "name"), or None."""
        name = self.suite.get("name")
        return str(name) if name else None

    @property
    def commit(self) -> str | None:
        """The gpubench git commit the run was made with (env.json), or None."""
        return (self.env.get("gpubench") or {}).get("git_commit")

    def cpu_threads(self) -> int | None:
        """The torch thread count the CPU points ran with (rows first, then env.json)."""
        cpu = self.frame[self.frame["device"] == "cpu"]["torch_threads"].dropna()
        if len(cpu):
            return int(cpu.iloc[0])
        threads = self.env.get("cpu", {}).get("torch_threads")
        return int(threads) if isinstance(threads, int) else None

    def machines(self) -> list[dict[str, Any]]:
        """The environment of every machine of this run: env.json's `machines` in a merged
        folder, else env.json itself ([] where the folder has none)."""
        listed = self.env.get("machines")
        if isinstance(listed, list):
            return [m for m in listed if isinstance(m, dict)]
        return [self.env] if self.env else []

    def machine(self, host: str | None = None) -> dict[str, Any]:
        """The environment of the machine named `host` (a row's own); env.json itself for no
        host or a host it does not list."""
        if host:
            for m in self.machines():
                if m.get("hostname") == host:
                    return m
        return self.env

    def device_name(self, device: str, host: str | None = None, name: str | None = None) -> str:
        """A readable device name, 'cuda (NVIDIA H100 80GB HBM3)' or 'cpu (AMD EPYC)': a row's
        own `name` (its `device_name`), else what its machine's env.json calls `device` (the
        CPU model, or the GPU of that index), else `device`."""
        name = name or named_device(self.machine(host), device)
        return f"{device} ({name})" if name else device

    def device_memory_bytes(
        self, device: str, host: str | None = None, name: str | None = None
    ) -> int | None:
        """The memory in bytes of a GPU row's device from env.json: the GPU of that index (and
        of the row's GPU `name`, where it has one) on the row's own machine first, else on any
        machine of the run (one model, one capacity). None for the CPU or where none matches."""
        for captured in (self.machine(host), *self.machines()):
            gpu = gpu_entry(captured, device, name or None)
            if gpu is not None:
                value = gpu.get("memory_bytes")
                return int(value) if isinstance(value, int | float) and value > 0 else None
        return None

    def row_devices(self) -> list[tuple[str, str | None, str | None]]:
        """(device, host, device_name) of each row, None where the row has none."""
        f = self.frame
        return [
            (str(d), _text(h), _text(n))
            for d, h, n in zip(f["device"], f["host"], f["device_name"], strict=True)
        ]

    def device_names(self) -> list[str]:
        """Every device this run's rows ran on, each named from its own machine, sorted."""
        return sorted({self.device_name(*d) for d in self.row_devices()})

    def hosts(self) -> list[str]:
        """The machines this run's rows ran on by hostname: the rows' own `host`, else those
        env.json names; sorted."""
        named = {h for _, h, _ in self.row_devices() if h}
        if not named:
            named = {str(m["hostname"]) for m in self.machines() if m.get("hostname")}
        return sorted(named)


def _text(value: Any) -> str | None:
    """A text cell as str, None where it is missing (None or NaN)."""
    return None if missing(value) else str(value)


def capacities(runs: Sequence[Run]) -> dict[tuple[str, str], int | None]:
    """(run name, device name as combine writes it) to the device's memory in bytes (None for
    the CPU or where env.json has no entry): each row's capacity from its own machine, so a
    merged folder's A100 rows are fitted against an A100's memory, not the first folder's."""
    return {
        (r.name, r.device_name(*d)): r.device_memory_bytes(*d)
        for r in runs
        for d in r.row_devices()
    }


def load_run(path: str | Path) -> Run:
    """Read one run folder. Its rows are required; env.json, batch_analysis.json and
    suite.json are not (each read by its store module: a corrupt one is a one-line error)."""
    path = Path(path)
    frame = load_results(path)
    captured = env.read(path, skip_odd=True)
    analysis = batch_analysis_record.read(path)
    suite = suite_record.read(path, skip_odd=True)
    return Run(
        path.resolve().name or str(path),
        path,
        frame,
        captured,
        list(analysis.groups) if analysis is not None else [],
        suite if suite is not None else {},
    )


def recommended_batch(entry: dict[str, Any]) -> int | None:
    """The recommended batch size of one batch-analysis entry, whatever its key is called."""
    for key in ("recommended_batch_size", "recommended_batch", "recommended"):
        value = entry.get(key)
        if real(value) and value > 0:
            return int(value)
    return None


def load_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Every run folder named; two folders with the same name get their parent's name too."""
    runs = [load_run(p) for p in paths]
    names = [r.name for r in runs]
    twice = [names.count(r.name) > 1 for r in runs]
    return [
        replace(r, name=f"{r.path.resolve().parent.name}/{r.name}") if t else r
        for r, t in zip(runs, twice, strict=True)
    ]


def combine(runs: Sequence[Run]) -> pd.DataFrame:
    """All rows of all runs, numeric columns as floats, plus `run`, `device_name` (as
    Run.device_name writes it), `series` (report.series), `series_run` (the run where its device
    name is in more than one run) and `panel` (model/size: one panel of a chart)."""
    frames = []
    for r in runs:
        f = r.frame.copy()
        f["run"] = r.name
        # Each row's device from its own machine (issue 23: a merged folder holds several).
        f["device_name"] = [r.device_name(*d) for d in r.row_devices()]
        frames.append(f)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    for col in NUMERIC:
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    for col in ("model", "model_size", "device", "precision", "optimizer", "status", "data"):
        frame[col] = frame[col].astype(str)
    frame = frame.copy()  # one block per dtype again: the conversions above fragmented it
    # The same device name in two runs (two CPUs, two H100s) needs the run to tell lines apart.
    per_device = frame.groupby("device_name")["run"].nunique()
    shared = set(per_device[per_device > 1].index)
    frame["series_run"] = [
        run if dn in shared else None
        for dn, run in zip(frame["device_name"], frame["run"], strict=True)
    ]
    # A line of a chart is the whole identity but the batch size (issue 21): sizes, options,
    # seeds, threads, lr rules and layouts are never blended into one line.
    frame = series.assign(frame, "series", without=("batch_size",))
    frame["panel"] = series.panel(frame)
    return frame
