"""A sweep launched by torchrun, on one node or several: every process torchrun starts runs the
suite's parallel points whose nproc equals its processes per node, in one process group (gloo for
CPU points, NCCL for CUDA ones); rank 0 decides which points run (broadcast), holds the folder's
lock (checking it as `--resume` does) and alone writes the rows. The folder is always resumed, so
a job torchrun restarts goes on where it stopped.

A point that fails ends the launch: each rank that meets an error notes it in the rendezvous
store, rank 0 writes one row naming first the rank that died or failed (`cause`), and every
rank exits 1. A launch whose ranks were only stopped (SIGTERM) writes no row.

A killed rank (SIGKILL, the out-of-memory killer) says nothing and its peers see only a lost
connection, so each rank registers its host and pid, and each that meets an error notes it in the
store in order. Rank 0 names, as "rank R of W: ...", first the ranks gone from its host, then
those that never answered, then the notes, its own last.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import socket
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point, SweepSpec
from gpubench.config.validate import validate
from gpubench.harness.failure import is_out_of_memory, one_line
from gpubench.probes import process_tree
from gpubench.run.context import RunContext, RunOptions
from gpubench.run.sweep import plan
from gpubench.science import scaling
from gpubench.store import env, suite_record
from gpubench.store.results import ResultStore, read_rows
from gpubench.store.row import make_row
from gpubench.store.wording import seconds

_RECORDED = "gpubench/failed/{index}/recorded"


def run_launched(
    spec: SweepSpec,
    out: Path,
    group_timeout_s: float,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    on_failure: Callable[[], None] | None = None,
) -> int:
    """Run this rank's part of `spec` into `out` (on rank 0's machine); the exit status: 1 after
    a failure (the launch stops there), else 0. After one, rank 0 calls `on_failure` once the
    row is written, before the other ranks may exit (torchrun then stops rank 0)."""
    import torch.distributed as dist

    from gpubench.harness import parallel

    validate(spec)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    cuda_device(spec, int(os.environ["LOCAL_RANK"]))
    # One group for the whole launch: gloo for CPU tensors, NCCL for CUDA ones where built in.
    backend = "cpu:gloo,cuda:nccl" if dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend, timeout=dt.timedelta(seconds=group_timeout_s))
    with contextlib.ExitStack() as hold:
        hold.callback(dist.destroy_process_group)
        # Rank 0 holds the folder as a plain sweep does, resumed where it was started: launches
        # of other --nproc-per-node share it (the axes may change, not settings, nor machine).
        run = None
        if rank == 0:
            options = RunOptions(resume=(out / suite_record.FILE).is_file(), extend=True)
            run = hold.enter_context(RunContext(out, options))
            run.open(spec)
        hold.enter_context(_stopped_by_sigterm())
        store = dist.distributed_c10d._get_default_store()
        register(store, rank)
        todo: list[Any] = [_todo(run, spec, local_world) if run is not None else None]
        dist.broadcast_object_list(todo, src=0)
        points: list[tuple[Point, str | None]] = todo[0]
        results = run.store if run is not None else None
        known = read_rows(out) if results is not None and results.path.is_file() else []
        for i, (point, reason) in enumerate(points):
            started = time.perf_counter()
            if reason is not None:
                row: dict[str, Any] | None = make_row(point, "unsupported", error=reason)
            else:
                try:
                    row = parallel.measure_rank(point, spec.budget)
                except Exception as e:  # the launch ends here; rank 0 records how
                    _SIGTERM.ignore = True  # torchrun's stop must not cut the record short
                    note(store, i, rank, world, e)
                    if rank == 0:
                        found = cause(store, i, world, e, group_timeout_s)
                        if not found.stopped_only:
                            elapsed = time.perf_counter() - started
                            row = make_row(
                                point, found.status, error=found.reason[:1000], point_time_s=elapsed
                            )
                            _write(results, row, known, on_row)
                        if on_failure is not None:
                            on_failure()
                    _recorded(store, i, rank, group_timeout_s)
                    return 1
            _write(results, row, known, on_row)
        dist.barrier()  # no rank leaves while another still needs rank 0's rendezvous store
        return 0
    raise AssertionError("unreachable")  # the block returns; mypy cannot see an ExitStack does


def cuda_device(spec: SweepSpec, local_rank: int) -> int | None:
    """Make CUDA device `local_rank` current where the launch measures CUDA points and the node
    has it; return it, else None (a CPU launch on a host with fewer GPUs than ranks must not
    select one: "invalid device ordinal")."""
    import torch

    if not any(torch.device(d).type == "cuda" for d in spec.resolved_devices()):
        return None
    if local_rank >= torch.cuda.device_count():
        return None
    torch.cuda.set_device(local_rank)
    return local_rank


_SIGTERM = types.SimpleNamespace(ignore=False)


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM (torchrun stopping the group) raises Stopped in the running point, so the rank
    notes why it ended; ignored while a failure is being recorded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if not _SIGTERM.ignore:
            raise Stopped()

    _SIGTERM.ignore = False
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _todo(run: RunContext, spec: SweepSpec, local_world: int) -> list[tuple[Point, str | None]]:
    """Rank 0, its folder open: write suite.json and env.json; the points to measure, each with
    the reason it cannot run (None where it can)."""
    import torch

    from gpubench.harness import parallel
    from gpubench.harness.step import unsupported_reason

    out = run.dir
    run.write_suite(spec)
    if not (out / env.ENV_FILE).is_file():  # in this rank: the ranks hold the devices
        run.store.write_json(env.ENV_FILE, env.capture(spec.resolved_devices(), spec.precisions))
        # the calibration's matmul and copy buffers go back to the device before rank 0's
        # points (a no-op where this rank never initialised CUDA)
        torch.cuda.empty_cache()
    done = {Point.of(r).key() for r in read_rows(out)} if run.store.path.is_file() else set()
    planned = plan(spec, out, RunOptions(point_timeout_s=None))
    ours = [p for p in planned if p.parallel != "none" and p.nproc == local_world]
    # issue 23: the world (nproc * nodes) is in each point's identity
    points = spec.on_nodes(ours, int(os.environ["WORLD_SIZE"]) // local_world)
    if not points:
        raise ConfigError(
            f"suite {spec.name!r} has no ddp or fsdp point with nproc = {local_world}, the "
            "processes per node torchrun started; allowed: --nproc-per-node equal to one of "
            f"the suite's nproc values {list(spec.nproc)}"
        )
    return [
        (p, unsupported_reason(p) or parallel.unsupported_reason(p))
        for p in points
        if p.key() not in done
    ]


def _recorded(store: Any, index: int, rank: int, group_timeout_s: float) -> None:
    """Rank 0 says the failure's row is written; the others wait for it (up to twice the group
    timeout), so that torchrun does not stop rank 0 before it has written."""
    key = _RECORDED.format(index=index)
    if rank == 0:
        store.set(key, "1")
        return
    with contextlib.suppress(RuntimeError):  # rank 0 may be gone: nothing left to wait for
        store.wait([key], dt.timedelta(seconds=2 * group_timeout_s))


def _write(
    store: ResultStore | None,
    row: dict[str, Any] | None,
    known: list[dict[str, Any]],
    on_row: Callable[[dict[str, Any]], None] | None,
) -> None:
    if store is None or row is None:
        return
    scaling.fill_efficiency([row], known)
    known.append(row)
    store.append(row)
    if on_row is not None:
        on_row(row)


_PREFIX = "gpubench/failed"
_RANK = "gpubench/rank"
# How often rank 0 looks again for notes and gone peers: torchrun's agent checks its workers
# every 0.1 s (--monitor-interval's default in torch 2.13), so a death shows no sooner anyway.
POLL_S = 0.1


class Stopped(Exception):
    """SIGTERM while a point ran: torchrun stops every rank this way once one has ended."""

    def __init__(self) -> None:
        super().__init__("stopped by SIGTERM (torchrun stops the group once a rank has ended)")


@dataclass(frozen=True)
class Cause:
    """The row's status (`oom` or `error`) and reason; `stopped_only`: every rank was only
    stopped by SIGTERM (a user stopped the job; no point failed)."""

    status: str
    reason: str
    stopped_only: bool


def register(store: Any, rank: int) -> None:
    """This rank's host and pid, for rank 0 to tell whether it still runs."""
    store.set(f"{_RANK}/{rank}", json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))


