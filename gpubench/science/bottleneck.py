"""What holds a training step back, from the evidence its row carries. The rules, first match
wins (thresholds below; the row's `bottleneck_evidence` says which numbers held):

0. **input** (issue 31): a loader row whose steps waited at least INPUT_WAIT_SHARE of their time
   for their batches (science.input_bound).
1. **input**: host data (`data = host`) and copies hold at least INPUT_COPY_SHARE of busy time.
2. **launch**: the device is busy under LAUNCH_BUSY of the *unprofiled* median step (the
   profiler's overhead inflates the profiled step and must not decide); busy time above the
   step counts as 1.0, and the evidence says so.
3. **launch** too where the step is under OVERHEAD_ROOF of both the matmul and the bandwidth
   roof, whatever the busy time says: on the CPU an operator's self time includes the
   dispatcher's cost, so "busy" cannot see host overhead there (DESIGN.md, 4).
4. **mixed**: the arithmetic intensity (FLOPs over the minimum bytes moved) is within a factor
   1 + MIXED_MARGIN of the ridge (matmul roof over bandwidth) either side: which roof binds is
   decided by less than the measurement can tell. Both kinds of lever apply.
5. **memory**: the intensity is under the ridge by more than the margin. The byte count is a
   lower bound, so the true intensity is lower still: this side is safe.
6. **compute**: achieved TFLOP/s is at least COMPUTE_ROOF of the measured matmul roof.
7. **memory**: memory-bound categories (norms, elementwise, loss, reductions, optimizer,
   copies) hold at least MEMORY_SHARE of the busy time.
8. **compute** where the products (PRODUCT_CATEGORIES) hold more of the busy time than any other
   group (memory-bound work, collectives, other), though under the roof; else no verdict.

Without a profile rules 1, 2, 7 and 8 cannot be tested, without a byte count rules 4 and 5; a
row they would decide, or without FLOPs or a roof, gets no verdict (None).

The margin is what the intensity over the ridge is uncertain by, each part as measured on an
H100 (tests/data/h100), where a hard threshold read one operating point "compute" at 50.2% of
the roof in one run and "memory" at 49.8% in another: RIDGE_SPREAD, three calibrations of one
H100 in a day (bf16 ridge 261.6-266.4 FLOP/B); FLOP_SPREAD, the FLOP counter against the
Transformer's analytic count; INTENSITY_SPREAD, one point's byte count between runs. A
run-to-run change moves a row across at most half of the band, so one operating point can read
"memory" and "mixed", or "mixed" and "compute", but never "memory" and "compute".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpubench.probes.profile import MEMORY_CATEGORIES
from gpubench.science.input_bound import input_evidence

LAUNCH_BUSY = 0.5
INPUT_COPY_SHARE = 0.3
COMPUTE_ROOF = 0.5
MEMORY_SHARE = 0.5
# "A few percent" of both roofs: a step this far under the matmul roof and the bandwidth roof
# spends its time on neither arithmetic nor memory traffic.
OVERHEAD_ROOF = 0.05
PRODUCT_CATEGORIES = ("matmul", "conv", "attention")
# What the intensity over the ridge is uncertain by (the module's docstring: "The margin").
RIDGE_SPREAD = 0.019
FLOP_SPREAD = 0.020
INTENSITY_SPREAD = 0.002
MIXED_MARGIN = RIDGE_SPREAD + FLOP_SPREAD + INTENSITY_SPREAD

# Each kind, as the verdict says it.
BOTTLENECKS = {
    "launch": "launch/host-bound: the device waits on Python, autograd and kernel launches",
    "memory": "memory-bound: moving bytes, not arithmetic, sets the step time",
    "compute": "compute-bound: arithmetic sets the step time",
    "mixed": "mixed: near the ridge, the matmul and bandwidth roofs bind alike",
    "input": "input-bound: the step waits on its batches (the loader, or copies from the host)",
}


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


def near_ridge(intensity: float, ridge_point: float) -> int:
    """-1 where `intensity` is under the ridge by more than MIXED_MARGIN (a factor of
    1 + MIXED_MARGIN), +1 where it is over it by more, 0 within the band (both ends in it)."""
    if ridge_point <= 0:
        raise ValueError(f"a ridge point must be positive, not {ridge_point}")
    ratio = intensity / ridge_point
    if ratio < 1 / (1 + MIXED_MARGIN):
        return -1
    return 1 if ratio > 1 + MIXED_MARGIN else 0


def busy_fraction(row: dict[str, Any]) -> tuple[float, bool] | None:
    """The share of the median step (`step_time_s`, unprofiled) the device is busy: the
    profile's busy seconds per step over it, capped at 1.0, and whether the cap applied (busy
    time above the step: the profiler slowed the operators it timed). None without a profile.
    A row without the profile's busy seconds falls back to its `busy_fraction` column."""
    prof = row.get("profile")
    step = _num(row, "step_time_s")
    if isinstance(prof, dict) and step is not None and step > 0:
        busy_s = _num(prof, "busy_s")
        if busy_s is not None:
            return min(busy_s / step, 1.0), busy_s > step
    busy = _num(row, "busy_fraction")
    return None if busy is None else (min(busy, 1.0), busy > 1.0)


