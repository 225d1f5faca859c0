"""Loading run folders for the report: rows, environment, batch analysis, and series labels."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.report import series
from gpubench.store.results import ResultsError, load_results
from gpubench.store.row import COLUMNS, IDENTITY, TEXT

# Columns the report does arithmetic on; a column of nulls reads as float NaN after coercion.
NUMERIC = [
    c
    for c in COLUMNS
    if c not in IDENTITY and c not in TEXT and c not in ("noisy", "busy", "warmup_steady")  # flags
] + ["batch_size", "seed"]


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

    def device_name(self, device: str) -> str:
        """A readable device name: the CPU model or the GPU name from env.json, else `device`."""
        if device == "cpu":
            model = self.env.get("cpu", {}).get("model")
            return f"cpu ({model})" if model else "cpu"
        index = int(device.split(":")[1]) if ":" in device else 0
        for gpu in self.env.get("gpus") or []:
            if isinstance(gpu, dict) and gpu.get("index") == index and gpu.get("name"):
                return f"{device} ({gpu['name']})"
        return device

    def device_memory_bytes(self, device: str) -> int | None:
        """The device's memory capacity in bytes from env.json (GPUs only), or None."""
        if not device.startswith("cuda"):
            return None
        index = int(device.split(":")[1]) if ":" in device else 0
        for gpu in self.env.get("gpus") or []:
            if isinstance(gpu, dict) and gpu.get("index") == index:
                value = gpu.get("memory_bytes")
                return int(value) if isinstance(value, int | float) and value > 0 else None
        return None


def load_run(path: str | Path) -> Run:
    """Read one run folder. results.jsonl is required; env.json, batch_analysis.json and
    suite.json are not."""
    path = Path(path)
    frame = load_results(path)
    env = _read_json(path / "env.json")
    analysis = _analysis_entries(_read_json(path / "batch_analysis.json"))
    suite = _read_json(path / "suite.json")
    return Run(
        path.resolve().name or str(path),
        path,
        frame,
        env if isinstance(env, dict) else {},
        analysis,
        suite if isinstance(suite, dict) else {},
    )


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ResultsError(f"{path}: not valid JSON ({e})") from e


def _analysis_entries(obj: Any) -> list[dict[str, Any]]:
    """The per-(model, precision, optimizer, device) entries of batch_analysis.json: a list of
    objects, or an object holding such a list under any key, or a single object."""
    if isinstance(obj, list):
        return [e for e in obj if isinstance(e, dict)]
    if isinstance(obj, dict):
        lists = [v for v in obj.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
        if lists:
            return [e for lst in lists for e in lst if isinstance(e, dict)]
        return [obj] if recommended_batch(obj) is not None else []
    return []


def recommended_batch(entry: dict[str, Any]) -> int | None:
    """The recommended batch size of one batch-analysis entry, whatever its key is called."""
    for key in ("recommended_batch_size", "recommended_batch", "recommended"):
        value = entry.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def load_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Every run folder named; two folders with the same name get their parent's name too."""
    runs = [load_run(p) for p in paths]
    names = [r.name for r in runs]
    out = []
    for r in runs:
        name = r.name
        if names.count(name) > 1:
            name = f"{r.path.resolve().parent.name}/{name}"
        out.append(Run(name, r.path, r.frame, r.env, r.analysis, r.suite))
    return out


def combine(runs: Sequence[Run]) -> pd.DataFrame:
    """All rows of all runs, numeric columns as floats, plus `run`, `device_name`, `series` (the
    whole identity but the batch size: what one line of a chart stands for, see report.series),
    `series_run` (the run where its device name is in more than one run) and `panel` (model/size:
    what one panel of a chart shows)."""
    frames = []
    for r in runs:
        f = r.frame.copy()
        f["run"] = r.name
        f["device_name"] = [r.device_name(str(d)) for d in f["device"]]
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
    frame["panel"] = [
        model if ":" in model else f"{model}/{size}"
        for model, size in zip(frame["model"], frame["model_size"], strict=True)
    ]
    return frame