def note(store: Any, index: int, rank: int, world: int, exc: BaseException) -> None:
    """This rank's error at point `index`, numbered in the order the ranks wrote theirs."""
    order = store.add(f"{_PREFIX}/{index}/count", 1)
    store.set(
        f"{_PREFIX}/{index}/{rank}",
        json.dumps(
            {
                "order": order,
                "oom": is_out_of_memory(exc),
                "stopped": isinstance(exc, Stopped),
                "reason": f"rank {rank} of {world}: {one_line(exc)}",
            }
        ),
    )


def cause(store: Any, index: int, world: int, own: BaseException, wait_s: float) -> Cause:
    """Rank 0, after its own error `own` at point `index`: what ended the point, once each rank
    has noted its error or is gone (waiting up to `wait_s`, the group timeout)."""
    deadline = time.monotonic() + wait_s
    notes: dict[int, dict[str, Any]] = {}
    gone: list[int] = []
    while True:
        for r in range(1, world):
            if r not in notes and store.check([f"{_PREFIX}/{index}/{r}"]):
                notes[r] = json.loads(store.get(f"{_PREFIX}/{index}/{r}"))
        gone = [r for r in range(1, world) if r not in notes and _gone(store, r)]
        silent = [r for r in range(1, world) if r not in notes and r not in gone]
        if not silent or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    parts = [
        f"rank {r} of {world} died without an error of its own (its process ended: a signal "
        "such as SIGKILL from a user or the out-of-memory killer)"
        for r in gone
    ]
    parts += [
        f"rank {r} of {world} said nothing within {seconds(wait_s)} (stuck, or on a machine that "
        "is gone)"
        for r in silent
    ]
    spoken = [n for _, n in sorted(notes.items(), key=lambda item: item[1]["order"])]
    parts += [str(n["reason"]) for n in spoken]
    parts.append(f"rank 0 of {world}: {one_line(own)}")
    first_oom = not gone and not silent and bool(spoken and spoken[0]["oom"])
    oom = first_oom or (not parts[:-1] and is_out_of_memory(own))
    stopped_only = (
        not gone and not silent and isinstance(own, Stopped) and all(n["stopped"] for n in spoken)
    )
    return Cause("oom" if oom else "error", "; then ".join(parts), stopped_only)


def _gone(store: Any, rank: int) -> bool:
    """Whether `rank`'s process has ended; only a process on this host can be seen to."""
    key = f"{_RANK}/{rank}"
    if not store.check([key]):
        return False
    where = json.loads(store.get(key))
    if where["host"] != socket.gethostname():
        return False
    if os.path.isdir("/proc"):
        fields = process_tree.stat_fields(int(where["pid"]))
        return fields is None or fields[0] in ("Z", "X")  # ended, maybe not yet reaped
    try:
        os.kill(int(where["pid"]), 0)
    except ProcessLookupError:
        return True
    return False
