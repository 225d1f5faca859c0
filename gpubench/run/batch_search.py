"""Where max-batch probes next: a pure function of the probes so far, the memory limit and the
bracket they make, so that the search can be tested without a model.

Peak memory is about fixed + per-sample x batch. The first probe measures the fixed cost and
estimates a sample's; the search jumps to 60% of the memory left on that estimate, fits a line
through two probes, and jumps to just under the limit it predicts; then closes the bracket to
the resolution (8 samples or 2%, whichever is coarser; `exact`: 1), probing where the line
crosses the limit within the bracket's middle half. Without memory figures or a limit it doubles
and bisects. `confirm` re-searches with full runs where the answer fails one (a short probe that
ran out of memory is a true failure; one that fitted says nothing of a full run). The constants
were chosen on simulated memory curves: tests/test_batch_search.py holds the cases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

GROW = 32  # growth between fitting probes where nothing predicts the cost of a sample
JUMP = 0.6  # a jump on the estimated cost of a sample aims at this share of the memory left
STRONG = 0.25  # a line fitted across this share of the headroom may be extrapolated to the limit
SOME = 0.05  # a line across this share of the headroom measures a sample better than the estimate
JUMPS = 2  # jumps at most (the estimate's and the line's) before the search closes in
UNDER = 0.05  # a jump on a fitted line aims this share of the headroom under the limit
RESOLUTION_SAMPLES = 8  # the answer's resolution: this many samples or 2%, whichever is coarser
RESOLUTION_FRACTION = 0.02
FITS = ("ok", "diverged")  # statuses that fit: a diverged loss still ran every step in memory


@dataclass(frozen=True)
class Probe:
    """One tried batch size: how it ended (a row status), why, and its wall time in seconds.
    `sample_bytes`: what one sample is estimated to cost (the activations it saves for backward
    and its share of the batches held), None where not measured."""

    batch_size: int
    status: str
    error: str | None
    seconds: float
    phase: str  # "fit", "jump", "search", "confirm", "time"; "skipped": over the time bound
    step_time_s: float | None = None
    samples_per_s: float | None = None
    memory_bytes: int | None = None  # the peak that --max-memory limits (None: not measured)
    sample_bytes: float | None = None
    step_time_ci_rel: float | None = None  # the step time's 95% interval over it (issue 42)

    @property
    def fits(self) -> bool:
        return self.status in FITS


@dataclass(frozen=True)
class MemoryLine:
    """Peak memory (bytes) = fixed + per_sample x batch, through two probes that fitted."""

    fixed: float
    per_sample: float
    growth: float  # bytes between the two probes it was fitted through

    def batch_at(self, memory: float) -> float:
        return (memory - self.fixed) / self.per_sample

    def strong(self, limit: int) -> bool:
        """Whether it was fitted across enough of the headroom to extrapolate to the limit:
        the allocator takes memory in steps (arenas, segments) that a short span cannot
        average out."""
        return self.growth >= max(2 * 2**20, STRONG * (limit - self.fixed))


def memory_line(probes: list[Probe]) -> MemoryLine | None:
    """The line through the smallest and the largest fitted probes with measured memory (the
    widest span, so the allocator's steps weigh least), or None where there are not two or
    memory did not grow between them."""
    fitted = sorted(
        {p.batch_size: p.memory_bytes for p in probes if p.fits and p.memory_bytes}.items()
    )
    if len(fitted) < 2:
        return None
    (b1, m1), (b2, m2) = fitted[0], fitted[-1]
    if m2 <= m1:
        return None
    slope = (m2 - m1) / (b2 - b1)
    return MemoryLine(m2 - slope * b2, slope, m2 - m1)


def resolution(largest: int, exact: bool) -> int:
    """Samples the answer may be short of the largest batch that fits."""
    if exact:
        return 1
    return max(RESOLUTION_SAMPLES, int(RESOLUTION_FRACTION * largest))


def done(lo: int, hi: int | None, exact: bool) -> bool:
    """Whether the bracket is closed: the smallest batch that failed is within the resolution
    of the largest that fitted."""
    return hi is not None and hi - lo <= resolution(lo, exact)


def search(
    probe: Callable[[int, str], Probe], start: int, ceiling: int, limit: int | None, exact: bool
) -> list[Probe]:
    """Probe (batch, phase) from `start` until the bracket is closed, the ceiling fits, or a
    probe ends otherwise than fitting or running out of memory; the probes, in order."""
    probes: list[Probe] = []
    batch, phase = start, "fit"
    while True:
        p = probe(batch, phase)
        probes.append(p)
        if not p.fits and p.status != "oom":
            return probes
        lo = largest_fitted(probes)
        if lo >= ceiling or done(lo, smallest_failed(probes), exact):
            return probes
        batch, phase = next_batch(probes, limit, ceiling, exact)


def confirm(run: Callable[[int, str], Probe], probes: list[Probe], exact: bool) -> list[Probe]:
    """Full runs (run(batch, "confirm")) from the search's answer until the bracket they make
    with `probes` is closed (`bracket`), a batch of one fails, or a run ends otherwise than
    fitting or out of memory; the full runs, in order. Until one fits, each steps down from the
    smallest failure by the resolution, then twice that, ... (at most halving: the answer is
    usually near the top); then the bracket is bisected."""
    full: list[Probe] = []
    batch = largest_fitted(probes)
    while batch > 0:
        p = run(batch, "confirm")
        full.append(p)
        if not p.fits and p.status != "oom":
            return full
        lo, hi = bracket(probes, full)
        if p.fits and (hi is None or lo == largest_fitted(probes)):
            return full  # the answer fitted
        assert hi is not None  # a failure: p's, or a probe's below the answer
        if lo > 0 and done(lo, hi, exact):
            return full
        if lo > 0:
            batch = _bisect(lo, hi, exact)
        else:
            misses = sum(not q.fits for q in full)
            step = resolution(hi, exact) * 2 ** (misses - 1)
            batch = _rounded(max(hi - step, hi // 2, 1), 0, exact) if hi > 1 else 0
    return full


def bracket(probes: list[Probe], full: list[Probe]) -> tuple[int, int | None]:
    """(The largest batch known to fit, the smallest known to fail): once a full run ran out
    of memory, the largest that fitted a full run (0: none did), since a probe that fitted no
    longer says a batch fits; before, the largest that fitted either. The failure is the
    smallest of either kind (None: none failed)."""
    ran_out = any(p.status == "oom" for p in full)
    fitted = [p for p in full if p.fits] if ran_out else [*probes, *full]
    return largest_fitted(fitted), smallest_failed([*probes, *full])


def largest_fitted(probes: list[Probe]) -> int:
    """The largest batch that fitted (0: none)."""
    return max((p.batch_size for p in probes if p.fits), default=0)


def smallest_failed(probes: list[Probe]) -> int | None:
    """The smallest batch that ran out of memory (None: none did)."""
    return min((p.batch_size for p in probes if p.status == "oom"), default=None)


def next_batch(
    probes: list[Probe], limit: int | None, ceiling: int, exact: bool
) -> tuple[int, str]:
    """The next batch to probe, and its phase, from the probes so far (at least one)."""
    lo, hi = largest_fitted(probes), smallest_failed(probes)
    r = resolution(lo, exact)
    fitted = sorted(
        (p for p in probes if p.fits and p.memory_bytes is not None), key=lambda p: p.batch_size
    )
    if limit is None or not fitted:
        # nothing to fit: double, then bisect
        if hi is None:
            return min(max(2 * lo, 1), ceiling), "fit"
        return _bisect(lo, hi, exact), "search"
    line = memory_line(fitted)
    if line is None or not line.strong(limit):
        return _jump_on_estimate(fitted, line, lo, hi, limit, ceiling, exact)
    if hi is None:
        if sum(p.phase == "jump" for p in probes) < JUMPS:
            under = line.batch_at(limit - UNDER * (limit - line.fixed))
            if under > lo + r:
                return min(_rounded(int(under), lo, exact), ceiling), "jump"
        # near the limit: probe where the line crosses it, at least a resolution above lo
        at_limit = line.batch_at(limit)
        return min(max(lo + r, _rounded(int(at_limit), lo, exact)), ceiling), "search"
    return _inside(fitted, line, lo, hi, limit, exact), "search"


def _inside(
    fitted: list[Probe], line: MemoryLine, lo: int, hi: int, limit: int, exact: bool
) -> int:
    """The next batch inside the bracket (lo, hi): where the line crosses the limit, or, where
    that is past hi, where the line through the two largest fitted probes does (the slope near
    the limit). A crossing within the resolution above lo probes there, to close the bracket;
    one within the resolution below hi probes a resolution below hi where the bracket is
    narrow; one past hi is contradicted (a batch it says fits did not), and the bracket is
    halved; elsewhere the probe stays in the middle half, so the bracket loses at least a
    quarter each time a line is wrong."""
    r, width = resolution(lo, exact), hi - lo
    crossings = [fit.batch_at(limit) for fit in (line, memory_line(fitted[-2:])) if fit]
    at_limit = next((c for c in crossings if c < hi), crossings[-1])
    if at_limit <= lo + r:
        return lo + r
    if at_limit >= hi and width <= 4 * r:
        return _bisect(lo, hi, exact)  # contradicted: a batch it says fits did not
    if at_limit >= hi - r and width <= 4 * r:
        return hi - r  # the line puts the limit just below hi: close the bracket from there
    quarter = width // 4
    return _rounded(int(min(max(at_limit, lo + quarter), hi - quarter)), lo, exact)


def _jump_on_estimate(
    fitted: list[Probe],
    line: MemoryLine | None,
    lo: int,
    hi: int | None,
    limit: int,
    ceiling: int,
    exact: bool,
) -> tuple[int, str]:
    """Before a line spans the headroom: aim at JUMP of the memory left, on the cost of a sample
    that a line across some of it measured, else the first probe's estimate; with neither grow
    GROW-fold. Inside a bracket, never past its middle."""
    top = fitted[-1]
    assert top.memory_bytes is not None
    left = limit - top.memory_bytes
    measured = line is not None and line.growth >= SOME * (limit - line.fixed)
    per_sample = line.per_sample if line is not None and measured else fitted[0].sample_bytes
    if per_sample and left > 0:
        batch, phase = lo + max(1, int(JUMP * left / per_sample)), "jump"
    else:
        batch, phase = max(GROW * lo, lo + 1), "fit"
    if hi is not None:
        return min(_rounded(batch, lo, exact), _bisect(lo, hi, exact)), "search"
    return min(max(_rounded(batch, lo, exact), lo + 1), ceiling), phase


def _bisect(lo: int, hi: int, exact: bool) -> int:
    return _rounded((lo + hi) // 2, lo, exact)


def _rounded(batch: int, lo: int, exact: bool) -> int:
    """`batch` down to a multiple of 8 where that stays above `lo` (people train at those)."""
    down = batch - batch % RESOLUTION_SAMPLES
    return down if not exact and down > lo else batch
