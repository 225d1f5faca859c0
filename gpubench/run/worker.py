"""Runs points, speed and convergence alike, and classifies how each ended: every outcome
becomes a result row.

`WorkerRunner` runs each point in a worker process (see context()): a speed point is measured
under a Budget (harness.point), a convergence point trained under its Convergence settings
(science.convergence). A worker serves point after point while they end well, so its set-up is
paid once, not per point; after an out-of-memory error, an exception, a crash or a hang it is
replaced. How a point ended (harness.failure tells out-of-memory from other errors):

- an out-of-memory error (CUDA's torch.OutOfMemoryError; on the CPU MemoryError, std::bad_alloc
  or the allocator's "can't allocate memory") -> status `oom`;
- any other exception -> `error`, with its type and message;
- the worker dying (a signal such as SIGSEGV, or an exit) -> `error`, naming the signal;
- no result within the point timeout -> `timeout`; the worker is killed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from gpubench.config.convergence import Convergence
from gpubench.config.spec import Budget, Point
from gpubench.harness.failure import is_out_of_memory, one_line
from gpubench.probes import load
from gpubench.run import forkserver, memory_cap

# ranks.py (and tests) take it from here
from gpubench.run.forkserver import context  # noqa: F401
from gpubench.store.row import make_row
from gpubench.store.wording import limit, size

# How one point is run: a Budget measures its speed, Convergence settings train it to a target.
Task = Budget | Convergence

# A worker keeps serving points after these; anything else may leave it in a bad state.
_HEALTHY = ("ok", "unsupported", "diverged")
STARTUP_TIMEOUT_S = 300.0


def run_point(point: Point, task: Task, max_memory: int | None = None) -> dict[str, Any]:
    """Run `point` in this process under the memory cap (bytes, None: none) and return its row:
    measured under `task` where it is a Budget, trained under it where it is Convergence
    settings. An exception becomes an `oom` or `error` row. The row says how many cores
    processes outside gpubench's own process tree used meanwhile (`other_load_cores`) and,
    where it timed steps, whether that contended the cores the point needs (`busy`, see
    probes.load.contended); a row that timed none (an error, say) has `busy` null: no figure
    of its was slowed. For a point that timed steps, the load is the one over its measured
    windows."""
    import torch

    with load.OtherLoad() as others:
        row = _run_point(point, task, max_memory)
        timed = bool(row.get("steps_measured"))
        if timed and row.get("other_load_cores") is None:
            others.lengthen()  # steps too short to tell: the load around them
    threads = row.get("torch_threads") or point.threads or torch.get_num_threads()
    if not timed or row.get("other_load_cores") is None:
        # a timed point's load is its measured windows' (harness.point); else the whole point's
        row["other_load_cores"] = others.cores
    needed = load.needed_cores(point.device, threads)
    row["busy"] = load.contended(row["other_load_cores"], needed, load.cores()) if timed else None
    return row


def _run_point(point: Point, task: Task, max_memory: int | None) -> dict[str, Any]:
    import torch

    from gpubench.harness import power_limit
    from gpubench.harness.point import measure_point
    from gpubench.harness.threads import intra_op_threads
    from gpubench.probes.current_device import made_current
    from gpubench.science.convergence import train_point

    device = torch.device(point.device)
    started = time.perf_counter()
    in_use = memory_cap.address_space_bytes() if device.type == "cpu" else None
    try:
        with (
            intra_op_threads(point.threads),
            memory_cap.capped(max_memory, device.type, device.index),
            made_current(device),
            power_limit.applied(point),  # issue 32: set for the point, restored after
        ):
            if isinstance(task, Convergence):
                return train_point(point, task)
            return measure_point(point, task)
    except power_limit.Refused as e:  # issue 32: where the limit cannot be set
        return make_row(point, "unsupported", error=str(e))
    except Exception as e:  # the sweep records the failure as data and goes on
        oom = is_out_of_memory(e)
        reason = one_line(e)
        if oom and max_memory is not None:
            reason += f" (under --max-memory {size(max_memory)}"
            if in_use is not None:  # the cap counts what the worker held before the point too
                reason += f"; {size(in_use)} was in use before the point"
            reason += ")"
        return make_row(
            point,
            "oom" if oom else "error",
            error=reason,
            point_time_s=time.perf_counter() - started,
            # kept in the results file: an `error` may be a bug of gpubench's own, to be reported
            traceback=None if oom else traceback.format_exc(),
        )
    finally:
        gc.collect()
        # a no-op where this process never initialised CUDA (is_available() would start
        # the driver, and map its memory, in a CPU point's worker on a GPU host)
        torch.cuda.empty_cache()


@dataclass(frozen=True)
class Call:
    """A function other than a point's measurement to run in a worker (the verdict's
    confirmation): `target` is "package.module:function", called with `args` under the memory
    cap on `device`. run() returns ("ok", value) or ("error", the error in one line, its
    traceback)."""

    target: str
    args: tuple[Any, ...]
    max_memory: int | None
    device: str

    def run(self) -> tuple[str, Any] | tuple[str, str, str]:
        import importlib

        import torch

        module, name = self.target.split(":")
        device = torch.device(self.device)
        try:
            with memory_cap.capped(self.max_memory, device.type, device.index):
                return ("ok", getattr(importlib.import_module(module), name)(*self.args))
        except Exception as e:  # the caller records it; the worker is replaced
            return ("error", one_line(e), traceback.format_exc())
        finally:
            gc.collect()
            # a no-op where this process never initialised CUDA (is_available() would start
            # the driver, and map its memory, in a CPU point's worker on a GPU host)
            torch.cuda.empty_cache()


class WorkerError(RuntimeError):
    """A Call that failed in its worker: its error in one line, and its traceback."""

    def __init__(self, message: str, traceback_text: str | None = None) -> None:
        super().__init__(message)
        self.traceback = traceback_text


def describe_exit(exitcode: int | None) -> str:
    """'signal SIGSEGV', 'exit status 1', or 'no exit status' for a process's exit code."""
    if exitcode is None:
        return "no exit status"
    if exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


