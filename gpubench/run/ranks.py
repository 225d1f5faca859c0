"""Launches the ranks of a parallel point on this node and turns how they ended into one row.

Each rank is a process from the sweep's fork server, joined by a c10d TCP rendezvous on 127.0.0.1
as torchrun's is, and sends its outcome on a pipe; at the first failure every rank is ended:
out of memory on any rank -> `oom`, another exception or a death -> `error` naming the rank, no
outcome within the point timeout -> `timeout`. A rank hung in a collective meets the process
group's timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from gpubench.config.spec import Budget, Point
from gpubench.harness.failure import is_out_of_memory, one_line
from gpubench.run import forkserver, memory_cap
from gpubench.run.worker import context, describe_exit
from gpubench.store.row import make_row
from gpubench.store.wording import seconds, size

# Seconds a collective may wait for the other ranks before it raises, unless the point timeout
# is shorter.
GROUP_TIMEOUT_S = 120.0
# Seconds the launcher waits after the first failure for other ranks' reasons, then stops them.
_FAILURE_GRACE_S = 0.5

RankTarget = Callable[..., Any]  # (rank, world, init_method, timeout_s, *args) -> picklable


class RankFailure(Exception):
    """`status` (oom, error or timeout), the reason, and the first failed rank's traceback
    (None: it died, or hung)."""

    def __init__(self, status: str, reason: str, traceback_text: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.traceback = traceback_text


class OversubscribedWarning(UserWarning):
    """Parallel points whose processes x threads exceed this machine's cores."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (rank 0's store binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(
    target: RankTarget,
    args: tuple[Any, ...],
    nproc: int,
    timeout_s: float | None,
    group_timeout_s: float = GROUP_TIMEOUT_S,
) -> list[Any]:
    """`target(rank, nproc, init_method, group_timeout_s, *args)` in `nproc` processes: each
    rank's result in rank order, or RankFailure once every rank is stopped. The launch leaves
    a joined process group after the result is sent. `timeout_s` (None: none) bounds it all."""
    ctx = context()
    init_method = f"tcp://127.0.0.1:{free_port()}"
    if timeout_s is not None:
        group_timeout_s = min(group_timeout_s, timeout_s)
    procs: list[BaseProcess] = []
    conns: list[Connection] = []
    lifelines: list[Connection] = []
    try:
        for rank in range(nproc):
            own = (target, rank, nproc, init_method, group_timeout_s, args)
            proc, parent, lifeline = forkserver.spawn(
                ctx, _rank_main, own, f"gpubench-rank{rank}", duplex=False
            )
            procs.append(proc)
            conns.append(parent)
            lifelines.append(lifeline)
        return _collect(procs, conns, timeout_s)
    finally:
        _stop(procs)
        for c in (*conns, *lifelines):
            c.close()


def _collect(
    procs: list[BaseProcess], conns: list[Connection], timeout_s: float | None
) -> list[Any]:
    """Each rank's result in rank order; after the first failure, the reasons that arrive
    within _FAILURE_GRACE_S (a rank that failed may have made others fail), as a RankFailure."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    results: dict[int, Any] = {}
    # (rank, out of memory, reason, traceback or None) in arrival order
    failures: list[tuple[int, bool, str, str | None]] = []
    grace_end = None
    while True:
        failed = {f[0] for f in failures}
        waiting = [r for r in range(len(procs)) if r not in results and r not in failed]
        if grace_end is not None and (not waiting or time.monotonic() >= grace_end):
            raise _failure(failures, len(procs), waiting)
        if not waiting:
            return [results[r] for r in range(len(procs))]
        left = None if deadline is None else deadline - time.monotonic()
        if grace_end is not None:
            left = max(0.0, grace_end - time.monotonic())  # a negative wait would block
        elif left is not None and left <= 0:
            raise RankFailure(
                "timeout",
                f"no result from rank(s) {', '.join(map(str, waiting))} of {len(procs)} "
                f"within {seconds(timeout_s)} (--point-timeout); every rank was stopped",
            )
        ready = wait([conns[r] for r in waiting] + [procs[r].sentinel for r in waiting], left)
        for r in waiting:
            if conns[r] not in ready and procs[r].sentinel not in ready:
                continue
            outcome = _read(conns[r], procs[r])
            if outcome[0] == "done":
                results[r] = outcome[1]
            else:
                failures.append((r, *outcome[1:]))
        if failures and grace_end is None:
            grace_end = time.monotonic() + _FAILURE_GRACE_S


def _read(conn: Connection, proc: BaseProcess) -> tuple[Any, ...]:
    """A rank's outcome: ("done", result) or ("failed", out of memory, reason, traceback)."""
    if conn.poll():
        with contextlib.suppress(EOFError):
            message: tuple[Any, ...] = conn.recv()
            return message
    proc.join(timeout=10)
    return ("failed", False, f"the process died ({describe_exit(proc.exitcode)})", None)


# A rank whose error reads as a lost peer failed because another rank did: the cause comes first.
_COLLATERAL = ("gloo", "nccl", "c10d", "connection", "timed out", "timeout", "peer")


