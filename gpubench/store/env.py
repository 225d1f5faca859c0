"""Capture of the machine and software a run measured on (env.json)."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import platform
import subprocess
import sys
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.probes import datasheet, nvml, rapl
from gpubench.store import shaped

# Reading a folder's env.json imports nothing heavy; capturing this machine's imports torch and
# the calibration probes (below, in the functions that capture).

# A run folder's captured environment: written by the run context (run.context, run.launched)
# and by merge, read by a resume, merge, the console and the report through `read`.
ENV_FILE = "env.json"
# What a JSON value that is not an object is, in JSON's words.
_JSON_KINDS = {
    list: "an array",
    str: "a string",
    bool: "true or false",
    int: "a number",
    float: "a number",
    type(None): "null",
}


def capture(
    devices: Sequence[str] | None = None,
    precisions: Sequence[str] | None = None,
    recalibrate: bool = False,
) -> dict[str, Any]:
    """What makes a run's numbers reproducible: versions, hardware, math switches, NVML (or why
    it is missing), and the matmul peaks and copy bandwidth of `devices` (default: the CPU and
    every CUDA device) for `precisions` (default: all), from the cache or measured now when not
    cached or when `recalibrate` (a sweep does: its MFU is against a peak measured as its
    points were)."""
    return {
        "captured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "gpubench": {"version": _version(), "git_commit": git_commit()},
        "python": sys.version.split()[0],
        "os": platform.platform(),
        "hostname": hostname(),
        "cpu": cpu_info(),
        "torch": torch_info(),
        "nvml": nvml.system_info(),
        "gpus": gpu_info(),
        "matmul_peaks": matmul_peaks(devices, precisions, recalibrate),
        # issue 15: the roofline's other roof, and whether CPU package energy can be read
        "memory_bandwidth": memory_bandwidths(devices, recalibrate),
        "rapl": {"unavailable_reason": rapl.unavailable_reason()},
    }


def read(run_dir: str | Path, skip_odd: bool = False) -> dict[str, Any]:
    """The environment captured in `run_dir`'s env.json: {} where the folder has none, the JSON
    object it holds otherwise, each key gpubench reads of the type it writes (SCHEMA). A file
    that cannot be read, is not JSON or holds no object is a ConfigError naming it (a user's
    input: one line, exit status 2). A key of the wrong type or range is a ConfigError naming
    the file and the key; with `skip_odd` (a reader: explain, report) that key is left out with
    a warning that says the same, and the rest is read."""
    path = Path(run_dir) / ENV_FILE
    if not path.is_file():
        return {}
    try:
        captured = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read {str(path)!r}: {e.strerror or e}") from None
    except ValueError as e:  # not JSON, or not UTF-8
        raise ConfigError(_not_an_object(path, f"not JSON ({e})")) from None
    except RecursionError:
        raise ConfigError(_not_an_object(path, "nested too deeply")) from None
    if not isinstance(captured, dict):
        held = _JSON_KINDS.get(type(captured), type(captured).__name__)
        raise ConfigError(_not_an_object(path, f"it holds {held}"))
    kept = {}
    for key, value in captured.items():
        odd = shaped.problem(value, SCHEMA.get(key, object), key)
        if odd is None:
            kept[key] = value
        elif not skip_odd:
            raise ConfigError(f"{path}: {odd}; restore it from a copy, or remove the key")
        else:
            warnings.warn(f"{path}: {odd}; read without its {key!r}", stacklevel=2)
    return kept


# What gpubench writes under each key of env.json and reads back (store.shaped: a type is a
# value of it or null, a dict an object of those keys, others allowed, a list an array of its
# one item's shape, {"*": ...} an object whose every value has that shape).
_CPU = {
    "model": str,
    "machine": str,
    "logical_cores": int,
    "usable_cores": int,
    "torch_threads": int,
    "torch_interop_threads": int,
    "capability": str,
    "bf16_instructions": bool,
}
_TORCH = {
    "version": str,
    "cuda": str,
    "cudnn": int,
    "float32_matmul_precision": str,
    "cudnn_allow_tf32": bool,
    "cudnn_benchmark": bool,
    "cudnn_deterministic": bool,
}
_NVML = {"available": bool, "reason": str, "driver_version": str, "nvml_version": str}
_GPU = {
    "index": int,
    "name": str,
    "memory_bytes": int,
    "compute_capability": str,
    "multiprocessors": int,
    "nvml": dict,
    "datasheet": dict,
}
_PEAK = {
    "measured_tflops": float,
    "matrix_size": int,
    "dtype": str,
    "measured_at": str,
    "source": str,
    "round_spread": float,
    "datasheet_tflops": float,
}
_BANDWIDTH = {"gb_per_s": float, "buffer_bytes": int, "source": str}
_LOAD = {"load_average_1m": float, "cores": int, "other_load_cores": float}
_MACHINE: dict[str, Any] = {
    "captured_at": str,
    "gpubench": {"version": str, "git_commit": str},
    "python": str,
    "os": str,
    "hostname": str,
    "cpu": _CPU,
    "torch": _TORCH,
    "nvml": _NVML,
    "gpus": [_GPU],
    "matmul_peaks": {"*": {"*": _PEAK}},
    "memory_bandwidth": {"*": _BANDWIDTH},
    "rapl": {"unavailable_reason": str},
    "load": _LOAD,
}
# The reference probes again at the run's end (issue 52: run.context.reprobe_env, after the
# confirmation): the matmul peaks and copy bandwidths measured as at the start, beside the start's
# (the top-level keys above). report.drift reads the larger of the start's and the end's moves
# between two runs; a folder from before has no END_PROBES and reads as it did.
END_PROBES = "end_probes"
_END = {
    "captured_at": str,
    "matmul_peaks": {"*": {"*": _PEAK}},
    "memory_bandwidth": {"*": _BANDWIDTH},
}
SCHEMA: dict[str, Any] = {**_MACHINE, "machines": [_MACHINE], END_PROBES: _END}


def reprobe(
    devices: Sequence[str] | None, precisions: Sequence[str] | None, recalibrate: bool = True
) -> dict[str, Any]:
    """END_PROBES's value: `devices`' matmul peaks for `precisions` and copy bandwidths, measured
    now (the caches refreshed; the cache's figures where cached and not `recalibrate`), as
    `capture` records them at a run's start."""
    return {
        "captured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "matmul_peaks": matmul_peaks(devices, precisions, recalibrate),
        "memory_bandwidth": memory_bandwidths(devices, recalibrate),
    }


def _not_an_object(path: Path, what: str) -> str:
    # Without env.json report, explain and merge read the rows but not their machine, and a
    # resume of a folder with rows is refused (run.folder.check_same_machine): only a copy
    # restores the folder whole.
    return (
        f"cannot read {str(path)!r}: {what}; it must be a JSON object as gpubench writes it: "
        "restore it from a copy (without it the report lacks the machine's facts, and a "
        "resume of a folder with rows is refused)"
    )


def machine(captured: dict[str, Any]) -> dict[str, Any]:
    """What the rows of one run folder must share, from a captured environment (an env.json):
    the CPU model, the GPUs, the driver, CUDA and torch. Rows measured on two machines that
    differ in one of these cannot be compared as one run."""

    torch_ = captured.get("torch") or {}
    return {
        "cpu": (captured.get("cpu") or {}).get("model"),
        "gpus": [g.get("name") for g in captured.get("gpus") or []],
        "driver": (captured.get("nvml") or {}).get("driver_version"),
        "cuda": torch_.get("cuda"),
        "torch": torch_.get("version"),
    }


def hostname() -> str:
    """This machine's network name ('' where the OS gives none): a row's `host`."""
    return platform.node()


@functools.cache
def device_name(device: str) -> str | None:
    """What this machine calls `device` ("cpu", "cuda", "cuda:1"): the CPU model for the CPU,
    the GPU's name as torch gives it (env.json's `gpus[].name`) for a CUDA device, None for a
    CUDA device this process cannot see or a device of another kind. Cached per process."""
    import torch

    from gpubench.probes import calibration

    where = torch.device(device)
    if where.type == "cpu":
        return calibration.cpu_model()
    if where.type != "cuda" or not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device() if where.index is None else where.index
    return torch.cuda.get_device_name(index) if index < torch.cuda.device_count() else None


def named_device(captured: dict[str, Any], device: str) -> str | None:
    """device_name() as a captured env.json recorded it (for rows written before they named
    their own device): the CPU model, or the GPU of that index (0 for a bare "cuda"), or None."""
    if device == "cpu":
        model = (captured.get("cpu") or {}).get("model")
        return str(model) if model else None
    gpu = gpu_entry(captured, device)
    return str(gpu["name"]) if gpu and gpu.get("name") else None


def gpu_entry(
    captured: dict[str, Any], device: str, name: str | None = None
) -> dict[str, Any] | None:
    """The `gpus` entry of a captured env.json for CUDA `device` (index 0 for a bare "cuda"),
    of GPU model `name` where one is given; None where it lists none or `device` is no GPU."""
    if not device.startswith("cuda"):
        return None
    index = int(device.split(":")[1]) if ":" in device else 0
    for gpu in captured.get("gpus") or []:
        if isinstance(gpu, dict) and gpu.get("index") == index and name in (None, gpu.get("name")):
            return gpu
    return None


def current_machine() -> dict[str, Any]:
    """machine() of this machine, now (no calibration: cheap)."""
    return machine(
        {"cpu": cpu_info(), "torch": torch_info(), "nvml": nvml.system_info(), "gpus": gpu_info()}
    )


def memory_bandwidths(
    devices: Sequence[str] | None = None, recalibrate: bool = False
) -> dict[str, dict[str, Any]]:
    """Per device: the measured copy bandwidth (1e9 bytes/s, read plus write)."""
    from gpubench.probes import bandwidth

    out = {}
    for name in devices if devices is not None else default_devices():
        bw = bandwidth.memory_bandwidth(name, refresh=recalibrate)
        out[name] = {"gb_per_s": bw.gb_per_s, "buffer_bytes": bw.buffer_bytes, "source": bw.source}
    return out


def default_devices() -> list[str]:
    import torch

    return ["cpu", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]


def matmul_peaks(
    devices: Sequence[str] | None = None,
    precisions: Sequence[str] | None = None,
    recalibrate: bool = False,
) -> dict[str, dict[str, Any]]:
    """Per device and precision: the measured matmul peak (TFLOPS, with the matrix size and
    when it was measured) beside the datasheet peak where the GPU is known. A precision the
    device cannot run is left out."""
    import torch

    from gpubench.config import precision
    from gpubench.probes import calibration

    out: dict[str, dict[str, Any]] = {}
    for name in devices if devices is not None else default_devices():
        device = torch.device(name)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
        entry: dict[str, Any] = {}
        for prec in precisions if precisions is not None else ("fp32", "tf32", "fp16", "bf16"):
            if precision.unsupported_reason(prec, device) is not None:
                continue
            peak = calibration.matmul_peak(device, prec, refresh=recalibrate)
            assert peak is not None
            entry[prec] = {
                "measured_tflops": peak.tflops,
                "matrix_size": peak.n,
                "dtype": peak.dtype,
                "measured_at": peak.measured_at,
                "source": peak.source,
                "round_spread": peak.round_spread,
                "datasheet_tflops": (
                    None if gpu_name is None else datasheet.peak_tflops(gpu_name, prec)
                ),
            }
        out[str(device)] = entry
    return out


def _version() -> str:
    try:
        return metadata.version("gpubench")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def git_commit() -> str | None:
    """The checkout's commit (with '-dirty' when it has uncommitted changes), or None."""
    root = Path(__file__).resolve().parents[2]  # the checkout: gpubench/store/env.py
    if not (root / ".git").exists():
        return None

    def git(*args: str) -> str:
        run = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, timeout=10
        )
        return run.stdout.strip()

    try:
        sha, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain", "-uno")
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty else "")


