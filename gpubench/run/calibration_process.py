"""A run's calibration (env.json: the matmul peaks and memory bandwidths it measures, and the
load beside it) in a worker process of its own, never in the parent.

Calibrating CUDA allocates matmul operands and copy buffers of gigabytes and creates a CUDA
context (about 500 MiB on its own). Done in the sweep's parent, those stayed held for the whole
sweep (5.7 GiB of an H100, issue 28), and points that needed the card's last gigabytes ran out of
memory because of gpubench, not because they did not fit. In a worker, every byte goes back when
the worker exits, before the first point; the parent never initialises CUDA for it. The figures
reach the points as before: through the calibration caches on disk (probes.calibration), which
the worker writes and the points' workers read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpubench.run.worker import Call, WorkerRunner

_TARGET = "gpubench.run.calibration_process:capture_env"


def captured(
    devices: Sequence[str] | None,
    precisions: Sequence[str] | None,
    recalibrate: bool = False,
    threads: Sequence[int] = (),
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """env.json's content, captured and calibrated in a worker process that has exited when this
    returns (see capture_env for what it holds); WorkerError where the capture failed or took
    longer than `timeout_s` seconds (None: no limit)."""
    runner = WorkerRunner(None, timeout_s, reuse=False)
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
    runner.close()
    return value


def capture_env(
    devices: list[str] | None,
    precisions: list[str] | None,
    recalibrate: bool,
    threads: list[int],
) -> dict[str, Any]:
    """In the worker: env.capture of `devices` and `precisions` (recalibrated when asked), the
    CPU's roofs for each of `threads` beyond torch's own count (when the CPU is among
    `devices`), and under "load" how busy the machine was meanwhile: other processes' cores,
    this one's own calibration left out (issue 14)."""
    from gpubench.probes import load
    from gpubench.store import env

    with load.OtherLoad() as others:
        value = env.capture(devices, precisions, recalibrate=recalibrate)
        if devices is None or "cpu" in devices:
            calibrate_threads(threads, precisions or ("fp32", "tf32", "fp16", "bf16"))
    value["load"] = load.before_sweep(others.cores)
    return value


def calibrate_threads(threads: Sequence[int], precisions: Sequence[str]) -> None:
    """The CPU's matmul peak and memory bandwidth for each of `threads` other than torch's own
    count (the roofs of those points' MFU and ridge point), measured now. Both are cached by
    thread count: a point reads the figures of its own (probes.calibration.device_key)."""
    import torch

    from gpubench.harness.threads import intra_op_threads
    from gpubench.probes import bandwidth, calibration

    default = torch.get_num_threads()
    for n in sorted({t for t in threads if t != default}):
        with intra_op_threads(n):
            for prec in precisions:  # one the CPU cannot run is None, not measured
                calibration.matmul_peak("cpu", prec, refresh=True)
            bandwidth.memory_bandwidth("cpu", refresh=True)
