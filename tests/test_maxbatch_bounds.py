"""Issue 42, item 4: max-batch reports a ceiling as a ceiling, bounds each probe's time (a probe
predicted past the bound is not started, and the search says so), and flags two timings of one
batch that disagree beyond their intervals. Pure functions on synthetic probes, and one search
of the tiny MLP under a bound no probe can meet."""

from __future__ import annotations

from isolation import memory_cap

from gpubench.config.spec import Point
from gpubench.run import maxbatch
from gpubench.run.batch_search import Probe
from gpubench.run.maxbatch import MaxBatch, predicted_probe_s, timing_conflicts

POINT = Point("mlp", "tiny", "cpu", "fp32", "sgd", 1)


def _probe(batch: int, step_s: float, phase: str = "search", ci: float | None = None) -> Probe:
    return Probe(batch, "ok", None, 1.0, phase, step_s, batch / step_s, step_time_ci_rel=ci)


def test_a_ceiling_is_reported_as_a_ceiling() -> None:
    at = MaxBatch(POINT, 65536, ceiling_reached=True, resolution=1310)
    assert at.answer() == (
        "largest batch that fits: at least 65536, the --ceiling (nothing above it was tried; "
        "more may fit)"
    )
    below = MaxBatch(POINT, 88, smallest_failed=96, resolution=8)
    assert below.answer() == "largest batch that fits: 88, within 8 samples (96 did not fit)"
    assert MaxBatch(POINT, 0).answer() == "not even a batch of one fits"
    stopped = MaxBatch(POINT, 512, stopped="B=4096 not started", resolution=10)
    assert stopped.answer() == (
        "largest batch that fits: at least 512 (the search stopped before memory ended)"
    )


def test_two_timings_of_one_batch_that_disagree_are_flagged() -> None:
    # the case: 112 and 205 ms a step at B=65,536
    probes = [_probe(4096, 0.01), _probe(65536, 0.112), _probe(65536, 0.205, "confirm", 0.02)]
    (line,) = timing_conflicts(probes)
    assert line.startswith(
        "B=65536 timed twice, 112 ms (search) and 205 ms (confirm) a step (x1.83"
    )
    # within their intervals (or the 5% floor): no flag
    assert timing_conflicts([_probe(64, 0.100, ci=0.10), _probe(64, 0.115, "time", 0.10)]) == []
    assert timing_conflicts([_probe(64, 0.100), _probe(64, 0.104, "time")]) == []
    assert MaxBatch(POINT, 64, probes=probes).to_dict()["timing_conflicts"] == [line]


def test_a_probes_time_is_predicted_from_the_step_times_below_it() -> None:
    assert predicted_probe_s([], 64, 4) is None
    assert predicted_probe_s([_probe(1, 0.01)], 4096, 4) is None  # one step: mostly fixed cost
    # the line through the two largest, never below the largest's step
    probes = [_probe(1024, 0.01), _probe(2048, 0.02)]
    assert abs((predicted_probe_s(probes, 65536, 4) or 0) - 4 * 0.64) < 1e-9


def test_a_probe_over_the_bound_is_not_started() -> None:
    # about 4 MiB a sample under 320 MiB of headroom: a search of several probes
    hungry = Point("fault_workloads:hungry", "tiny", "cpu", "fp32", "sgd", 1)
    result = maxbatch.find(hungry, memory_cap(320), None, probe_limit_s=1e-6)
    # two timed probes tell the step time's line; the next would take over the bound. (Under a
    # busy machine's memory a probe may end out of memory under the cap: it is no timing, and
    # the search goes on below it until two have timed.)
    *ran, skipped = result.probes
    timed = [p for p in ran if p.fits and p.step_time_s]
    assert len(timed) == 2 and ran[0].batch_size == 1 and ran[-1] is timed[-1]
    assert skipped.phase == "skipped" and skipped.seconds == 0.0
    assert result.stopped is not None and result.stopped.startswith(f"B={skipped.batch_size} not")
    assert "over the 0.00000100 s bound on a probe" in result.stopped
    assert result.largest == max(p.batch_size for p in timed) and not result.ceiling_reached
    assert len(result.search_probes) == len(ran)  # the skipped probe was no search probe
    assert result.answer().endswith("(the search stopped before memory ended)")


def test_time_follows_the_growth_rule_and_stops_where_throughput_flattens() -> None:
    """`max-batch --time` timed every power of two up to the answer (B=65,536: 17 full
    measurements, the largest the slowest); by the growth rule it stops past the knee."""
    timed: list[int] = []

    def probe(batch: int, phase: str, budget: object) -> Probe:
        timed.append(batch)
        step = 0.002 * max(1.0, batch / 256)  # flat (launch-bound) to 256, then per sample
        return Probe(batch, "ok", None, 0.5, phase, step, batch / step, step_time_ci_rel=0.01)

    result = MaxBatch(POINT, 65536, ceiling_reached=True)
    maxbatch._time(probe, None, result)  # type: ignore[arg-type]
    assert max(timed) <= 1024 and len(timed) <= 8, timed
    assert result.best_batch in (256, 512, 1024)
