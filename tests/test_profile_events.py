"""probes.profile_events reads a profile's events as torch's own FunctionEvents describe them:
the same events, the same caller of each, the same self time on the host, on real profiles of
training steps (a view-heavy transformer with AdamW, a cnn with SGD)."""

from __future__ import annotations

import pytest
from torch.profiler import ProfilerActivity, profile

from gpubench import models
from gpubench.config.spec import Point
from gpubench.harness.step import prepare
from gpubench.probes.profile_events import read


def _profiled(model: str, optimizer: str) -> profile:
    point = Point(model, "tiny", "cpu", "fp32", optimizer, 4)
    step = prepare(point, models.build(model, "tiny")).step
    step()
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
        step()
    return prof


@pytest.mark.parametrize(("model", "optimizer"), [("transformer", "adamw"), ("cnn", "sgd")])
def test_events_callers_and_self_times_are_torchs(model: str, optimizer: str) -> None:
    prof = _profiled(model, optimizer)
    ours = read(prof.profiler.kineto_results)
    theirs = list(prof.events())
    assert len(ours) == len(theirs) > 100
    start = prof.profiler.kineto_results.trace_start_ns()  # torch's: microseconds from it
    ours.sort(key=lambda e: (e.start_ns, -e.end_ns, e.name))
    theirs.sort(key=lambda e: (e.time_range.start, -e.time_range.end, e.name))
    for a, b in zip(ours, theirs, strict=True):
        assert a.name == b.name
        assert (a.start_ns - start) / 1e3 == pytest.approx(b.time_range.start, abs=1e-3)
        assert a.self_host_ns() / 1e3 == pytest.approx(b.self_cpu_time_total, abs=1e-3)
        assert (a.parent.name if a.parent else None) == (
            b.cpu_parent.name if b.cpu_parent else None
        )
    # the optimizer's own annotation is there to be found by the category of its operators
    assert any(e.name.startswith("Optimizer.step") for e in ours)


def test_a_host_events_self_time_excludes_what_it_called() -> None:
    prof = _profiled("mlp", "sgd")
    events = read(prof.profiler.kineto_results)
    callers = [e for e in events if any(c.parent is e for c in events)]
    assert callers
    for e in callers:
        inside = sum(c.end_ns - c.start_ns for c in events if c.parent is e)
        assert e.self_host_ns() == e.end_ns - e.start_ns - inside >= 0
