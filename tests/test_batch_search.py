"""The max-batch search on simulated memory curves: where it probes, how many probes it needs
and whether its answer is right, without running a model (tests/test_maxbatch.py runs real
ones)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest

from gpubench.run import batch_search
from gpubench.run.batch_search import Probe

MiB = 2**20
GiB = 2**30


def curve(
    fixed: float, per_sample: float, limit: int, bend: float = 0.0, step: float = 0.0
) -> Callable[[int], float]:
    """Peak memory of a batch: fixed + headroom x (the batch's share of it) ** (1 + bend),
    taken by the allocator in `step`-byte pieces (0: exactly)."""
    headroom = limit - fixed

    def memory(batch: int) -> float:
        used = fixed + headroom * (batch * per_sample / headroom) ** (1 + bend)
        return math.ceil(used / step) * step if step else used

    return memory


def run(
    memory: Callable[[int], float],
    limit: int | None,
    estimate: float | None,
    start: int = 1,
    ceiling: int = 2**20,
    exact: bool = False,
) -> list[Probe]:
    def probe(batch: int, phase: str) -> Probe:
        if memory(batch) > (limit if limit is not None else 1.5 * GiB):
            return Probe(batch, "oom", "out of memory", 0.0, phase)
        measured = None if limit is None else int(memory(batch))
        return Probe(batch, "ok", None, 0.0, phase, memory_bytes=measured, sample_bytes=estimate)

    return batch_search.search(probe, start, ceiling, limit, exact)


def largest_that_fits(memory: Callable[[int], float], limit: float, ceiling: int) -> int:
    lo, hi = 0, ceiling + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if memory(mid) <= limit else (lo, mid)
    return lo


def assert_answer_within_resolution(probes: list[Probe], truth: int, exact: bool) -> None:
    found = batch_search.largest_fitted(probes)
    assert found <= truth
    assert truth - found < batch_search.resolution(found, exact), (truth, found, probes)


@pytest.mark.parametrize("limit", [2 * GiB, 80 * GiB])
@pytest.mark.parametrize("per_sample", [16e3, 50e3, 3 * MiB, 85 * MiB])
@pytest.mark.parametrize("ratio", [0.7, 1.0, 1.5])  # the estimate against the true cost
def test_a_straight_line_closes_in_six_probes(limit: int, per_sample: float, ratio: float) -> None:
    memory = curve(900 * MiB, per_sample, limit, step=2 * MiB)
    probes = run(memory, limit, ratio * per_sample)
    assert len(probes) <= 6, [(p.phase, p.batch_size, p.status) for p in probes]
    assert [p.phase for p in probes][:2] == ["fit", "jump"]
    assert_answer_within_resolution(probes, largest_that_fits(memory, limit, 2**20), False)


def test_bent_and_stepped_curves_are_answered_right_in_a_few_probes() -> None:
    counts = []
    for per_sample, bend, step, ratio in itertools.product(
        [16e3, 3 * MiB], [-0.2, 0.0, 0.25], [0, 64 * MiB], [0.3, 0.6, 1.0, 3.0]
    ):
        memory = curve(100 * MiB, per_sample, 2 * GiB, bend, step)
        probes = run(memory, 2 * GiB, ratio * per_sample)
        assert_answer_within_resolution(probes, largest_that_fits(memory, 2 * GiB, 2**20), False)
        counts.append(len(probes))
    # a line that misleads costs probes, never the answer: at worst a bisection's worth
    assert max(counts) <= 9 and sum(counts) / len(counts) <= 6.5, counts


def test_exact_search_ends_on_one_sample() -> None:
    memory = curve(900 * MiB, 50e3, 2 * GiB, step=2 * MiB)
    probes = run(memory, 2 * GiB, 50e3, exact=True)
    truth = largest_that_fits(memory, 2 * GiB, 2**20)
    assert batch_search.largest_fitted(probes) == truth
    assert batch_search.smallest_failed(probes) == truth + 1


def test_without_an_estimate_small_probes_grow_until_a_line_can_be_fitted() -> None:
    memory = curve(900 * MiB, 50e3, 2 * GiB, step=2 * MiB)
    probes = run(memory, 2 * GiB, None)
    assert [(p.phase, p.batch_size) for p in probes][:3] == [("fit", 1), ("fit", 32), ("fit", 1024)]
    assert len(probes) <= 9, [(p.phase, p.batch_size, p.status) for p in probes]
    assert_answer_within_resolution(probes, largest_that_fits(memory, 2 * GiB, 2**20), False)


def test_without_a_limit_the_search_doubles_then_bisects() -> None:
    memory = curve(900 * MiB, 3 * MiB, 80 * GiB)  # runs out of memory at 1.5 GiB (see run)
    probes = run(memory, None, None)
    sizes = [p.batch_size for p in probes]
    assert sizes[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert all(p.phase == "search" for p in probes[9:])
    assert_answer_within_resolution(probes, largest_that_fits(memory, 1.5 * GiB, 2**20), False)


def test_the_ceiling_bounds_every_probe() -> None:
    memory = curve(900 * MiB, 1e3, 80 * GiB)
    probes = run(memory, 80 * GiB, 1e3, ceiling=5000)
    assert max(p.batch_size for p in probes) == 5000 and probes[-1].fits
    assert len(probes) == 2


def test_memory_line_through_the_smallest_and_largest_fitted_probes() -> None:
    def probe(b: int, memory: int | None, status: str = "ok") -> Probe:
        return Probe(b, status, None, 0.0, "fit", memory_bytes=memory)

    line = batch_search.memory_line(
        [
            probe(1, 1000 * MiB),
            probe(32, 1070 * MiB),
            probe(64, 1126 * MiB),
            probe(999, None, "oom"),
        ]
    )
    assert line is not None
    assert line.per_sample == pytest.approx(2 * MiB) and line.fixed == pytest.approx(998 * MiB)
    assert line.batch_at(2000 * MiB) == pytest.approx(501)
    assert line.strong(1400 * MiB) and not line.strong(2000 * MiB)
    assert batch_search.memory_line([probe(1, 5), probe(2, 5)]) is None  # no growth: no line
    assert batch_search.resolution(1000, exact=False) == 20
    assert batch_search.resolution(100, exact=False) == 8
    assert batch_search.resolution(100, exact=True) == 1


def test_a_contradicted_line_halves_a_narrow_bracket() -> None:
    """torchvision:resnet18 at 64 px under a 5G cap on the CPU (the probes as measured): the
    line through the fitted probes crosses the limit past 472, which ran out of memory."""

    def fitted(batch: int, memory: int) -> Probe:
        return Probe(batch, "ok", None, 0.0, "jump", memory_bytes=memory, sample_bytes=2.09e6)

    probes = [
        fitted(1, 4045094912),
        fitted(376, 5152325632),
        fitted(424, 5216800768),
        Probe(472, "oom", "out of memory", 0.0, "search"),
    ]
    limit = 5 * GiB
    line = batch_search.memory_line(probes)
    assert line is not None and line.batch_at(limit) > 472
    # wide (48 samples, 6 resolutions): a probe in the middle half, on the side the line says
    assert batch_search.next_batch(probes, limit, 2**16, False) == (456, "search")
    probes.append(Probe(456, "oom", "out of memory", 0.0, "search"))
    # narrow (32 samples): the line is not trusted any more, the bracket is halved
    assert batch_search.next_batch(probes, limit, 2**16, False) == (440, "search")


def run_full(memory: Callable[[int], float], limit: int) -> Callable[[int, str], Probe]:
    """A full measurement on `memory` (no memory figures: only whether it fitted)."""

    def probe(batch: int, phase: str) -> Probe:
        fits = memory(batch) <= limit
        return Probe(batch, "ok" if fits else "oom", None if fits else "out of memory", 0.0, phase)

    return probe


@pytest.mark.parametrize("growth", [1.02, 1.2, 1.8, 4.0, 50.0, 10**6])
def test_a_full_run_that_fails_is_searched_down_to_a_true_bracket(growth: float) -> None:
    """Probes of a few steps fit more than a full measurement does (issue 23: resnet18's probes
    fitted 80 and 88, its full runs at both ran out of memory, and the answer fell to 1, the
    only smaller probe, "within 8"): a full run costs `growth` times a probe's memory per
    sample. The answer is a batch whose full run fitted, the smallest failure within the
    resolution above it."""
    limit = 1100 * MiB
    short = curve(900 * MiB, 2 * MiB, limit, step=2 * MiB)
    full = curve(900 * MiB, growth * 2 * MiB, limit, step=2 * MiB)
    probes = run(short, limit, 2 * MiB)
    confirmed = batch_search.confirm(run_full(full, limit), probes, exact=False)
    lo, hi = batch_search.bracket(probes, confirmed)
    truth = largest_that_fits(full, limit, 2**20)
    assert lo == max((p.batch_size for p in confirmed if p.fits), default=0)
    if truth == 0:  # not even one sample fits a full run, and the search says so
        assert (lo, hi) == (0, 1)
        return
    assert lo <= truth < hi, (lo, hi, truth)  # the bracket is true
    runs = [(p.batch_size, p.status) for p in confirmed]
    assert hi - lo <= batch_search.resolution(lo, False) and len(runs) <= 9, runs


def test_a_confirmed_answer_needs_one_full_run() -> None:
    memory = curve(900 * MiB, 2 * MiB, 1100 * MiB, step=2 * MiB)
    probes = run(memory, 1100 * MiB, 2 * MiB)
    confirmed = batch_search.confirm(run_full(memory, 1100 * MiB), probes, exact=False)
    assert [(p.batch_size, p.status) for p in confirmed] == [
        (batch_search.largest_fitted(probes), "ok")
    ]
    assert batch_search.bracket(probes, confirmed) == (
        batch_search.largest_fitted(probes),
        batch_search.smallest_failed(probes),
    )
