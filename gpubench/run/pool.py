"""A device pool on one node (issue 53): independent points measured at once, one worker per
device, each worker started with CUDA_VISIBLE_DEVICES set to its device, so that a point's
`cuda` is that device (NVML keeps mapping by UUID). The parent deals the points and stays the
only writer of the results file (store.results).

- Points are dealt largest budget first (run.shard.expected_cost: a point of nproc k costs k
  times one of a single process). A point that needs k devices (DDP/FSDP, nproc = k) waits for
  k free devices, and the points behind it that fit the devices free now are dealt meanwhile
  (first fit in that order): it never holds back single-device points.
- Each outcome is one row, as in a single worker (run.worker): a crash, a hang (the point
  timeout) or an out-of-memory error is that point's row, and the device gets a fresh worker for
  its next point. Nothing is measured again of its own accord.
- The host's cores are split among the workers (each worker's torch threads: cores // devices).
- Each row records the devices it ran on (`pool_devices`, as CUDA_VISIBLE_DEVICES named them)
  and the most points measured beside it while it ran (`points_beside`).
- A stop (the first Ctrl-C: should_stop) ends the dealing; the points in flight finish and are
  written. A second Ctrl-C or SIGTERM (KeyboardInterrupt) ends every worker at once: every row
  written before stays, the points in flight leave none, and `--resume` measures the rest.
- A pooled sweep measures the batch sizes listed, as a shard does: a series grows (issue 42)
  only from its own rows in order, on one device (run.batch_growth.grows).
- On real devices a CPU point is dealt only when every device is free and holds them all: it
  uses the host's cores, which the GPU points' workers drive their devices from.

Test hook: GPUBENCH_FAKE_DEVICES=N (read here alone) gives N fake devices on a machine without
CUDA: "all" is 0..N-1, CPU points are dealt one device each like GPU points, and each worker
still sees its own CUDA_VISIBLE_DEVICES, so the tests run the real pool on the CPU.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.probes import load
from gpubench.run import cost, cpu_watts, phases, ranks
from gpubench.run.shard import expected_cost
from gpubench.run.unmeasured import emulated, note_oom, ran_out, skipped_oom
from gpubench.run.worker import Task, WorkerRunner, worker_main

FAKE_DEVICES_ENV = "GPUBENCH_FAKE_DEVICES"
POOL_FILE = "pool.json"
# What the folder's pool.json says of the verdict's re-measurement (run.confirm)
DRAINED = (
    "the verdict's re-measurement ran after every point, with the pool drained: one worker "
    "at a time, the other devices idle"
)
OnRow = Callable[[dict[str, Any], int, int], None]


def fake_count() -> int | None:
    """The fake devices GPUBENCH_FAKE_DEVICES asks for (a test hook), or None where unset."""
    text = os.environ.get(FAKE_DEVICES_ENV)
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{FAKE_DEVICES_ENV}={text!r}; allowed: a number of devices >= 1")
    return int(text)


def parse(text: str) -> str | tuple[str, ...]:
    """`--gpus`'s value checked for its form: "all", or device indices "0,1,3" (each once)."""
    text = text.strip()
    if text == "all":
        return text
    ids = [t.strip() for t in text.split(",")]
    if not ids or not all(t.isdigit() for t in ids) or len(set(ids)) != len(ids):
        raise ConfigError(
            f"invalid --gpus {text!r}; allowed: all, or device indices each once, e.g. 0,1,3"
        )
    return tuple(str(int(t)) for t in ids)


def resolve(given: str | tuple[str, ...]) -> tuple[str, ...]:
    """The devices of the pool: every CUDA device for "all", else those given, each checked
    against the devices this machine has. A machine without CUDA is refused (ConfigError, one
    line), unless GPUBENCH_FAKE_DEVICES gives it fake ones."""
    fake = fake_count()
    if fake is not None:
        count = fake
    else:
        import torch  # only here: the flag's parsing stays light

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(
                "--gpus needs CUDA devices, and this machine has none; allowed: a sweep "
                "without --gpus (one point at a time)"
            )
    if given == "all":
        return tuple(str(i) for i in range(count))
    assert isinstance(given, tuple)
    missing = [d for d in given if int(d) >= count]
    if missing:
        raise ConfigError(
            f"--gpus names device {missing[0]}, and this machine has {count} "
            f"(0..{count - 1}); allowed: all, or indices from 0 to {count - 1}"
        )
    return given


