"""What holds a training step back, from the evidence its row carries (and, where given, the
rows of its batch-size series). A label earns its name (DESIGN.md 4): memory-bound only at a
real fraction of the bandwidth roof, compute-bound only at a real fraction of the matmul roof,
overhead (launch/host) where the step is far under both or does not grow with the batch. The
rules, first match wins (thresholds below; the row's `bottleneck_evidence` quotes the numbers):

0. **input** (issue 31): a loader row whose steps waited at least INPUT_WAIT_SHARE of their time
   for their batches (science.input_bound).
1. **input**: host data (`data = host`) and copies hold at least INPUT_COPY_SHARE of busy time.
2. **launch**: the device is busy under LAUNCH_BUSY of the *unprofiled* median step (the
   profiler's overhead inflates the profiled step and must not decide); busy time above the
   step counts as 1.0, and the evidence says so.
3. **launch** where the series shows a fixed per-step cost that is overhead: from the series'
   smallest batch to this row's the batch grew k >= FLAT_BATCH times and the step time r
   times; read as a fixed cost F plus a cost w per sample, F holds (k - r) / (r (k - 1)) of
   this row's step; at FIXED_SHARE or more, and the smallest batch's step overhead-bound by
   itself (rules 2 or 4), the step is overhead-bound whatever the roofs say (on a GPU the work
   runs under the host's fixed cost: the step does not grow until the work outlasts it). A
   fixed cost that is device work (an optimizer's update, at a real fraction of a roof at the
   smallest batch) is no overhead: the roofs decide.
4. **launch** where the step is under OVERHEAD_ROOF of both the matmul and the bandwidth roof,
   whatever the busy time says: on the CPU an operator's self time includes the dispatcher's
   cost, so "busy" cannot see host overhead there (DESIGN.md, 4).
5. **compute** or **memory**: the larger of the two roof fractions is at least BOUND_ROOF (a
   third of that roof) and over the other by more than the ridge band (ridge_band(): the
   factor the ratio of the two fractions, which is the intensity over the ridge, is uncertain
   by between two calibrations of one machine).
6. **mixed** otherwise: within the band (both roofs bind alike), or under a third of both
   roofs yet over OVERHEAD_ROOF of one (no one roof binds; the profile's split is quoted).

Without a byte count (no bandwidth fraction) a row at least BOUND_ROOF of the matmul roof is
compute-bound and any other gets no verdict; without FLOPs or a matmul roof rules 3-6 are not
tested: no verdict (None) unless rules 0-2 held.

The band: the ratio of the two fractions moves with the ridge (matmul roof over bandwidth),
the FLOP count and the byte count. RIDGE_SPREAD is three calibrations of one H100 in a day
(bf16 ridge 261.6-266.4 FLOP/B); CPU_RIDGE_SPREAD the bandwidth calibrations of the 2-core
CPU at one thread count across eight published runs (18.1-55.3 GB/s at 2 threads, x3.05;
21.2-25.7 at 1), its matmul roof steadier; FLOP_SPREAD the FLOP counter against the
Transformer's analytic count; INTENSITY_SPREAD one point's byte count between runs. A
calibration within the spread moves a row across at most the band, so one operating point can
read "memory" and "mixed", or "mixed" and "compute", never "memory" and "compute"; and as
OVERHEAD_ROOF is under BOUND_ROOF by a factor (6.7) wider than any spread, rule 4 never reads
"launch" where another calibration reads "memory" or "compute". Rule 3 asks whether the
smallest batch is overhead-bound, a threshold a calibration could move across where that step
sits near OVERHEAD_ROOF; no published row does (tests/test_bottleneck_labels.py recalibrates
every one by the spread).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpubench.science.input_bound import input_evidence
from gpubench.science.partition import figure, series
from gpubench.store.wording import milliseconds, number, percent, times

LAUNCH_BUSY = 0.5
INPUT_COPY_SHARE = 0.3
# A real fraction of a roof: a step at a third of it is held by what that roof measures.
BOUND_ROOF = 1 / 3
# "A few percent" of both roofs: a step this far under the matmul roof and the bandwidth roof
# spends its time on neither arithmetic nor memory traffic.
OVERHEAD_ROOF = 0.05
# A fixed per-step cost (rule 3): over a batch grown FLAT_BATCH times or more, the fixed part
# holds FIXED_SHARE of the step or more (the step grew at most x1.25 at k = 4, x1.5 as k grows).
FLAT_BATCH = 4
FIXED_SHARE = 2 / 3
PRODUCT_CATEGORIES = ("matmul", "conv", "attention")
# What the intensity over the ridge is uncertain by (the module's docstring: "The band").
RIDGE_SPREAD = 0.019
CPU_RIDGE_SPREAD = 2.05
FLOP_SPREAD = 0.020
INTENSITY_SPREAD = 0.002
MIXED_MARGIN = RIDGE_SPREAD + FLOP_SPREAD + INTENSITY_SPREAD
CPU_MIXED_MARGIN = CPU_RIDGE_SPREAD + FLOP_SPREAD + INTENSITY_SPREAD

# Each kind, as the verdict says it.
BOTTLENECKS = {
    "launch": "launch/host-bound: a fixed per-step cost (Python, autograd, kernel launches) "
    "sets the step time, not the device's arithmetic or memory",
    "memory": "memory-bound: moving bytes, not arithmetic, sets the step time",
    "compute": "compute-bound: arithmetic sets the step time",
    "mixed": "mixed: no one roof binds (both alike near the ridge, or the step runs well "
    "under both)",
    "input": "input-bound: the step waits on its batches (the loader, or copies from the host)",
}


@dataclass(frozen=True)
class Bottleneck:
    """A classification and the evidence for it, as one line of numbers."""

    kind: str
    evidence: str


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
    peak, bw = figure(row.get("peak_tflops")), figure(row.get("peak_bandwidth_gb_per_s"))
    if peak is None or bw is None or bw <= 0:
        return None
    return peak * 1e12 / (bw * 1e9)


def ridge_band(device: str | None) -> float:
    """The margin (a factor 1 + it) the two roof fractions must differ by for one to bind:
    MIXED_MARGIN on a GPU, CPU_MIXED_MARGIN on the CPU (whose calibrations spread wider)."""
    return CPU_MIXED_MARGIN if device == "cpu" else MIXED_MARGIN


def busy_fraction(row: dict[str, Any]) -> tuple[float, bool] | None:
    """The share of the median step (`step_time_s`, unprofiled) the device is busy: the
    profile's busy seconds per step over it, capped at 1.0, and whether the cap applied (busy
    time above the step: the profiler slowed the operators it timed). None without a profile.
    A row without the profile's busy seconds falls back to its `busy_fraction` column. The
    verdict's "device busy" and the breakdown chart's busy share are this figure."""
    prof = row.get("profile")
    step = figure(row.get("step_time_s"))
    if isinstance(prof, dict) and step is not None and step > 0:
        busy_s = figure(prof.get("busy_s"))
        if busy_s is not None:
            return min(busy_s / step, 1.0), busy_s > step
    busy = figure(row.get("busy_fraction"))
    return None if busy is None else (min(busy, 1.0), busy > 1.0)


@dataclass(frozen=True)
class Growth:
    """How the step time grew from the smallest batch of a row's series to the row's batch."""

    low: dict[str, Any]
    row: dict[str, Any]

    @property
    def batch_ratio(self) -> float:
        return int(self.row["batch_size"]) / int(self.low["batch_size"])

    @property
    def time_ratio(self) -> float:
        return float(self.row["step_time_s"]) / float(self.low["step_time_s"])

    @property
    def fixed_share(self) -> float:
        """The share of the row's step a fixed per-step cost holds, the step read as a fixed
        cost plus a cost per sample (the module's rule 3), within 0-1."""
        k, r = self.batch_ratio, self.time_ratio
        return min(max((k - r) / (r * (k - 1)), 0.0), 1.0)

    @property
    def flat(self) -> bool:
        """A fixed per-step cost sets the step (the module's rule 3)."""
        return self.batch_ratio >= FLAT_BATCH and self.fixed_share >= FIXED_SHARE

    def text(self) -> str:
        """'step time 2.39 -> 2.24 ms (x0.94) from B=4 to B=65536' and what it means."""
        said = (
            f"step time {number(float(self.low['step_time_s']) * 1e3)} -> "
            f"{milliseconds(float(self.row['step_time_s']))} ({times(self.time_ratio)}) from "
            f"B={int(self.low['batch_size'])} to B={int(self.row['batch_size'])}"
        )
        share = (
            f"about {percent(self.fixed_share)} of the step, as a fixed cost plus one per sample"
        )
        if self.flat:
            return f"{said}: a fixed per-step cost ({share})"
        batch = f"batch x{number(self.batch_ratio)}"  # an exact count: x16, x2,048
        if self.fixed_share >= 0.05:
            return f"{said} ({batch}): a fixed per-step cost holds {share}"
        return f"{said} ({batch}): the work grows with the batch"


def growth(row: dict[str, Any], records: list[dict[str, Any]] | None) -> Growth | None:
    """The step time's growth from the smallest batch of `row`'s series among `records` (its
    identity but batch and seed; ok rows with a step time) to `row`; None where `row` is the
    smallest or no records are given."""
    if not records or figure(row.get("step_time_s")) is None:
        return None
    rows = [
        r
        for r in series(row, records)
        if r.get("status") == "ok" and (figure(r.get("step_time_s")) or 0) > 0
    ]
    smaller = [r for r in rows if int(r["batch_size"]) < int(row["batch_size"])]
    if not smaller:
        return None
    return Growth(min(smaller, key=lambda r: int(r["batch_size"])), row)


def classify(row: dict[str, Any], records: list[dict[str, Any]] | None = None) -> Bottleneck | None:
    """The bottleneck of one ok row (see the module's rules), None where the row lacks the
    evidence. `records`: rows among which the row's batch-size series is found (rule 3 and
    the growth quoted as evidence); without them rule 3 is not tested."""
    if row.get("status") != "ok":
        return None
    waited = input_evidence(row)  # issue 31: the loader's measured wait for its batches
    if waited is not None:
        return Bottleneck("input", waited)
    measured_busy = busy_fraction(row)
    busy = None if measured_busy is None else measured_busy[0]
    shares = _shares(row)
    copy = shares.get("copy", 0.0)
    if row.get("data") == "host" and shares and copy >= INPUT_COPY_SHARE:
        return Bottleneck("input", f"copies hold {percent(copy)} of the busy time (host data)")
    busy_text = ""
    if measured_busy is not None:
        busy_text = f"device busy {percent(busy)} of the median step"
        if measured_busy[1]:
            busy_text += " (capped: the profiled busy time exceeds the unprofiled step)"
    grown = growth(row, records)
    grown_text = "" if grown is None else grown.text()
    tflops, peak = figure(row.get("tflops")), figure(row.get("peak_tflops"))
    roof = None if tflops is None or peak is None or peak <= 0 else tflops / peak
    achieved, bw = figure(row.get("achieved_gb_per_s")), figure(row.get("peak_bandwidth_gb_per_s"))
    bw_roof = None if achieved is None or bw is None or bw <= 0 else achieved / bw
    roofs = _roofs_text(roof, bw_roof, row)
    if busy is not None and busy < LAUNCH_BUSY:
        return Bottleneck("launch", _join(busy_text, grown_text, roofs))
    if roof is None:
        return None
    if grown is not None and grown.flat and _overhead(grown.low):
        at = f"B={int(grown.low['batch_size'])}"
        return Bottleneck(
            "launch", _join(f"{grown_text}, overhead-bound at {at}", busy_text, roofs)
        )
    if roof is not None and bw_roof is not None and max(roof, bw_roof) < OVERHEAD_ROOF:
        return Bottleneck(
            "launch",
            f"{roofs}: far under both, overhead (launch/host) holds the step"
            + (f", whatever the busy time says ({busy_text})" if busy_text else "")
            + (f"; {grown_text}" if grown_text else ""),
        )
    if bw_roof is None:  # no byte count: the matmul roof alone can speak
        if roof >= BOUND_ROOF:
            return Bottleneck("compute", _join(busy_text, roofs, grown_text))
        return None
    band = ridge_band(row.get("device"))
    high, low = max(roof, bw_roof), min(roof, bw_roof)
    kind = "compute" if roof >= bw_roof else "memory"
    if high >= BOUND_ROOF and (low <= 0 or high / low > 1 + band):
        return Bottleneck(kind, _join(busy_text, roofs, _intensity_text(row), grown_text))
    if high >= BOUND_ROOF:
        intensity = _intensity_text(row)
        why = (
            f"within {times(1 + band)} of each other, the band two calibrations of one machine "
            f"can move them by{' (' + intensity + ')' if intensity else ''}: which roof binds "
            "cannot be told, both may"
        )
    else:
        why = (
            f"under {percent(BOUND_ROOF)} of both roofs, over {percent(OVERHEAD_ROOF)} of one: "
            "no one roof binds" + _work_split(shares)
        )
    return Bottleneck("mixed", _join(busy_text, f"{roofs}, {why}", grown_text))


def _overhead(low: dict[str, Any]) -> bool:
    """Whether the smallest batch's step is overhead-bound by itself (rules 2 and 4): then the
    fixed per-step cost is overhead, not work that does not grow with the batch (an
    optimizer's update moves the same bytes at every batch: memory-bound work)."""
    judged = classify(low)
    return judged is not None and judged.kind == "launch"


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _roofs_text(roof: float | None, bw_roof: float | None, row: dict[str, Any]) -> str:
    """'12% of the matmul roof (0.5 of 4.1 TFLOP/s) and 49% of the bandwidth roof (...)'."""
    parts = []
    if roof is not None:
        text = (
            f"{_share(roof)} of the matmul roof ({number(float(row['tflops']))} of "
            f"{number(float(row['peak_tflops']))} TFLOP/s"
        )
        if roof > 1:  # a point cannot beat the roof: the calibration ran slow
            text += "; above it: the roof was measured low, on a busy machine?"
        parts.append(text + ")")
    if bw_roof is not None:
        parts.append(
            f"{_share(bw_roof)} of the bandwidth roof ({number(float(row['achieved_gb_per_s']))}"
            f" of {number(float(row['peak_bandwidth_gb_per_s']))} GB/s)"
        )
    return " and ".join(parts)


def _share(fraction: float) -> str:
    """A roof fraction as a percentage (store.wording.percent)."""
    return percent(fraction)


def _intensity_text(row: dict[str, Any]) -> str:
    intensity, ridge_point = figure(row.get("intensity_flop_per_byte")), ridge(row)
    if intensity is None or ridge_point is None:
        return ""
    side = "<" if intensity < ridge_point else ">="
    return f"intensity {number(intensity)} FLOP/B {side} ridge {number(ridge_point)}"


def _work_split(shares: dict[str, float]) -> str:
    """', the busy time: products 60%, memory-bound work 30%' from the profile ('' none)."""
    if not shares:
        return ""
    from gpubench.probes.profile import MEMORY_CATEGORIES  # torch's profiler: read with a profile

    groups = {
        "products": sum(shares.get(c, 0.0) for c in PRODUCT_CATEGORIES),
        "memory-bound work": sum(shares.get(c, 0.0) for c in MEMORY_CATEGORIES),
        **{c: shares.get(c, 0.0) for c in ("collective", "other")},
    }
    said = ", ".join(f"{g} {percent(v)}" for g, v in groups.items() if v > 0)
    return f" (the busy time: {said})" if said else ""


def classified(row: dict[str, Any], records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """`row` with `bottleneck` and `bottleneck_evidence` set (None where it gets no verdict);
    `records` as classify() takes them."""
    b = classify(row, records)
    return row | {
        "bottleneck": None if b is None else b.kind,
        "bottleneck_evidence": None if b is None else b.evidence,
    }