def _failure(
    failures: list[tuple[int, bool, str, str | None]], world: int, silent: list[int]
) -> RankFailure:
    """The row's status and reason: the causes first, then the ranks that had not ended (one
    of them may be the rank that hung); the traceback is the first cause's."""
    failures = sorted(failures, key=lambda f: any(m in f[2].lower() for m in _COLLATERAL))
    oom = any(f[1] for f in failures)
    reason = "; ".join(f"rank {r} of {world}: {why}" for r, _, why, _ in failures)
    if silent:
        reason += f"; rank(s) {', '.join(map(str, silent))} still running, stopped"
    first = failures[0]
    trace = None if first[3] is None else f"rank {first[0]} of {world}:\n{first[3]}"
    return RankFailure("oom" if oom else "error", reason[:1000], trace)


def _stop(procs: list[BaseProcess]) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=10)
        p.close()


def _rank_main(
    target: RankTarget,
    rank: int,
    world: int,
    init_method: str,
    group_timeout_s: float,
    args: tuple[Any, ...],
    conn: Connection,
    lifeline: Connection,
) -> None:
    """A rank's life: run `target` and send its outcome. Ctrl-C is the sweep's to handle; the
    rank ends at once when the launcher goes away."""
    from gpubench.run.worker import _exit_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(lifeline,), daemon=True).start()
    try:
        result = target(rank, world, init_method, group_timeout_s, *args)
    except BaseException as e:  # every failure is reported to the launcher, then the rank ends
        conn.send(("failed", is_out_of_memory(e), one_line(e), traceback.format_exc()))
        conn.close()
        os._exit(1)  # skip the process group's teardown: the other ranks may be gone
    conn.send(("done", result))
    conn.close()
    # Leave the group only once the result is sent: the rendezvous store lives in rank 0's
    # process, so a rank whose teardown outlives rank 0 can wait on it; the launcher, which
    # has every result by then, stops such a rank.
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def point_rank(
    rank: int,
    world: int,
    init_method: str,
    timeout_s: float,
    point: Point,
    budget: Budget,
    max_memory: int | None = None,
) -> dict[str, Any] | None:
    """One rank of a parallel point, measured under `max_memory` bytes (None: no cap); rank 0
    calibrates its matmul roof first, outside the cap, and returns the row."""
    import torch

    from gpubench.harness import parallel

    peak = None
    if rank == 0:
        from gpubench.probes import calibration

        if point.device.startswith("cpu"):
            torch.set_num_threads(parallel.rank_threads(point))
        peak = calibration.matmul_peak(point.device, point.precision)
    parallel.init_group(point, rank, world, init_method, timeout_s)
    device = parallel.rank_device(point)
    if max_memory is not None:
        parallel.start_threads(point.parallel, device, budget.profile_steps > 0)
    with memory_cap.capped(max_memory, device.type, device.index):
        return parallel.measure_rank(point, budget, peak)  # _rank_main leaves the group


def _rank_seeing(
    rank: int, world: int, init_method: str, timeout_s: float, visible: str | None, *args: Any
) -> dict[str, Any] | None:
    """point_rank(...) in a rank that sees only the devices `visible` names (None: all)."""
    if visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    return point_rank(rank, world, init_method, timeout_s, *args)


def run_parallel_point(
    point: Point,
    budget: Budget,
    timeout_s: float | None,
    group_timeout_s: float = GROUP_TIMEOUT_S,
    max_memory: int | None = None,
    visible_devices: str | None = None,
) -> dict[str, Any]:
    """`point`'s row from `point.nproc` ranks on this node, each under `max_memory` bytes, all
    within `timeout_s` seconds; every outcome is a row. `visible_devices`: the ranks' own
    CUDA_VISIBLE_DEVICES (a device pool's, run.pool; None: this process's)."""
    from gpubench.harness import parallel, parallel_probes
    from gpubench.harness.step import unsupported_reason
    from gpubench.probes import load
    from gpubench.science import bottleneck

    started = time.perf_counter()
    reason = unsupported_reason(point) or parallel.unsupported_reason(point)
    if reason is not None:
        return make_row(point, "unsupported", error=reason)
    threads = parallel.rank_threads(point) if point.device.startswith("cpu") else 1
    if parallel_probes.oversubscribed(point.nproc, threads, load.cores()):
        warnings.warn(
            f"parallel points run more processes x threads than this machine's {load.cores()} "
            "cores: their ranks take turns on cores, their scaling is not the hardware's; "
            "their rows are marked oversubscribed",
            OversubscribedWarning,
            stacklevel=2,
        )
    try:
        own = (visible_devices, point, budget, max_memory)
        rows = launch(_rank_seeing, own, point.nproc, timeout_s, group_timeout_s)
    except RankFailure as f:
        error = f.reason
        if f.status == "oom" and max_memory is not None:
            error += f" (under --max-memory {size(max_memory)} per rank)"
        return make_row(
            point,
            f.status,
            error=error[:1000],
            # kept in the results file, as a single process's: an `error` may be gpubench's own bug
            traceback=None if f.status == "oom" else f.traceback,
            world_size=point.nproc,
            backend=parallel.BACKENDS[point.device.split(":")[0]],
            global_batch_size=parallel.per_process_batch(point) * point.nproc,
            per_process_batch_size=parallel.per_process_batch(point),
            point_time_s=time.perf_counter() - started,
        )
    row: dict[str, Any] = bottleneck.classified(rows[0])
    row["point_time_s"] = time.perf_counter() - started
    return row