def classify(row: dict[str, Any]) -> Bottleneck | None:
    """The bottleneck of one ok row (see the module's rules), None where the row lacks the
    evidence."""
    if row.get("status") != "ok":
        return None
    waited = input_evidence(row)  # issue 31: the loader's measured wait for its batches
    if waited is not None:
        return Bottleneck("input", waited)
    measured_busy = busy_fraction(row)
    busy = None if measured_busy is None else measured_busy[0]
    shares = _shares(row)
    tflops, peak = _num(row, "tflops"), _num(row, "peak_tflops")
    intensity, ridge_point = _num(row, "intensity_flop_per_byte"), ridge(row)
    copy = shares.get("copy", 0.0)
    if row.get("data") == "host" and shares and copy >= INPUT_COPY_SHARE:
        return Bottleneck("input", f"copies hold {copy:.0%} of the busy time (host data)")
    busy_text = ""
    if measured_busy is not None:
        busy_text = f"device busy {busy:.0%} of the median step"
        if measured_busy[1]:
            busy_text += " (capped: the profiled busy time exceeds the unprofiled step)"
    if busy is not None and busy < LAUNCH_BUSY:
        return Bottleneck("launch", busy_text)
    roof = None if tflops is None or peak is None or peak <= 0 else tflops / peak
    achieved, bw = _num(row, "achieved_gb_per_s"), _num(row, "peak_bandwidth_gb_per_s")
    bw_roof = None if achieved is None or bw is None or bw <= 0 else achieved / bw
    if roof is not None and bw_roof is not None and max(roof, bw_roof) < OVERHEAD_ROOF:
        return Bottleneck(
            "launch",
            f"{roof:.1%} of the matmul roof and {bw_roof:.1%} of the bandwidth roof: "
            "overhead (launch/host) holds the step"
            + (f", whatever the busy time says ({busy_text})" if busy_text else ""),
        )
    if roof is None:
        return None
    assert tflops is not None and peak is not None
    at_roof = f"{tflops:.3g} TFLOP/s = {roof:.0%} of the {peak:.3g} TFLOP/s roof"
    if roof > 1:  # a point cannot beat the roof: the calibration ran slow (a busy machine?)
        at_roof += " (above it: the roof was measured low, on a busy machine?)"
    busy_text += "; " if busy_text else ""
    memory_share = sum(shares.get(c, 0.0) for c in MEMORY_CATEGORIES)
    if intensity is not None and ridge_point is not None and ridge_point > 0:
        side = near_ridge(intensity, ridge_point)
        at_bw = (
            ""
            if bw_roof is None
            else f"; {achieved:.3g} GB/s = {bw_roof:.0%} of the bandwidth roof"
        )
        if side == 0:
            return Bottleneck(
                "mixed",
                busy_text
                + f"intensity {intensity:.3g} FLOP/B within {MIXED_MARGIN:.0%} of the ridge "
                f"{ridge_point:.3g}: the matmul and bandwidth roofs bind alike; {at_roof}{at_bw}",
            )
        if side < 0:
            return Bottleneck(
                "memory",
                busy_text
                + f"intensity {intensity:.3g} FLOP/B < ridge {ridge_point:.3g}; {at_roof}{at_bw}",
            )
    if roof >= COMPUTE_ROOF:
        return Bottleneck("compute", busy_text + at_roof)
    if shares and memory_share >= MEMORY_SHARE:
        return Bottleneck(
            "memory", busy_text + f"memory-bound kernels {memory_share:.0%} of busy time; {at_roof}"
        )
    if not shares:
        return None  # above the ridge but under the roof, no profile: what holds it is unknown
    groups = {
        "products": sum(shares.get(c, 0.0) for c in PRODUCT_CATEGORIES),
        "memory-bound work": memory_share,
        **{c: shares.get(c, 0.0) for c in ("collective", "other")},
    }
    if max(groups, key=lambda g: groups[g]) != "products":
        return None  # collectives or other work hold more: none of the kinds names that
    rest = ", ".join(f"{g} {v:.0%}" for g, v in groups.items() if g != "products" and v > 0)
    return Bottleneck(
        "compute",
        busy_text
        + f"products {groups['products']:.0%} of busy time"
        + (f" ({rest})" if rest else "")
        + f", though under the roof: {at_roof}",
    )


def classified(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with `bottleneck` and `bottleneck_evidence` set (None where it gets no verdict)."""
    b = classify(row)
    return row | {
        "bottleneck": None if b is None else b.kind,
        "bottleneck_evidence": None if b is None else b.evidence,
    }
