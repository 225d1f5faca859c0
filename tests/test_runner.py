from __future__ import annotations

import pytest
import torch
from isolation import memory_cap

from gpubench.config.spec import Budget, Point
from gpubench.harness.failure import is_out_of_memory
from gpubench.run.worker import WorkerRunner, describe_exit

BUDGET = Budget.fixed(2, warmup_steps=1)


def _point(model: str, batch: int = 2) -> Point:
    return Point(model, "tiny", "cpu", "fp32", "sgd", batch)


def test_each_failure_becomes_a_row_and_the_next_point_still_runs() -> None:
    cap = memory_cap()
    # Points that must end ok get a generous timeout; only the hang runs under a short one.
    runner = WorkerRunner(max_memory=cap, point_timeout_s=300)
    try:
        ok = runner.run(_point("mlp"), BUDGET)
        crash = runner.run(_point("fault_workloads:segfault"), BUDGET)
        runner.point_timeout_s = 1
        hang = runner.run(_point("fault_workloads:hang"), BUDGET)
        runner.point_timeout_s = 300
        raised = runner.run(_point("fault_workloads:raises"), BUDGET)
        oom = runner.run(_point("fault_workloads:hungry", 1024), BUDGET)
        fits = runner.run(_point("fault_workloads:hungry", 2), BUDGET)
        after = runner.run(_point("mlp", 4), BUDGET)
    finally:
        runner.close()
    assert ok["status"] == "ok" and ok["steps_measured"] == 2
    assert crash["status"] == "error" and "signal SIGSEGV" in crash["error"]
    assert hang["status"] == "timeout" and "1 s (--point-timeout)" in hang["error"]
    assert hang["point_time_s"] >= 1
    assert raised["status"] == "error"
    assert raised["error"] == "ValueError: injected failure in forward"
    assert "in _raise" in raised["traceback"] and crash.get("traceback") is None
    assert oom["status"] == "oom" and "can't allocate memory" in oom["error"]
    assert "--max-memory" in oom["error"] and "in use before the point" in oom["error"]
    assert fits["status"] == "ok" and after["status"] == "ok"
    for row in (crash, hang, raised, oom):
        assert row["model"].startswith("fault_workloads:") and row["step_time_s"] is None
    # A worker is replaced after each failure and kept while points succeed: ok, crash (same
    # worker), hang (new), raises (new), oom (new), fits (new), after (same as fits).
    assert len(runner.startup_s) == 5


def test_a_worker_serves_successive_points() -> None:
    runner = WorkerRunner()
    try:
        statuses = [runner.run(_point("mlp", b), BUDGET)["status"] for b in (1, 2, 3)]
        tf32 = runner.run(Point("mlp", "tiny", "cpu", "tf32", "sgd", 2), BUDGET)
        statuses.append(runner.run(_point("cnn"), BUDGET)["status"])
    finally:
        runner.close()
    assert statuses == ["ok"] * 4 and tf32["status"] == "unsupported"
    assert len(runner.startup_s) == 1


def test_out_of_memory_is_told_from_other_errors() -> None:
    assert is_out_of_memory(MemoryError())
    with pytest.raises(RuntimeError) as shapes:
        torch.ones(2, 3) @ torch.ones(2, 3)
    assert not is_out_of_memory(shapes.value)
    assert not is_out_of_memory(ValueError("out of memory"))  # only allocator errors count
    assert describe_exit(-11) == "signal SIGSEGV" and describe_exit(3) == "exit status 3"
