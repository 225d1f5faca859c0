"""A sweep launched by torchrun, across one node or several: every process torchrun starts runs
this, the suite's parallel points whose nproc equals torchrun's processes per node, in one
process group (gloo for CPU points, NCCL for CUDA ones), and rank 0 alone writes the rows.

The run folder is on rank 0's machine and is always resumed: a point that has a row is not
measured again, so a job that torchrun restarts (`--max-restarts`) goes on where it stopped.
Which points run is rank 0's decision, broadcast, so every rank agrees without reading files.

A point that fails ends the launch: the rank that failed records its reason in the rendezvous
store, the others meet the process-group timeout in their next collective, rank 0 writes one
row (`oom` or `error`) naming the failed rank, and every rank exits with status 1, so torchrun
stops the group (and restarts it, if asked, at the next point).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point, SweepSpec
from gpubench.config.validate import validate
from gpubench.harness.failure import is_out_of_memory, one_line
from gpubench.run import folder
from gpubench.run.sweep import _row_key, plan
from gpubench.science import scaling
from gpubench.store import env
from gpubench.store.results import ResultStore, read_rows
from gpubench.store.row import make_row

_FAILED = "gpubench/failed"


def under_torchrun() -> bool:
    """Whether this process is a worker that torchrun (the elastic agent) started."""
    return "TORCHELASTIC_RUN_ID" in os.environ and "LOCAL_WORLD_SIZE" in os.environ


def run_launched(
    spec: SweepSpec,
    out: Path,
    group_timeout_s: float,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """Run this rank's part of `spec` into run folder `out` (on rank 0's machine); returns the
    exit status: 0 when every point ended well, 1 after a failure (the launch stops there)."""
    import torch
    import torch.distributed as dist

    from gpubench.harness import parallel

    validate(spec)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    # One group for the whole launch: gloo for CPU tensors, NCCL for CUDA ones where built in.
    backend = "cpu:gloo,cuda:nccl" if dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend, timeout=dt.timedelta(seconds=group_timeout_s))
    try:
        todo: list[Any] = [_todo(spec, out, local_world) if rank == 0 else None]
        dist.broadcast_object_list(todo, src=0)
        points: list[tuple[Point, str | None]] = todo[0]
        store = ResultStore(out) if rank == 0 else None
        known = read_rows(out) if store is not None and store.path.is_file() else []
        for i, (point, reason) in enumerate(points):
            started = time.perf_counter()
            if reason is not None:
                row: dict[str, Any] | None = make_row(point, "unsupported", error=reason)
            else:
                try:
                    row = parallel.measure_rank(point, spec.budget)
                except Exception as e:  # the launch ends here; rank 0 records how
                    row = _failed_row(point, i, e, rank, world, time.perf_counter() - started)
                    _write(store, row, known, on_row)
                    _recorded(i, rank, group_timeout_s)
                    return 1
            _write(store, row, known, on_row)
        dist.barrier()  # no rank leaves while another still needs rank 0's rendezvous store
        return 0
    finally:
        dist.destroy_process_group()


def _todo(spec: SweepSpec, out: Path, local_world: int) -> list[tuple[Point, str | None]]:
    """Rank 0: prepare the run folder; the points to measure, each with the reason it cannot
    run (None where it can)."""
    from gpubench.harness import parallel
    from gpubench.harness.step import unsupported_reason

    store = ResultStore(out)
    if (out / "suite.json").is_file():
        # Launches of other --nproc-per-node share a folder: the axes may change, not settings.
        folder.check_resumable(out, spec, extend=True)
        folder.repair_torn_tail(store.path)
    store.write_json("suite.json", spec.to_dict())
    if not (out / "env.json").is_file():
        store.write_json("env.json", env.capture(spec.resolved_devices(), spec.precisions))
    done = {_row_key(r) for r in read_rows(out)} if store.path.is_file() else set()
    ours = [p for p in plan(spec, out) if p.parallel != "none" and p.nproc == local_world]
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


def _failed_row(
    point: Point, index: int, exc: Exception, rank: int, world: int, elapsed_s: float
) -> dict[str, Any] | None:
    """On a failed rank other than 0: its reason into the rendezvous store, then None. On
    rank 0: the row, naming the rank that failed first where one said so."""
    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    key = f"{_FAILED}/{index}"
    oom = is_out_of_memory(exc)
    reason = f"rank {rank} of {world}: {one_line(exc)}"
    if rank != 0:
        store.set(key, f"{'oom' if oom else 'error'}|{reason}")
        return None
    if store.check([key]):  # another rank failed first; this rank's error followed from it
        status, cause = store.get(key).decode().split("|", 1)
        oom, reason = status == "oom", f"{cause}; then {reason}"
    return make_row(point, "oom" if oom else "error", error=reason[:1000], point_time_s=elapsed_s)


def _recorded(index: int, rank: int, group_timeout_s: float) -> None:
    """Rank 0 says the failure's row is written; the others wait for that (or twice the group
    timeout), so that torchrun, which stops the group when one rank exits, does not stop
    rank 0 before it has written."""
    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    key = f"{_FAILED}/{index}/recorded"
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
