"""The measured memory bandwidth of a device, the roof a memory-bound step is held under: the best
rate of large device-to-device copies (one read and one write per copy), cached as the matmul peak
is (probes.calibration) in `bandwidth.json`. With the matmul peak it gives the roofline's ridge.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import torch

from gpubench.probes.calibration import cache_file, cached, device_key, device_seconds, keep
from gpubench.probes.calibration import clear_memo as clear_memo  # the memo is shared

# Bytes of the copied buffer: far beyond any cache, small enough to allocate anywhere.
_BUFFER_BYTES = {"cpu": 64 * 2**20, "cuda": 2 * 2**30}
_ROUNDS = {"cpu": 5, "cuda": 10}


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
    found = None if refresh else cached_bandwidth(device)
    if found is not None:
        return found
    nbytes = _buffer_bytes(device)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    bw = Bandwidth(measure_copy_gb_per_s(device, nbytes), nbytes, stamp, "measured")
    keep(bandwidth_file(), (device_key(device),), bw)
    return bw


def cached_bandwidth(device: torch.device | str) -> Bandwidth | None:
    """The device's bandwidth if it was calibrated before (this process or the disk cache),
    else None; never measures."""
    return cached(bandwidth_file(), (device_key(torch.device(device)),), Bandwidth)


def measure_copy_gb_per_s(device: torch.device, nbytes: int) -> float:
    """Best rate of `dst.copy_(src)` over buffers of `nbytes` (2 x nbytes moved per copy), in
    1e9 bytes per second; one warm-up copy, then _ROUNDS timed ones."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch of the pages, kernel warm-up
    best = 0.0
    for _ in range(_ROUNDS[device.type]):
        seconds = device_seconds(device, lambda: dst.copy_(src))
        best = max(best, 2 * nbytes / seconds / 1e9)
    return best


def _buffer_bytes(device: torch.device) -> int:
    nbytes = _BUFFER_BYTES[device.type]
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        nbytes = min(nbytes, free // 4)
    return nbytes