class WorkerRunner:
    """Measures each point in a worker process; see the module docstring for the outcomes.

    `max_memory` caps a point's memory in bytes (see run.memory_cap); `point_timeout_s` is the
    time one point may take once its worker is ready (None: no limit). `startup_s` records how
    long each worker took to start (spawn, imports), the overhead that reusing workers saves.
    """

    def __init__(
        self,
        max_memory: int | None = None,
        point_timeout_s: float | None = None,
        reuse: bool = True,
    ) -> None:
        self.max_memory = max_memory
        self.point_timeout_s = point_timeout_s
        self.reuse = reuse
        self.startup_s: list[float] = []
        self.worker_address_space: int | None = None  # bytes, of the latest worker when ready
        self._ctx = forkserver.context()
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None
        self._lifeline: Connection | None = None  # never written: its closing ends the worker
        # what a worker runs: worker_main(*_target_args, conn, lifeline) (run.pool's differs)
        self._target: Any = worker_main
        self._target_args: tuple[Any, ...] = ()

    def run(self, point: Point, task: Task) -> dict[str, Any]:
        """`point`'s row, measured (a Budget) or trained (Convergence settings) in a worker."""
        proc, conn = self._ready_worker()
        started = time.perf_counter()
        conn.send((point, task, self.max_memory))
        if not conn.poll(self.point_timeout_s):
            self._stop_worker()
            return make_row(
                point,
                "timeout",
                error=f"no result within {limit(self.point_timeout_s)} (--point-timeout); "
                "the worker process was killed",
                point_time_s=time.perf_counter() - started,
            )
        try:
            row: dict[str, Any] = conn.recv()
        except EOFError:
            proc.join(timeout=10)
            how = describe_exit(proc.exitcode)
            reason = f"the worker process died while measuring the point ({how})"
            if self.max_memory is not None:
                reason += f"; it ran under --max-memory {size(self.max_memory)}"
            self._stop_worker()
            return make_row(
                point, "error", error=reason, point_time_s=time.perf_counter() - started
            )
        if not self.reuse or row["status"] not in _HEALTHY:
            self._stop_worker()
        return row

    def call(self, call: Call, timeout_s: float | None) -> Any:
        """`call`'s value, computed in a worker; WorkerError where it raised, its worker died or
        it took longer than `timeout_s` (the worker is then replaced)."""
        proc, conn = self._ready_worker()
        conn.send(call)
        if not conn.poll(timeout_s):
            self._stop_worker()
            raise WorkerError(f"no result within {limit(timeout_s)}; the worker was killed")
        try:
            answer = conn.recv()
        except EOFError:
            proc.join(timeout=10)
            how = describe_exit(proc.exitcode)
            self._stop_worker()
            raise WorkerError(f"the worker process died ({how})") from None
        if answer[0] != "ok":
            self._stop_worker()
            raise WorkerError(answer[1], answer[2])
        return answer[1]

    def close(self, grace_s: float = 5.0) -> None:
        """Ask the worker to exit, and kill it if it has not within `grace_s` seconds (0: a
        point in flight is abandoned at once)."""
        if self._conn is not None:
            # the worker may be gone already; _stop_worker reaps it either way
            with contextlib.suppress(OSError, ValueError):
                self._conn.send(None)
        self._stop_worker(grace_s=grace_s)

    def _ready_worker(self) -> tuple[BaseProcess, Connection]:
        if self._proc is not None and self._conn is not None and self._proc.is_alive():
            return self._proc, self._conn
        self._stop_worker()
        t0 = time.perf_counter()
        target, args = self._target, self._target_args
        proc, parent, lifeline = forkserver.spawn(self._ctx, target, args, "gpubench-worker")
        self._proc, self._conn, self._lifeline = proc, parent, lifeline
        try:
            ready = parent.poll(STARTUP_TIMEOUT_S) and parent.recv()
        except EOFError:
            ready = None
        if not ready:
            proc.join(timeout=10)
            code = describe_exit(proc.exitcode)
            self._stop_worker()
            raise RuntimeError(f"a gpubench worker process failed to start ({code})")
        self.startup_s.append(time.perf_counter() - t0)
        self.worker_address_space = ready[1]
        return proc, parent

    def _stop_worker(self, grace_s: float = 0.0) -> None:
        proc, conn, lifeline = self._proc, self._conn, self._lifeline
        self._proc = self._conn = self._lifeline = None
        if proc is not None:
            proc.join(timeout=grace_s)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
            proc.close()
        if conn is not None:
            conn.close()
        if lifeline is not None:
            lifeline.close()


