"""The loader data mode's batches and what feeding them costs (issue 31).

`LoaderBatches` serves a point's steps from a DataLoader and records, per step, the wait: the
host seconds spent in the iterator's next() (the training loop blocked on its batch) plus, on
CUDA, the device seconds of the host-to-device copy (timed with CUDA events, read after the
window; on the step's own stream, so never overlapped with compute). `values()` turns the waits
of the measured steps into the row's columns, measures the pipeline's own rate with the model
removed, and records the CPU time of the loader's processes."""

from __future__ import annotations

import contextlib
import multiprocessing
import statistics
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from gpubench.config.spec import Point
from gpubench.data.pipelines import LoaderSettings, build_loader
from gpubench.harness.timing import Measurement, synchronize
from gpubench.models.workload import Workload
from gpubench.probes import process_tree
from gpubench.probes.current_device import stream_of

# The pipeline's own rate: at least PIPELINE_MIN_BATCHES batches, then on while under
# PIPELINE_S seconds and PIPELINE_MAX_BATCHES batches (after the batches the workers had
# already loaded ahead, which cost nothing to take).
PIPELINE_MIN_BATCHES = 3
PIPELINE_MAX_BATCHES = 64
PIPELINE_S = 0.5


def loader_reason(point: Point) -> str | None:
    """Why a loader point cannot run as asked, or None (a loader option without what it needs,
    such as pinned memory on the CPU, is config.needs' to refuse)."""
    if point.data != "loader":
        return None
    if point.parallel != "none":
        return "the loader data mode feeds single-process points; parallel ranks take device data"
    return None


@contextlib.contextmanager
def _children_allowed() -> Iterator[None]:
    """Lets a daemonic process (a sweep's point worker is one, so that it ends with the sweep)
    start the DataLoader's worker processes, which multiprocessing refuses to daemons. Nothing is
    lost: each DataLoader worker watches its parent and exits when it is gone."""
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
    daemon = config.get("daemon")
    config["daemon"] = False
    try:
        yield
    finally:
        if daemon is not None:
            config["daemon"] = daemon


