"""How far the machine itself moved between two stored runs: the drift that `compare` never calls
a regression (issue 52).

A stored row is one worker process at one time. Between two runs its figure carries, besides any
change of the code, (1) the machine's common shift, read from the reference probes each run
records in env.json (the calibration's matmul rates and copy bandwidth, taken at the run's
start and, since issue 52, again at its end: each probe's larger move, start against start or end
against end), and (2) how far one configuration moves apart from the rest, read from the runs'
confirm.json in two ways: across the runs, the spread of the re-measured configurations'
cross-run ratios around their common level (a change of the code that slows every configuration
alike moves that level, not the spread); within a run, the widest max/min over the fresh
processes that re-measured one candidate (the variation between processes that a single stored
row carries). The drift is (1) times the larger of the parts of (2): on the project's quiet 2-core
CPU it reads 48-166% between two default sweeps of one commit minutes apart
(results/20261128-cpu-five-sweeps-b), which their step times moved within.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.store import confirmations
from gpubench.store import env as env_store
from gpubench.store.results import RESULTS_FILE


@dataclass(frozen=True)
class Drift:
    """The machine's drift between two runs, each part a factor >= 1 (1.25: one side 25% above
    the other), None where the runs record nothing to read it from.

    - probe: the largest change of one reference probe (a device's matmul rate at one precision,
      or its copy bandwidth) that both runs recorded, at their starts or at their ends; probes:
      how many were matched; at_end: how many of them both runs recorded at their ends too
    - across: the spread of the cross-run ratios of the configurations both runs re-measured,
      around their median; matched: how many
    - within: the widest max/min of one candidate's figures over its rounds (fresh processes),
      in either run
    """

    probe: float | None
    probes: int
    across: float | None
    matched: int
    within: float | None
    at_end: int = 0

    @property
    def factor(self) -> float | None:
        """The drift as a factor >= 1: probe times the larger of across and within (a missing
        part counts 1); None where no part is known."""
        if self.probe is None and self.across is None and self.within is None:
            return None
        spread = max(self.across or 1.0, self.within or 1.0)
        return (self.probe or 1.0) * spread

    @property
    def pct(self) -> float | None:
        """factor as percent above 1 (a step time this much longer, or shorter by 1/factor)."""
        f = self.factor
        return None if f is None else (f - 1) * 100

    def describe(self) -> str:
        """What the drift rests on, in a line."""
        if self.factor is None:
            return (
                "the machines' drift is unknown (neither side records a reference probe or a "
                "re-measurement): the test sees only the spread within each run"
            )
        parts = [
            f"reference probes x{self.probe:.2f} ({self.probes} matched"
            + (f", {self.at_end} at both ends)" if self.at_end else ")")
            if self.probe is not None
            else "no reference probe in both",
            f"re-measured configurations apart x{self.across:.2f} ({self.matched} in both)"
            if self.across is not None
            else "no configuration re-measured in both",
            f"fresh processes apart up to x{self.within:.2f}"
            if self.within is not None
            else "no re-measurement rounds",
        ]
        return f"the machines' drift between the runs: {self.pct:.0f}% ({'; '.join(parts)})"


def _factor(a: float, b: float) -> float:
    return max(a / b, b / a)


def probes(captured: Mapping[str, Any], end: bool = False) -> dict[tuple[str, ...], float]:
    """A captured environment's (env.json's) reference probes, at the run's start (or with
    `end`, at its end: {} where it records none): ("matmul", device, precision) to its measured
    TFLOPS and ("bandwidth", device) to its GB/s; a probe without a positive figure is left
    out."""
    if end:
        captured = captured.get(env_store.END_PROBES) or {}
    out: dict[tuple[str, ...], float] = {}
    for device, peaks in (captured.get("matmul_peaks") or {}).items():
        for prec, peak in (peaks or {}).items():
            value = (peak or {}).get("measured_tflops") if isinstance(peak, dict) else None
            if isinstance(value, int | float) and value > 0:
                out[("matmul", device, prec)] = float(value)
    for device, bw in (captured.get("memory_bandwidth") or {}).items():
        value = bw.get("gb_per_s") if isinstance(bw, dict) else None
        if isinstance(value, int | float) and value > 0:
            out[("bandwidth", device)] = float(value)
    return out


def _candidate_key(candidate: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in candidate.items()))


def remeasured(parts: Sequence[Mapping[str, Any]]) -> tuple[dict[Any, float], list[float]]:
    """From confirm.json's partitions: each re-measured candidate's median figure (samples/s)
    over its rounds, and per candidate with two or more rounds its max/min."""
    medians: dict[Any, float] = {}
    spreads: list[float] = []
    for part in parts:
        for cand, figures in zip(
            part.get("candidates") or [], part.get("samples_per_s") or [], strict=False
        ):
            xs = [float(x) for x in figures if isinstance(x, int | float) and x > 0]
            if xs:
                medians[_candidate_key(cand)] = statistics.median(xs)
            if len(xs) >= 2:
                spreads.append(max(xs) / min(xs))
    return medians, spreads


def _folder(path: Path) -> Path | None:
    """The run folder that `path` (a folder or its results file) names; None for anything else."""
    if path.is_file() and path.name == RESULTS_FILE:
        return path.parent
    return path if path.is_dir() else None


def between(base: str | Path, new: str | Path) -> Drift:
    """The drift between run folders `base` and `new` (each a folder or its results file; a
    pytest-benchmark JSON file records nothing: its parts are None)."""
    sides = [_folder(Path(p)) for p in (base, new)]
    b_env, n_env = (env_store.read(p) if p else {} for p in sides)
    moves: dict[tuple[str, ...], float] = {}  # each probe's larger move: starts, or ends
    at_end = 0
    for end in (False, True):
        b_probes, n_probes = probes(b_env, end), probes(n_env, end)
        both = [k for k in b_probes if k in n_probes]
        at_end += len(both) if end else 0
        for k in both:
            moves[k] = max(moves.get(k, 1.0), _factor(b_probes[k], n_probes[k]))
    probe = max(moves.values(), default=None)
    b_parts, n_parts = ((confirmations.partitions(p) or []) if p else [] for p in sides)
    (b_med, b_spread), (n_med, n_spread) = remeasured(b_parts), remeasured(n_parts)
    ratios = [n_med[k] / b_med[k] for k in b_med if k in n_med]
    across = None
    if len(ratios) >= 2:
        level = statistics.median(ratios)
        across = max(_factor(r, level) for r in ratios)
    within = max(b_spread + n_spread, default=None)
    return Drift(probe, len(moves), across, len(ratios), within, at_end)