def worker_main(conn: Connection, lifeline: Connection) -> None:
    """A worker's life: import torch once, then measure points sent by the parent until it
    sends None or goes away. Ctrl-C is the parent's to handle, so the worker ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(lifeline,), daemon=True).start()
    # What the fork server imported stays as it is: the collector need never scan (and so copy)
    # those objects' memory pages in each worker.
    gc.freeze()
    import torch

    # Start the intra-op thread pool now, uncapped: threads created later under an address-space
    # cap could fail to start, which the OpenMP runtime turns into an abort rather than an error.
    a = torch.ones(256, 256)
    (a @ a).sum().item()
    conn.send(("ready", memory_cap.address_space_bytes()))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        # Each request starts with torch.compile's caches empty: they hold guards for every
        # model compiled before in this worker, and past torch._dynamo's recompile limit (8 per
        # code object) a later point's "compile" would run eager without a word (the cnn grid
        # of 36 compiled points did). A request's own models (an interleaved Call's candidates)
        # share the caches while it runs.
        torch._dynamo.reset()
        if isinstance(message, Call):
            conn.send(message.run())
            continue
        point, task, max_memory = message
        conn.send(run_point(point, task, max_memory))


def _exit_with_parent(lifeline: Connection) -> None:
    """Block until the parent's end of `lifeline` closes, which happens when the parent exits
    or is killed (SIGKILL included), then end this worker at once: a killed sweep must not
    leave a worker measuring on, or hanging, without it."""
    with contextlib.suppress(EOFError, OSError):
        lifeline.recv()
    os._exit(1)