class LoaderBatches:
    """An endless supply of `(inputs, targets)` on `device` from `point`'s DataLoader, epoch
    after epoch. `held_bytes`: one batch's bytes on the device (the loader's queue of batches
    loaded ahead is on the host, in its workers)."""

    def __init__(self, point: Point, workload: Workload) -> None:
        self.device = torch.device(point.device)
        self.cuda = self.device.type == "cuda"
        self.channels_last = point.channels_last
        self.settings = LoaderSettings(
            batch_size=point.per_process_batch(),
            workers=point.loader_workers or 0,
            pin_memory=bool(point.pin_memory),
            prefetch=point.prefetch,
            persistent_workers=bool(point.persistent_workers),
            seed=point.seed,
        )
        self.loader, self.what = build_loader(workload, self.settings, point.loader)
        self.held_bytes = 0
        self.next_s: list[float] = []  # host seconds in next(), one per batch served
        self._copies: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._it: Any = None
        try:
            self._len: int | None = len(self.loader)
        except TypeError:  # an IterableDataset without __len__
            self._len = None
        self._served = 0  # batches served in this epoch
        self.batches = 0  # in all
        self._main_cpu_s = 0.0  # this thread's CPU in next(): the loading itself at 0 workers
        self._worker_cpu_s: dict[int, float] = {}

    def _raw(self) -> tuple[Tensor, Tensor]:
        """The next batch on the host, a new epoch (new workers, unless persistent) as needed."""
        if self._it is None or (self._len is not None and self._served >= self._len):
            self._start()
        try:
            batch = next(self._it)
        except StopIteration:  # an iterable data set of no length: its epoch ended here
            self._start()
            batch = next(self._it)
        self._served += 1
        self.batches += 1
        return batch[0], batch[1]

    def _start(self) -> None:
        with _children_allowed():
            self._it = iter(self.loader)
        self._served = 0

    def _to_device(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        if not self.cuda:
            return x, y
        nb = self.settings.pin_memory
        return x.to(self.device, non_blocking=nb), y.to(self.device, non_blocking=nb)

    def next(self) -> tuple[Tensor, Tensor]:
        t0, c0 = time.perf_counter(), time.thread_time()
        x, y = self._raw()
        self.next_s.append(time.perf_counter() - t0)
        self._main_cpu_s += time.thread_time() - c0
        # the epoch's workers end with it unless persistent: read them now (a persistent
        # worker is read after the windows, by cpu_s, with nothing /proc-bound inside a step)
        if self._served == self._len and not self.settings.persistent_workers:
            self.read_workers()
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream_of(self.device))
            x, y = self._to_device(x, y)
            end.record(stream_of(self.device))
            self._copies.append((start, end))
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if not self.held_bytes:
            self.held_bytes = sum(t.untyped_storage().nbytes() for t in (x, y))
        return x, y

    def read_workers(self) -> None:
        """Record the CPU seconds of the loader's live worker processes (by pid: a persistent
        worker's later reading replaces its earlier one)."""
        for w in getattr(self._it, "_workers", []):
            cpu = process_tree.cpu_s(w.pid, reaped=False) if w.pid is not None else None
            if cpu is not None:
                self._worker_cpu_s[w.pid] = cpu

    def waits(self, steps: int) -> list[float]:
        """The wait of each of the last `steps` steps, in seconds (the device synchronised)."""
        host = self.next_s[-steps:]
        if not self.cuda:
            return host
        copies = [a.elapsed_time(b) / 1e3 for a, b in self._copies[-steps:]]
        return [h + c for h, c in zip(host, copies, strict=True)]

    def cpu_s(self) -> float:
        """CPU seconds the pipeline used so far: its workers' and this thread's in next()."""
        self.read_workers()
        return sum(self._worker_cpu_s.values()) + self._main_cpu_s

    def loaded_ahead(self) -> int:
        """The batches the loader's workers hold loaded ahead: workers x prefetch factor, as
        the DataLoader itself resolved them (its default of 2 where --prefetch is auto)."""
        workers = int(getattr(self.loader, "num_workers", 0) or 0)
        return workers * int(getattr(self.loader, "prefetch_factor", None) or 0)

    def pipeline_rate(self) -> tuple[float, int]:
        """Samples per second the pipeline delivers onto the device with no model, and the
        batches it was timed over."""
        for _ in range(self.loaded_ahead()):  # loaded while the model trained: free to take
            self._raw()
        synchronize(self.device)
        t0 = time.perf_counter()
        n = 0
        while n < PIPELINE_MIN_BATCHES or (
            n < PIPELINE_MAX_BATCHES and time.perf_counter() - t0 < PIPELINE_S
        ):
            self._to_device(*self._raw())
            n += 1
        synchronize(self.device)
        return n * self.settings.batch_size / (time.perf_counter() - t0), n


def values(batches: object, m: Measurement) -> dict[str, Any]:
    """The row's input-pipeline columns for a point measured as `m` ({} for batches that are
    not a loader's): the wait per measured step (median, share of the step time, raw series),
    the model's own rate without the wait, the pipeline's rate with no model, and the loader's
    CPU seconds per batch served. Runs after the measured windows, never inside them."""
    if not isinstance(batches, LoaderBatches):
        return {}
    synchronize(batches.device)
    steps = len(m.step_times_s)
    waits = batches.waits(steps)
    wait = statistics.median(waits)
    share = sum(waits) / sum(m.step_times_s)
    rest = m.stats.median_s - wait
    cpu = batches.cpu_s() / batches.batches
    rate, _ = batches.pipeline_rate()
    return dict(
        input_wait_s=wait,
        input_wait_share=min(share, 1.0),
        input_wait_times_s=waits,
        model_samples_per_s=batches.settings.batch_size / rest if rest > 0 else None,
        pipeline_samples_per_s=rate,
        loader_cpu_s_per_step=cpu,
        loader_dataset=batches.what,
    )
