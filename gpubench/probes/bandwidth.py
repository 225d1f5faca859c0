"""The measured memory bandwidth of a device, the roof a memory-bound step is held under.

A calibration times large copies on the device (device to device: one read and one write of the
buffer per copy) and keeps the best rate. Like the matmul peak (probes.calibration) it runs once
per device, torch version and thread count, and is cached in the process and on disk beside it
(`bandwidth.json`). With the matmul peak it gives the roofline's ridge point: the arithmetic
intensity (FLOP per byte) above which a step can be compute-bound.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from gpubench.probes.calibration import cache_file, device_key

# Bytes of the copied buffer: far beyond any cache, small enough to allocate anywhere.
_BUFFER_BYTES = {"cpu": 64 * 2**20, "cuda": 2 * 2**30}
_ROUNDS = {"cpu": 5, "cuda": 10}

_memo: dict[str, Bandwidth] = {}


@dataclass(frozen=True)
class Bandwidth:
    """A measured copy bandwidth: `gb_per_s` (1e9 bytes/s, read plus write) over a buffer of
    `buffer_bytes`."""

    gb_per_s: float
    buffer_bytes: int
    measured_at: str
    source: str  # "measured" in this process, or "cache"


def bandwidth_file() -> Path:
    return cache_file().with_name("bandwidth.json")


def memory_bandwidth(device: torch.device | str, refresh: bool = False) -> Bandwidth:
    """The device's measured copy bandwidth. Measured on first use (under a second), then served
    from the caches unless `refresh`."""
    device = torch.device(device)
    key = device_key(device)
    if not refresh:
        if key in _memo:
            return _memo[key]
        cached = _read().get(key)
        if cached is not None:
            _memo[key] = Bandwidth(**cached)
            return _memo[key]
    nbytes = _buffer_bytes(device)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    bw = Bandwidth(measure_copy_gb_per_s(device, nbytes), nbytes, stamp, "measured")
    _memo[key] = bw
    _write(key, bw)
    return bw


def cached_bandwidth(device: torch.device | str) -> Bandwidth | None:
    """The device's bandwidth if it was calibrated before (this process or the disk cache),
    else None; never measures."""
    key = device_key(torch.device(device))
    if key not in _memo:
        cached = _read().get(key)
        if cached is None:
            return None
        _memo[key] = Bandwidth(**cached)
    return _memo[key]


def measure_copy_gb_per_s(device: torch.device, nbytes: int) -> float:
    """Best rate of `dst.copy_(src)` over buffers of `nbytes` (2 x nbytes moved per copy), in
    1e9 bytes per second; one warm-up copy, then _ROUNDS timed ones."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch of the pages, kernel warm-up
    best = 0.0
    for _ in range(_ROUNDS[device.type]):
        seconds = _time_copy(src, dst)
        best = max(best, 2 * nbytes / seconds / 1e9)
    return best


def _time_copy(src: torch.Tensor, dst: torch.Tensor) -> float:
    if src.device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(src.device)
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize(src.device)
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    dst.copy_(src)
    return time.perf_counter() - t0


def _buffer_bytes(device: torch.device) -> int:
    nbytes = _BUFFER_BYTES[device.type]
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        nbytes = min(nbytes, free // 4)
    return nbytes


def _read() -> dict[str, Any]:
    try:
        data = json.loads(bandwidth_file().read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):  # absent or corrupt: measured again
        return {}
    return data if isinstance(data, dict) else {}


def _write(key: str, bw: Bandwidth) -> None:
    path = bandwidth_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read()
    data[key] = asdict(bw) | {"source": "cache"}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def clear_memo() -> None:
    _memo.clear()