def check(spec: SweepSpec, devices: Sequence[str]) -> None:
    """Refuse what the pool cannot deal (ConfigError, before anything is written): a point on
    a numbered device (each worker sees only its own, as cuda), a parallel point whose nproc
    exceeds the pool's devices, and a convergence sweep (its points keep to one worker)."""
    if spec.mode != "speed":
        raise ConfigError('--gpus deals speed points; allowed: a sweep of mode = "speed"')
    numbered = [d for d in spec.resolved_devices() if d.startswith("cuda:")]
    if numbered:
        raise ConfigError(
            f"--gpus gives each point its own device, and the suite names {numbered[0]}; "
            "allowed: devices = cuda (or auto)"
        )
    parallel = any(p != "none" for p in spec.parallel)
    over = [n for n in spec.nproc if n > len(devices) and parallel]
    if over:
        raise ConfigError(
            f"nproc {over[0]} needs more devices than --gpus gives ({len(devices)}); "
            f"allowed: nproc up to {len(devices)}"
        )


def need(point: Point, devices: int, fake: bool) -> int:
    """The devices `point` holds while it runs: its processes; on real devices a CPU point
    holds all of them (it uses the host cores that drive them)."""
    if point.device == "cpu" and not fake:
        return devices
    return point.nproc


def deal_order(points: Sequence[Point], spec: SweepSpec) -> list[Point]:
    """`points` largest budget first (run.shard.expected_cost), ties in their own order."""
    return sorted(points, key=lambda p: -expected_cost(p, spec))


def next_fit(waiting: Sequence[Point], free: int, needs: Callable[[Point], int]) -> int | None:
    """The index in `waiting` (in dealing order) of the first point whose devices fit the
    `free` ones, or None: a point that needs more waits without holding back those behind it."""
    for i, p in enumerate(waiting):
        if needs(p) <= free:
            return i
    return None


class DeviceWorker(WorkerRunner):
    """A WorkerRunner whose workers see only `devices` (CUDA_VISIBLE_DEVICES, set in the worker
    before CUDA starts) and use `threads` intra-op threads (None: torch's default, as a drained
    pool's worker, which has the host to itself)."""

    def __init__(
        self,
        devices: str,
        threads: int | None,
        max_memory: int | None,
        point_timeout_s: float | None,
    ) -> None:
        super().__init__(max_memory, point_timeout_s)
        self.devices = devices
        self._target = device_worker_main
        self._target_args = (devices, threads)

    def abort(self) -> None:
        """Kill the worker now (a second Ctrl-C or SIGTERM): its point in flight ends unwritten."""
        proc = self._proc
        if proc is not None and proc.is_alive():
            proc.kill()


