"""The check before a sweep: one real training step of each model, so that a model that cannot
train (a bug in its forward pass, a crash, a hang) is a ConfigError, exit status 2, before the
sweep writes anything, rather than a run folder of `error` rows.

Each model (with its options) takes one step at the sweep's smallest batch size, in fp32 with
SGD, eager, in a worker process (run.worker): a model that kills or hangs its process costs the
sweep that worker, not the command. It is tried on the sweep's devices in turn, the CPU first:
a model "cannot run on the CPU" when its step fails there, and it then passes the check on the
first of the sweep's other devices where its step runs (a model that only works on CUDA, say).
It fails the check when its step fails on every device of the sweep. Running out of memory is
no failure: the sweep's rows say `oom`. Nor is a factory that hangs or kills its process while
being built (its model built alone hangs or dies too): each of its points meets that fault as it
would one inside the point, and ends a `timeout` or `error` row while the sweep goes on (issue 43).

Before those steps, every model is built on the meta device (config.model_options.
check_buildable, in the same worker: building imports torch._dynamo, which the worker has and the
sweep's parent need not), so that a typo or an unknown option is a one-line ConfigError.

Not checked by a step: convergence sweeps (their models are built for a data set's shapes, which
convergence.prepare checks), and the ranks of a torchrun launch (they never call run_sweep).
"""

from __future__ import annotations

from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.model_options import check_buildable
from gpubench.config.spec import AUTO, Point, SweepSpec
from gpubench.harness.tracebacks import last_frames
from gpubench.run.worker import STARTUP_TIMEOUT_S, Call, WorkerError, WorkerRunner

# The check point's settings: those every device supports, and the cheapest step.
PRECISION = "fp32"
OPTIMIZER = "sgd"


class ModelCheckFailed(ConfigError):
    """A model failed its check step: the one-line message, then `frames`, the last lines of
    its traceback (the user's own frames preferred) to print under it."""

    def __init__(self, message: str, frames: list[str]) -> None:
        super().__init__(message)
        self.frames = frames


def check_builds(spec: SweepSpec, runner: WorkerRunner) -> None:
    """Raise the ConfigError check_buildable raises for a model of `spec` (a typo, a missing
    library, an unknown option, a factory that raises or returns no Workload), each model built
    alone in `runner`'s worker, left serving, under --point-timeout. A build that hangs or
    kills its worker is no ConfigError: like a fault inside a point it is the model's, its
    points end `timeout` or `error` rows and the sweep goes on (issue 43); the other models
    are checked all the same."""
    check_built(spec.models, spec.size, spec.model_options, runner)


def check_built(
    models: tuple[str, ...],
    size: str,
    options: dict[str, dict[str, Any]],
    runner: WorkerRunner,
    alone: bool = False,
) -> None:
    """check_builds for `models` at `size` with their `options` (decoded), in `runner`'s worker
    under its point timeout: for a command without a SweepSpec (max-batch), which then meets a
    hang or a death in its own probes. With `alone`, for the one model a command measures
    (tune, tune --target): a build that hangs or kills its process is a ConfigError here, one
    line (a sweep makes it rows; a search of one model has nothing else to measure, and its
    own process would hang or die with it)."""
    limit = min(STARTUP_TIMEOUT_S, runner.point_timeout_s or STARTUP_TIMEOUT_S)
    for model in dict.fromkeys(models):
        args = ((model,), size, options)
        try:
            message = runner.call(Call(f"{__name__}:build_error", args, None, "cpu"), limit)
        except WorkerError as e:
            if e.traceback is not None:  # the check itself raised: a bug of gpubench's own
                raise
            if alone:
                raise ConfigError(f"model {model!r} at {size}: building it failed: {e}") from None
            continue  # hung or died: check_models tells it from a failing step, the rows say it
        if message is not None:
            raise ConfigError(message)


def build_error(
    models: tuple[str, ...], size: str, options: dict[str, dict[str, Any]]
) -> str | None:
    """In the worker: check_buildable's message where it fails, else None."""
    try:
        check_buildable(models, size, options)
    except ConfigError as e:
        return str(e)
    return None


