"""What holds a training step back, from the evidence its row carries.

The rules, first match wins (thresholds below; the row's `bottleneck_evidence` says which
numbers held):

1. **input**: the batches come from the host (`data = host`) and copies take at least
   INPUT_COPY_SHARE of the device's busy time.
2. **launch** (launch/host-bound): the device is busy for less than LAUNCH_BUSY of the profiled
   step; the rest is the device waiting on Python, the autograd engine and kernel launches.
3. **compute**: achieved TFLOP/s is at least COMPUTE_ROOF of the measured matmul roof.
4. **memory**: the step's arithmetic intensity (FLOPs over the minimum bytes it moves) is under
   the ridge point (matmul roof over measured bandwidth), or categories of memory-bound work
   (norms, elementwise, loss and reductions, the optimizer, copies) hold at least MEMORY_SHARE
   of the busy time.
5. otherwise **compute**: matrix products hold most of the busy time, though under the roof
   (small or badly shaped products).

Without a profile (profiling off) rules 1, 2, 5 and the category half of 4 cannot be tested; a
row they would decide, or without FLOPs or a roof, gets no verdict (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpubench.probes.profile import MEMORY_CATEGORIES

LAUNCH_BUSY = 0.5
INPUT_COPY_SHARE = 0.3
COMPUTE_ROOF = 0.5
MEMORY_SHARE = 0.5

BOTTLENECKS = ("launch", "memory", "compute", "input")


@dataclass(frozen=True)
class Bottleneck:
    """A classification and the evidence for it, as one line of numbers."""

    kind: str
    evidence: str


def _num(row: dict[str, Any], key: str) -> float | None:
    v = row.get(key)
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _shares(row: dict[str, Any]) -> dict[str, float]:
    """Each category's share of the busy time, from the row's profile ({} without one)."""
    prof = row.get("profile")
    if not isinstance(prof, dict) or not isinstance(prof.get("category_s"), dict):
        return {}
    cats = {k: float(v) for k, v in prof["category_s"].items() if v is not None}
    total = sum(cats.values())
    return {k: v / total for k, v in cats.items()} if total > 0 else {}


def ridge(row: dict[str, Any]) -> float | None:
    """The ridge point in FLOP per byte: measured matmul roof over measured bandwidth."""
    peak, bw = _num(row, "peak_tflops"), _num(row, "peak_bandwidth_gb_per_s")
    if peak is None or bw is None or bw <= 0:
        return None
    return peak * 1e12 / (bw * 1e9)


def classify(row: dict[str, Any]) -> Bottleneck | None:
    """The bottleneck of one ok row (see the module's rules), None where the row lacks the
    evidence."""
    if row.get("status") != "ok":
        return None
    busy = _num(row, "busy_fraction")
    shares = _shares(row)
    tflops, peak = _num(row, "tflops"), _num(row, "peak_tflops")
    intensity, ridge_point = _num(row, "intensity_flop_per_byte"), ridge(row)
    copy = shares.get("copy", 0.0)
    if row.get("data") == "host" and shares and copy >= INPUT_COPY_SHARE:
        return Bottleneck("input", f"copies hold {copy:.0%} of the busy time (host data)")
    if busy is not None and busy < LAUNCH_BUSY:
        return Bottleneck("launch", f"device busy {busy:.0%} of the step")
    if tflops is None or peak is None or peak <= 0:
        return None
    roof = tflops / peak
    at_roof = f"{tflops:.3g} TFLOP/s = {roof:.0%} of the {peak:.3g} TFLOP/s roof"
    if roof > 1:  # a point cannot beat the roof: the calibration ran slow (a busy machine?)
        at_roof += " (above it: the roof was measured low, on a busy machine?)"
    busy_text = f"busy {busy:.0%}; " if busy is not None else ""
    if roof >= COMPUTE_ROOF:
        return Bottleneck("compute", busy_text + at_roof)
    memory_share = sum(shares.get(c, 0.0) for c in MEMORY_CATEGORIES)
    if intensity is not None and ridge_point is not None and intensity < ridge_point:
        return Bottleneck(
            "memory",
            busy_text + f"intensity {intensity:.3g} FLOP/B < ridge {ridge_point:.3g}; {at_roof}",
        )
    if shares and memory_share >= MEMORY_SHARE:
        return Bottleneck(
            "memory", busy_text + f"memory-bound kernels {memory_share:.0%} of busy time; {at_roof}"
        )
    if not shares:
        return None  # above the ridge but under the roof, no profile: what holds it is unknown
    return Bottleneck(
        "compute",
        busy_text
        + f"products {1 - memory_share:.0%} of busy time, though under the roof: "
        + at_roof,
    )


def classified(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with `bottleneck` and `bottleneck_evidence` set (None where it gets no verdict)."""
    b = classify(row)
    return row | {
        "bottleneck": None if b is None else b.kind,
        "bottleneck_evidence": None if b is None else b.evidence,
    }