def cpu_info() -> dict[str, Any]:
    import torch

    from gpubench.config import precision
    from gpubench.probes import calibration

    model = calibration.cpu_model()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "model": model,
        "machine": platform.machine(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        # the vector instructions torch's kernels use, and bf16's (without them bf16 is
        # emulated: the default suite leaves it out, config.precision)
        "capability": torch.backends.cpu.get_cpu_capability(),
        "bf16_instructions": precision.cpu_has_bf16(),
    }


def torch_info() -> dict[str, Any]:
    import torch

    cudnn = torch.backends.cudnn
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn.version() if cudnn.is_available() else None,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_allow_tf32": cudnn.allow_tf32,
        "cudnn_benchmark": cudnn.benchmark,
        "cudnn_deterministic": cudnn.deterministic,
    }


def gpu_info() -> list[dict[str, Any]]:
    """Each CUDA device as torch sees it, with NVML's power limits and clocks where NVML is
    there (`nvml` is None otherwise; the reason is in the top-level `nvml` entry)."""
    import torch

    if not torch.cuda.is_available():
        return []
    out = []
    nvml_ok = nvml.unavailable_reason() is None
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        sheet = datasheet.lookup(p.name)
        out.append(
            {
                "index": i,
                "name": p.name,
                "memory_bytes": p.total_memory,
                "compute_capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multi_processor_count,
                "nvml": nvml.Device(i).info() if nvml_ok else None,
                "datasheet": None if sheet is None else {"model": sheet[0], "tflops": sheet[1]},
            }
        )
    return out
