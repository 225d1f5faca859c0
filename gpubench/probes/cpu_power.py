"""The CPU energy estimate where RAPL is missing (issue 32), as the Green Algorithms calculator
(Lannelongue et al. 2021) and the carbon trackers after it make one: the point's busy cores (its
process's CPU seconds per second of the measured window) times the CPU model's thermal design
power per core (cpu_tdp.toml, each entry sourced; a stated default for an unknown model).

The estimate is never a measurement: it has columns of its own (`cpu_energy_estimate_*`) and
its error stated as `ESTIMATE_ERROR_REL`: the per-core TDP of the table's CPUs spans a range
around the default, and the method's other assumptions (power in proportion to busy cores, the
idle and uncore power left out, turbo above TDP) cannot be checked without RAPL, so the one
error stated for every row is that range's widest distance from the default.
"""

from __future__ import annotations

import re
import time
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpubench.probes.probe import Probe

TABLE = Path(__file__).with_name("cpu_tdp.toml")


@dataclass(frozen=True)
class Tdp:
    """A CPU model's TDP per core (watts), the table entry it came from (None: the default),
    and the entry's source."""

    per_core_w: float
    model: str | None
    source: str


@dataclass(frozen=True)
class Table:
    """The parsed cpu_tdp.toml: the default per-core TDP, its source, and the models."""

    default_w: float
    default_source: str
    models: dict[str, Tdp]


@cache
def table(path: Path = TABLE) -> Table:
    """The TDP table at `path`; a malformed entry raises ValueError naming it."""
    data = tomllib.loads(path.read_text())
    default = data["default"]
    models: dict[str, Tdp] = {}
    for entry in data["cpu"]:
        tdp, cores = float(entry["tdp_w"]), int(entry["cores"])
        if tdp <= 0 or cores <= 0 or not entry.get("source"):
            raise ValueError(f"{path}: entry {entry!r} needs tdp_w > 0, cores > 0 and a source")
        models[entry["model"]] = Tdp(tdp / cores, entry["model"], entry["source"])
    return Table(float(default["tdp_per_core_w"]), str(default["source"]), models)


def error_rel(t: Table | None = None) -> float:
    """The estimate's stated relative error: the widest distance of any table entry's per-core
    TDP from the default, over the default (module docstring)."""
    t = t or table()
    return max(abs(m.per_core_w - t.default_w) for m in t.models.values()) / t.default_w


def _words(model: str) -> str:
    cleaned = re.sub(r"\((R|TM)\)|\bCPU\b|@.*$", " ", model, flags=re.IGNORECASE)
    return " " + " ".join(cleaned.split()).lower() + " "


def tdp_for(cpu_model: str | None, t: Table | None = None) -> Tdp:
    """The per-core TDP of `cpu_model` (the longest table entry found in it as whole words),
    else the table's default."""
    t = t or table()
    words = _words(cpu_model or "")
    found = [m for m in t.models.values() if m.model and _words(m.model) in words]
    if not found:
        return Tdp(t.default_w, None, t.default_source)
    return max(found, key=lambda m: len(m.model or ""))


@dataclass(frozen=True)
class Estimate:
    """The estimated joules of a window, the busy cores behind them, the TDP used."""

    joules: float
    busy_cores: float
    tdp: Tdp


def estimate(cpu_s: float, wall_s: float, tdp: Tdp) -> Estimate:
    """The energy of a window of `wall_s` seconds in which the process used `cpu_s` CPU
    seconds: busy cores (cpu_s / wall_s) x TDP per core x wall_s, i.e. cpu_s x TDP per core."""
    if wall_s <= 0 or cpu_s < 0:
        raise ValueError(f"need wall_s > 0 and cpu_s >= 0, got {wall_s}, {cpu_s}")
    return Estimate(cpu_s * tdp.per_core_w, cpu_s / wall_s, tdp)


class ProcessCpuTime(Probe):
    """The calling process's CPU seconds (all its threads) and the wall seconds of the block;
    child processes (the NVML sampler, compile workers) are not the point's compute."""

    def __init__(self) -> None:
        self.cpu_s: float | None = None
        self.wall_s: float | None = None
        self._start = (0.0, 0.0)

    def start(self) -> None:
        self._start = (time.process_time(), time.perf_counter())

    def stop(self, failed: bool = False) -> None:
        if failed:
            return
        self.cpu_s = time.process_time() - self._start[0]
        self.wall_s = time.perf_counter() - self._start[1]