def device_worker_main(
    devices: str, threads: int | None, conn: Connection, lifeline: Connection
) -> None:
    """run.worker.worker_main, seeing only `devices` with `threads` threads (None: torch's)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    worker_main(conn, lifeline)


def drained_worker(
    devices: Sequence[str], max_memory: int | None, timeout_s: float | None
) -> WorkerRunner:
    """The worker of what runs while the pool is drained (the model checks before the points,
    the verdict's re-measurement after them): a WorkerRunner seeing only the pool's first
    device, with the host's threads; a plain WorkerRunner where `devices` is empty (no pool).
    It never strays to a device outside the pool (physical GPU 0 under --gpus 1,3)."""
    if not devices:
        return WorkerRunner(max_memory, timeout_s)
    return DeviceWorker(devices[0], None, max_memory, timeout_s)


@dataclass
class _Flight:
    """A point in flight on `devices`, dealt at `started` (time.time())."""

    point: Point
    devices: tuple[str, ...]
    started: float
    beside: int = 0
    worker_s: float = 0.0
    row: dict[str, Any] = field(default_factory=dict)


def measure(
    run: Any,  # run.context.RunContext (not imported: it imports this package's worker)
    spec: SweepSpec,
    points: Sequence[Point],
    done_rows: Sequence[dict[str, Any]],
    devices: Sequence[str],
    on_row: OnRow | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> None:
    """Measure the points of `points` that `done_rows` lacks in a pool of `devices`, appending
    each row to `run`'s store as it comes back (see the module docstring). Returns once every
    point is written, or the dealing stopped and the points in flight are; a KeyboardInterrupt
    (SIGTERM's Terminated too) kills the workers and is raised again."""
    from gpubench.science import bottleneck

    fake = fake_count() is not None
    done = {Point.of(r).key() for r in done_rows}
    todo = [p for p in dict.fromkeys(points) if p.key() not in done]
    left_out = emulated(spec, todo)
    todo = [p for p in todo if p not in left_out]
    if left_out:
        from gpubench.run import batch_growth
        from gpubench.store.growth_record import Unmeasured

        gone = [Unmeasured(p.to_dict(), "emulated", why) for p, why in left_out.items()]
        batch_growth.record((), gone, {}).write(run.store.dir)
    total, finished = len(todo) + len(done), len(done)
    if on_start is not None:
        on_start(total, finished)
    write_record(run.store, devices, fake)
    oom_at = ran_out(done_rows)
    task: Task = spec.budget if spec.profile else dataclasses.replace(spec.budget, profile_steps=0)
    assert isinstance(task, Budget)
    threads = max(1, load.cores() // len(devices))
    workers = {
        d: DeviceWorker(d, threads, run.options.max_memory, run.options.point_timeout_s)
        for d in devices
    }
    free = list(devices)
    waiting = deal_order(todo, spec)
    flying: dict[int, _Flight] = {}
    back: queue.Queue[tuple[int, dict[str, Any] | BaseException]] = queue.Queue()

    def needs(p: Point) -> int:
        return need(p, len(devices), fake)

    def fly(n: int, flight: _Flight) -> None:
        try:
            p = flight.point
            if p.parallel != "none":
                assert isinstance(task, Budget)
                row = ranks.run_parallel_point(
                    p,
                    task,
                    run.options.point_timeout_s,
                    max_memory=run.options.max_memory,
                    visible_devices=",".join(flight.devices),
                )
            else:
                worker = workers[flight.devices[0]]
                before = len(worker.startup_s)
                row = bottleneck.classified(worker.run(p, task))
                flight.worker_s = sum(worker.startup_s[before:])
            back.put((n, row))
        except BaseException as e:  # raised in the parent's thread, below
            back.put((n, e))

    def write(row: dict[str, Any], flight: _Flight | None) -> None:
        nonlocal finished
        if flight is not None:
            row["pool_devices"] = ",".join(flight.devices)
            row["points_beside"] = flight.beside
        row.update(cost.columns(row, spec.prices))
        row.update(cpu_watts.columns(row, spec.cpu_watts))
        run.store.append(row)
        finished += 1
        if on_row is not None:
            on_row(row, finished, total)

    threads_started: list[threading.Thread] = []
    serial = 0
    try:
        while waiting or flying:
            stopping = should_stop is not None and should_stop()
            while waiting and not stopping:
                i = next_fit(waiting, len(free), needs)
                if i is None:
                    break
                p = waiting.pop(i)
                skipped = skipped_oom(oom_at, p)
                if skipped is not None:
                    write(skipped, None)
                    continue
                held = tuple(free[: needs(p)])
                del free[: needs(p)]
                serial += 1
                flying[serial] = _Flight(p, held, time.time())
                for f in flying.values():
                    f.beside = max(f.beside, len(flying) - 1)
                t = threading.Thread(target=fly, args=(serial, flying[serial]), daemon=True)
                t.name = f"gpubench-pool-{serial}"
                threads_started.append(t)
                t.start()
            if stopping and not flying:
                break
            try:
                n, got = back.get(timeout=0.2)  # a signal's handler runs meanwhile
            except queue.Empty:
                continue
            flight = flying.pop(n)
            free.extend(flight.devices)
            free.sort(key=list(devices).index)
            if isinstance(got, BaseException):
                raise got
            ended = time.time()
            if got["status"] == "oom":
                note_oom(oom_at, flight.point)
            write(got, flight)
            name = phases.point_name(flight.point)
            run.log.point(name, flight.started, ended, time.time(), flight.worker_s)
    except BaseException:
        for w in workers.values():
            w.abort()  # a point in flight leaves no row
        raise
    finally:
        for t in threads_started:
            t.join(timeout=10)  # a parallel point's ranks end with this process
        for w in workers.values():
            w.close(grace_s=0 if flying else 5.0)


def write_record(store: Any, devices: Sequence[str], fake: bool) -> None:
    """pool.json in `store`'s folder (a store.results.ResultStore): the pool's devices, whether
    they were fake (the test hook), and how the verdict's re-measurement ran (DRAINED)."""
    record = {"devices": list(devices), "fake": fake, "confirmation": DRAINED}
    store.write_json(POOL_FILE, record)
