"""A run's calibration (env.json: matmul peaks, memory bandwidths, the load beside them) in a worker
process of its own: in the sweep's parent, CUDA's operands, buffers and context stayed held for
the whole sweep (5.7 GiB of an H100) and points ran out of memory because of gpubench. The points
read the figures from the calibration caches on disk (probes.calibration).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpubench.run.worker import Call, WorkerRunner

_TARGET = "gpubench.run.calibration_process:capture_env"
_REPROBE = "gpubench.run.calibration_process:reprobe"


def captured(
    devices: Sequence[str] | None,
    precisions: Sequence[str] | None,
    recalibrate: bool = False,
    threads: Sequence[int] = (),
    timeout_s: float | None = None,
    runner: WorkerRunner | None = None,
) -> dict[str, Any]:
    """env.json's content (capture_env) from a worker that has exited when this returns, or
    from `runner`'s, left serving (its GPU memory given back: Call.run empties the cache; a
    tune's trials run there next, so it starts one worker, not two); WorkerError where it
    failed or took over `timeout_s` seconds (None: no limit)."""
    own = runner is None
    runner = WorkerRunner(None, timeout_s, reuse=False) if runner is None else runner
    args = (
        None if devices is None else list(devices),
        None if precisions is None else list(precisions),
        recalibrate,
        list(threads),
    )
    try:
        value: dict[str, Any] = runner.call(Call(_TARGET, args, None, "cpu"), timeout_s)
    except BaseException:
        runner.close(grace_s=0)
        raise
    if own:
        runner.close()
    return value


def capture_env(
    devices: list[str] | None,
    precisions: list[str] | None,
    recalibrate: bool,
    threads: list[int],
) -> dict[str, Any]:
    """In the worker: env.capture, the CPU's roofs for each of `threads` (calibrate_threads),
    and under "load" the cores other processes used meanwhile."""
    from gpubench.probes import load
    from gpubench.store import env

    with load.OtherLoad() as others:
        value = env.capture(devices, precisions, recalibrate=recalibrate)
        if devices is None or "cpu" in devices:
            calibrate_threads(threads, precisions or ("fp32", "tf32", "fp16", "bf16"))
    value["load"] = load.before_sweep(others.cores)
    return value


def calibrate_threads(threads: Sequence[int], precisions: Sequence[str]) -> None:
    """The CPU's matmul peak and memory bandwidth, measured now, for each of `threads` other
    than torch's own count (cached per thread count: probes.calibration.device_key)."""
    import torch

    from gpubench.harness.threads import intra_op_threads
    from gpubench.probes import bandwidth, calibration

    default = torch.get_num_threads()
    for n in sorted({t for t in threads if t != default}):
        with intra_op_threads(n):
            for prec in precisions:  # one the CPU cannot run is None, not measured
                calibration.matmul_peak("cpu", prec, refresh=True)
            bandwidth.memory_bandwidth("cpu", refresh=True)


def reprobed(
    devices: Sequence[str] | None,
    precisions: Sequence[str] | None,
    timeout_s: float | None = None,
    recalibrate: bool = True,
) -> dict[str, Any]:
    """env.json's END_PROBES (store.env.reprobe: the reference probes measured again, at a
    run's end; the cache's figures where they are cached and not `recalibrate`) from a worker
    of its own, exited when this returns; WorkerError where it failed or took over `timeout_s`
    seconds (None: no limit)."""
    runner = WorkerRunner(None, timeout_s, reuse=False)
    args = (
        None if devices is None else list(devices),
        None if precisions is None else list(precisions),
        recalibrate,
    )
    try:
        value: dict[str, Any] = runner.call(Call(_REPROBE, args, None, "cpu"), timeout_s)
    except BaseException:
        runner.close(grace_s=0)
        raise
    runner.close()
    return value


def reprobe(
    devices: list[str] | None, precisions: list[str] | None, recalibrate: bool
) -> dict[str, Any]:
    """In the worker: store.env.reprobe."""
    from gpubench.store import env

    return env.reprobe(devices, precisions, recalibrate)