def check_points(spec: SweepSpec) -> list[list[Point]]:
    """Per model of `spec` (with its options), the points its check tries in order: one step
    at the smallest batch size, on each of the sweep's devices, the CPU first. [] for a
    convergence sweep."""
    if spec.mode != "speed":
        return []
    devices = spec.resolved_devices()
    devices = tuple(sorted(devices, key=lambda d: d != "cpu"))  # stable: the others keep order
    batch = 1 if spec.batch_sizes == AUTO else min(spec.batch_sizes)
    return [
        [
            Point(
                model,
                spec.size,
                device,
                PRECISION,
                OPTIMIZER,
                int(batch),
                model_options=spec.options_of(model),
            )
            for device in devices
        ]
        for model in dict.fromkeys(spec.models)
    ]


def check_models(
    spec: SweepSpec, max_memory: int | None, timeout_s: float | None, runner: WorkerRunner
) -> None:
    """Raise ModelCheckFailed for the first model of `spec` whose check step fails on every
    device it is tried on (see the module docstring). Each step runs in `runner`'s worker under
    `max_memory` bytes and `timeout_s` seconds (None: no limit), left serving for the caller's
    points (the first step of a model in a process pays one-off costs, seconds for the cnn on
    a CPU, that its points then need not pay again); the caller closes it (run.context)."""
    for tries in check_points(spec):
        _check_model(tries, runner, max_memory, timeout_s)


def _check_model(
    tries: list[Point], runner: WorkerRunner, max_memory: int | None, timeout_s: float | None
) -> None:
    failures: list[tuple[Point, WorkerError]] = []
    for point in tries:
        # check_step applies the cap itself: a cap the worker cannot start under is `oom` too
        call = Call(f"{__name__}:check_step", (point, max_memory), None, point.device)
        try:
            runner.call(call, timeout_s)
            return
        except WorkerError as e:
            failures.append((point, e))
    first, error = failures[0]
    if all(e.traceback is None for _, e in failures) and _faults_building(
        first, runner, max_memory, timeout_s
    ):
        # issue 43: a factory that hangs or dies while being built is the model's fault, met by
        # each of its points as by a fault inside one: rows (`timeout`, `error`), not exit 2
        return
    where = "; ".join(f"on {p.device}: {e}" for p, e in failures)
    if timeout_s is not None and "no result within" in where:
        where += " (--point-timeout)"
    message = (
        f"model {first.model!r} failed its check, one training step at B={first.batch_size} "
        f"({first.precision}, {first.optimizer}) before the sweep: {where}; nothing was written"
    )
    raise ModelCheckFailed(message, last_frames(error.traceback or ""))


def _faults_building(
    point: Point, runner: WorkerRunner, max_memory: int | None, timeout_s: float | None
) -> bool:
    """Whether building `point`'s model alone, with no step, hangs past `timeout_s` or ends its
    worker: its check step hung or died in the factory, not in training."""
    call = Call(f"{__name__}:check_step", (point, max_memory, False), None, point.device)
    try:
        runner.call(call, timeout_s)
    except WorkerError as e:
        return e.traceback is None
    return False


def check_step(point: Point, max_memory: int | None = None, step: bool = True) -> dict[str, Any]:
    """Build `point`'s model and (where `step`) run one training step of it in this process (a
    worker's) under `max_memory` bytes (None: no cap), then wait for the device. Returns
    {"oom": the reason} where it ran out of memory (no fault of the model's: the sweep's rows
    will say `oom`), else {"oom": None}; any other error is raised."""
    import torch

    from gpubench import models
    from gpubench.config.model_options import decode
    from gpubench.harness.failure import is_out_of_memory, one_line
    from gpubench.harness.step import prepare
    from gpubench.harness.timing import synchronize
    from gpubench.probes.current_device import made_current
    from gpubench.run import memory_cap

    device = torch.device(point.device)
    torch.manual_seed(point.seed)
    try:
        with memory_cap.capped(max_memory, device.type, device.index), made_current(device):
            workload = models.build(point.model, point.model_size, **decode(point.model_options))
            if step:
                prepare(point, workload).step()
            synchronize(device)
    except Exception as e:
        if is_out_of_memory(e):
            return {"oom": one_line(e)}
        raise
    return {"oom": None}
