"""Parallel points on the CPU: two gloo ranks, DDP and FSDP2, and every way a rank can fail."""

from __future__ import annotations

import time

import pytest
import torch

from gpubench import models
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.run.ranks import launch, run_parallel_point
from gpubench.run.sweep import run_sweep

BUDGET = Budget.fixed(2, warmup_steps=1)


@pytest.fixture(autouse=True, scope="module")
def _fork_server() -> None:
    """Ranks come from the workers' fork server: start it before the timed tests (it imports
    torch once, seconds on a busy machine), so that they time the launch alone."""
    import os

    from gpubench.run.worker import context

    ctx = context()
    warm = ctx.Process(target=os.getpid)
    warm.start()
    warm.join()


def _point(model: str = "mlp", parallel: str = "ddp", nproc: int = 2, **kw: object) -> Point:
    return Point(model, "tiny", "cpu", "fp32", "adamw", 4, parallel=parallel, nproc=nproc, **kw)  # type: ignore[arg-type]


def test_ddp_averages_gradients_like_one_process_on_the_whole_batch() -> None:
    import rank_faults

    per_rank = launch(rank_faults.ddp_gradients, (8,), nproc=2, timeout_s=60)
    torch.manual_seed(0)
    workload = models.build("mlp", "tiny")
    x, y = workload.batch(8, "cpu", seed=7)
    workload.loss(workload.model(x), y).backward()
    whole = [p.grad for p in workload.model.parameters()]
    for rank_grads in per_rank:
        assert len(rank_grads) == len(whole)
        for got, want in zip(rank_grads, whole, strict=True):
            # fp32 sums in another order: equal to a few ulps of the gradients' scale
            torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-5, atol=1e-6)


def test_fsdp_holds_a_share_of_the_parameters_that_ddp_holds_whole() -> None:
    ddp = run_parallel_point(_point(parallel="ddp"), BUDGET, timeout_s=60)
    fsdp = run_parallel_point(_point(parallel="fsdp"), BUDGET, timeout_s=60)
    assert ddp["status"] == fsdp["status"] == "ok", (ddp["error"], fsdp["error"])
    share = fsdp["rank_parameters_bytes"] / ddp["rank_parameters_bytes"]
    assert 0.45 <= share <= 0.6  # half, plus the padding of uneven shards
    assert fsdp["rank_model_state_bytes"] < 0.6 * ddp["rank_model_state_bytes"]
    for row in (ddp, fsdp):
        assert row["world_size"] == 2 and row["backend"] == "gloo"
        assert row["global_batch_size"] == 8 and row["per_process_batch_size"] == 4
        assert row["samples_per_s"] == pytest.approx(8 / row["step_time_s"])
        # collective time comes from rank 0's profile, which two fixed steps may find too
        # costly to take (test_parallel_limits times it on a budget that affords it)
        if isinstance(row["profile"], dict) and "skipped" not in row["profile"]:
            assert row["collective_time_s"] > 0 and 0 < row["collective_fraction"] <= 1
        else:
            assert row["collective_time_s"] is None and row["collective_fraction"] is None
        assert [r["rank"] for r in row["ranks"]] == [0, 1]


@pytest.mark.parametrize(
    ("fault", "status", "reason"),
    [
        ("raises", "error", "rank 1 of 2: ValueError: injected failure on rank 1"),
        ("oom", "oom", "rank 1 of 2: MemoryError"),
        ("killed", "error", "rank 1 of 2: the process died (signal SIGKILL)"),
    ],
)
def test_a_failing_rank_ends_the_point_on_every_rank(fault: str, status: str, reason: str) -> None:
    started = time.perf_counter()
    row = run_parallel_point(_point(f"rank_faults:{fault}"), BUDGET, timeout_s=30)
    assert row["status"] == status
    assert row["error"].startswith(reason)
    assert time.perf_counter() - started < 20  # not the point timeout: the failure was seen


def test_a_hanging_rank_gives_a_row_not_a_hang() -> None:
    started = time.perf_counter()
    row = run_parallel_point(_point("rank_faults:hangs"), BUDGET, timeout_s=4, group_timeout_s=2)
    # rank 0 gives up in its collective after the group timeout, or the point timeout ends it
    assert row["status"] in ("error", "timeout")
    assert "rank(s) 1 " in row["error"]  # the rank that hung is named
    assert time.perf_counter() - started < 10


def test_weak_and_strong_rows_carry_a_scaling_efficiency(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = SweepSpec(
        "scaling-test",
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(4,),
        optimizers=("sgd",),
        parallel=("ddp",),
        nproc=(2, 1),  # measured fewest first all the same
        scaling=("weak", "strong"),
        budget=BUDGET,
    )
    frame = run_sweep(spec, tmp_path / "run", point_timeout_s=60)
    # issue 23: one process is measured once, the baseline of weak and strong alike
    assert list(frame["nproc"]) == [1, 2, 2]
    assert (frame["status"] == "ok").all(), list(frame["error"])
    # every row that timed steps carries the busy check, the one-process baseline included,
    # though 2 steps are too short for the load's clock (issue 28)
    assert frame["other_load_cores"].notna().all()
    assert frame["busy"].isin([True, False]).all(), list(frame["busy"])
    rows = frame.set_index(frame["scaling"].fillna("one"))
    assert rows.loc["weak", "global_batch_size"] == 8
    assert rows.loc["strong", "per_process_batch_size"] == 2
    base = rows.loc["one"]
    assert base["scaling_efficiency"] == 1.0
    for how in ("weak", "strong"):
        two = rows.loc[how]
        want = two["samples_per_s"] / (2 * base["samples_per_s"])
        assert two["scaling_efficiency"] == pytest.approx(want)


def test_the_report_draws_scaling_and_memory_per_rank(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpubench.report import build_report
    from gpubench.store.results import ResultStore
    from gpubench.store.row import make_row

    store = ResultStore(tmp_path / "run")
    for parallel, state in (("ddp", 1000), ("fsdp", 500)):
        for nproc, rate in ((1, 100.0), (2, 150.0)):
            point = _point(parallel=parallel, nproc=nproc, scaling="weak")
            store.append(
                make_row(
                    point,
                    "ok",
                    step_time_s=4 * nproc / rate,
                    samples_per_s=rate,
                    world_size=nproc,
                    collective_fraction=0.1 * (nproc - 1),
                    rank_model_state_bytes=state if parallel == "fsdp" and nproc == 2 else 1000,
                )
            )
    page = build_report([tmp_path / "run"]).read_text()
    assert "plots/scaling.png" in page and "plots/parallel_memory.png" in page
    assert (tmp_path / "run" / "plots" / "scaling.png").stat().st_size > 0
    assert page.count('data-v="0.75">75%</td>') == 2  # efficiency: 150 / (2 x 100), ddp and fsdp
