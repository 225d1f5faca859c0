"""One run in its folder, as sweep, tune, tune --target and a torchrun launch's rank 0 hold it:
the folder's lock, fresh or resumed, suite.json and env.json, NVML's warning, the worker that
measures (its lifetime), results.csv and the confirmation of the leaders; and the options that
travel with a run (RunOptions), one object instead of a dozen parameters."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gpubench.config.errors import ConfigError
from gpubench.config.spec import DEFAULT_POINT_TIMEOUT_S, Point, SweepSpec
from gpubench.probes import nvml
from gpubench.run import calibration_process, folder, phases
from gpubench.run import confirm as leads
from gpubench.run.pool import drained_worker
from gpubench.run.worker import STARTUP_TIMEOUT_S, Task, WorkerRunner
from gpubench.science import bottleneck
from gpubench.store import env, suite_record
from gpubench.store.confirmations import CONFIRMATION_PHASE
from gpubench.store.results import RESULTS_FILE, ResultStore, read_rows, repair_tail, temporaries
from gpubench.store.wording import printable

# What --retry-failed runs again: outcomes that say nothing about the point itself.
RETRIED = ("error", "timeout")
# A sweep measures the machine's roofs afresh, at its start and at its end; where this is "0" it
# takes the calibration cache's figures where the cache has them (a machine calibrated once for
# many sweeps: a test session's; docs/method.md).
RECALIBRATE_VARIABLE = "GPUBENCH_RECALIBRATE"


def recalibrating() -> bool:
    """Whether a sweep calibrates the machine afresh: unless RECALIBRATE_VARIABLE is "0" ("1"
    or unset: yes); a ConfigError naming the variable where it is anything else."""
    given = os.environ.get(RECALIBRATE_VARIABLE, "1")
    if given not in ("0", "1"):
        raise ConfigError(f"invalid {RECALIBRATE_VARIABLE}={given!r}; allowed: 0 or 1")
    return given == "1"


@dataclass(frozen=True)
class RunOptions:
    """How a run measures and what it may do with its folder: each point's memory cap
    (`max_memory`, bytes) and time once its worker is ready (`point_timeout_s`; None: no limit);
    `resume` a folder started before, with new axis values where `extend`, its `error` and
    `timeout` points measured again where `retry_failed`; `confirm` the leaders interleaved once
    the points are measured; `shard` (i, n): the i-th of n shares of the points (run.shard);
    `plan_file`: where batch_sizes = "auto" keeps its plan for every shard (run.batch_plan);
    `gpus`: a device pool's devices (run.pool; empty: one point at a time); `confirm_target`:
    each predicted fastest to target checked by training once the leaders are confirmed
    (run.target_confirm)."""

    max_memory: int | None = None
    point_timeout_s: float | None = DEFAULT_POINT_TIMEOUT_S
    resume: bool = False
    extend: bool = False
    retry_failed: bool = False
    confirm: bool = True
    shard: tuple[int, int] | None = None
    plan_file: Path | None = None
    gpus: tuple[str, ...] = ()
    confirm_target: bool = False


def _setup_limit(point_timeout_s: float | None) -> float | None:
    """The seconds the calibration may take: set-up, not a point, so a --point-timeout
    shorter than a worker's start-up limit (one of a second, for tiny points) does not cut it
    (issue 43); None where points have no limit."""
    return None if point_timeout_s is None else max(point_timeout_s, STARTUP_TIMEOUT_S)


class Measured(NamedTuple):
    """A point's row from the run's worker, measured in `wall_s` seconds, of which `worker_s`
    went to starting a worker (0: the last one served)."""

    row: dict[str, Any]
    wall_s: float
    worker_s: float


class RunContext(contextlib.ExitStack):
    """A run's folder and worker for a `with` block. The worker (started on first use) serves
    the checks, the calibration, the points and the confirmation, so their start-up is paid
    once; it is closed at the block's end, at once (what is in flight abandoned) where the
    block raised, a second Ctrl-C say. `open` takes the folder's lock, held to the block's end.
    `log` records the phases, into phases.json once attached (the sweep's)."""

    def __init__(self, run_dir: Path, options: RunOptions) -> None:
        super().__init__()
        self.dir = run_dir
        self.options = options
        self.store: ResultStore  # once `open`: nothing is written before the checks pass
        self.log = phases.PhaseLog()
        self._runner: WorkerRunner | None = None
        self._env_written = False
        self.push(self._close_worker)

    @property
    def runner(self) -> WorkerRunner:
        if self._runner is None:  # a pool's first device where a pool measures (issue 53)
            options = self.options
            self._runner = drained_worker(options.gpus, options.max_memory, options.point_timeout_s)
        return self._runner

    def _close_worker(self, raised: type[BaseException] | None, *_: object) -> None:
        if self._runner is not None:
            self._runner.close(grace_s=0) if raised is not None else self._runner.close()

    def open(self, spec: SweepSpec | None = None, rows: Path | None = None) -> None:
        """Lock the folder (to the block's end). Fresh, it must hold no results. Resumed, it
        must have been started on this machine, with `spec`'s suite where given (other axis
        values only with `extend`); a last line of `rows` (the results file by default) that is
        not a row is moved aside (store.results.repair_tail: no row is ever cut), and with
        `retry_failed` the rows that ended `error` or `timeout` dropped. A line that is not a
        row before the last is a ResultsError: nothing is appended after it."""
        if self.options.resume and not self.dir.is_dir():
            raise ConfigError(f"nothing to resume in {str(self.dir)!r}: there is no such folder")
        self.enter_context(folder.locked(self.dir))
        self.store = ResultStore(self.dir)
        if not self.options.resume:
            folder.check_fresh(self.dir)
        else:
            if spec is not None:
                folder.check_resumable(self.dir, spec, self.options.extend)
            folder.check_same_machine(self.dir)
        # The folder accepted: what an earlier run of gpubench left half written (a full disk,
        # a kill mid-replace): its whole files stand, its temporary ones are no part of the
        # run (no other file is touched), and the lock keeps any other run out
        for leftover in temporaries(self.dir):
            leftover.unlink()
        self.store.check_writable()  # before the first point, not after it is measured
        if not self.options.resume:
            return
        repair_tail(rows or self.store.path)
        if self.options.retry_failed:
            self.store.drop(RETRIED)

    def write_suite(self, spec: SweepSpec) -> None:
        suite_record.write(self.dir, spec.to_dict())

    def capture_env(
        self,
        devices: Sequence[str],
        precisions: Sequence[str],
        threads: Sequence[int] = (),
        *,
        recalibrate: bool = True,
        in_worker: bool = False,
    ) -> None:
        """env.json where the folder lacks it: the machine, and the matmul peaks and memory
        bandwidths calibrated now (`recalibrate`, unless recalibrating() says not), under the
        run's conditions, with how busy
        the machine was meanwhile (issue 14); in a worker (the run's with `in_worker`, else one
        of its own) that gives back the GPU memory it used before the first point (issue 28).
        Then NVML's warning, once, where the CUDA rows' NVML fields will be null."""
        # A fresh run writes its own: an env.json left in the folder by a run that measured
        # no row describes another run's machine and calibration (issue 43).
        fresh = not self.options.resume and not self._env_written
        if fresh or not (self.dir / env.ENV_FILE).is_file():
            with self.log.phase("calibration"):
                captured = calibration_process.captured(
                    devices,
                    precisions,
                    recalibrate=recalibrate and recalibrating(),
                    threads=threads,
                    timeout_s=_setup_limit(self.options.point_timeout_s),
                    runner=self.runner if in_worker else None,
                )
                self.store.write_json(env.ENV_FILE, captured)
                self._env_written = True
        nvml.warn_if_unavailable(devices)

    def reprobe_env(self, devices: Sequence[str], precisions: Sequence[str]) -> None:
        """env.json's END_PROBES (issue 52): the reference probes measured again at the run's
        end (the cache's figures where recalibrating() says not), in a worker of its own,
        beside the start's; report.drift reads both. Needs the folder's env.json
        (capture_env's)."""
        with self.log.phase("end probes"):
            limit = _setup_limit(self.options.point_timeout_s)
            end = calibration_process.reprobed(devices, precisions, limit, recalibrating())
            captured = env.read(self.dir)
            if not captured:
                raise FileNotFoundError(self.dir / env.ENV_FILE)
            self.store.write_json(env.ENV_FILE, {**captured, env.END_PROBES: end})

    def measure(self, point: Point, task: Task) -> Measured:
        """`point`'s row from the run's worker, its bottleneck classified."""
        t0, workers = time.perf_counter(), len(self.runner.startup_s)
        row = bottleneck.classified(self.runner.run(point, task))
        return Measured(row, time.perf_counter() - t0, sum(self.runner.startup_s[workers:]))

    def write_csv(self) -> None:
        """results.csv from the rows, where there are any."""
        if self.store.path.is_file():
            with self.log.phase("results.csv"):
                try:
                    self.store.write_csv()
                except OSError as e:
                    # results.csv is the rows' table (a resume writes it again): not
                    # writing it loses nothing, and must not hide why the run ended
                    warnings.warn(
                        f"results.csv not written ({e.strerror or e}: {e.filename}); the rows "
                        f"are in {RESULTS_FILE}, and a resume writes it",
                        stacklevel=2,
                    )

    def confirm(self, suite: SweepSpec, only: Sequence[Point] | None = None) -> None:
        """The leaders among the folder's rows of `suite` (the suite being run) re-measured
        interleaved (run.confirm) into confirm.json, in fresh workers of its own: the run's
        worker is closed first (a later point starts another), so that its cached device memory
        is not theirs. `only`: just the partitions of these points again (run.confirm)."""
        with self.log.phase(CONFIRMATION_PHASE, announce=True):  # a killed one is told
            self.runner.close()
            rows = of_suite(read_rows(self.dir), suite)
            cap, timeout = self.options.max_memory, self.options.point_timeout_s
            leads.confirm(self.dir, rows, cap, timeout, only, self.options.gpus)


def of_suite(rows: list[dict[str, Any]], suite: SweepSpec) -> list[dict[str, Any]]:
    """The rows whose code is `suite`'s own: a model and a loader it names. A row naming any
    other (a folder's free text: a row added by hand naming `os:system`) is never built; one
    warning names what was left out."""
    models = set(suite.models)
    kept = [r for r in rows if r.get("model") in models and r.get("loader") in (None, suite.loader)]
    if len(kept) < len(rows):
        named = sorted({str(r.get("model")) for r in rows if r not in kept})
        warnings.warn(
            f"{len(rows) - len(kept)} rows of {RESULTS_FILE} name a model or loader the suite "
            f"does not ({', '.join(printable(n) for n in named)}): not re-measured (a resume "
            "builds only the suite's own code)",
            stacklevel=2,
        )
    return kept
