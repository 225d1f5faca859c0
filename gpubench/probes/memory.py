"""Memory probes: the host process's peak resident set size and the torch CUDA allocator's peaks."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import resource
import sys
from pathlib import Path

import torch

from gpubench.probes.probe import Probe

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def address_space_bytes() -> int | None:
    """This process's virtual address space now (bytes, Linux VmSize), or None where unknown."""
    return _status_kib("VmSize")


def _status_kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    return ctypes.CDLL(name) if name else None


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the kernel (glibc's malloc_trim), so that the RSS
    is what is live, not what earlier work freed. (The runner collects garbage between points;
    a collection here would cost a tenth of a second.)"""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS. True when it was reset
    (Linux: writing 5 to /proc/self/clear_refs); False where it cannot be."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int | None:
    """The process's peak RSS in bytes: VmHWM since the last reset on Linux, otherwise the
    lifetime peak from getrusage (kilobytes on Linux, bytes on macOS)."""
    hwm = _status_kib("VmHWM")
    if hwm is not None:
        return hwm
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maxrss if sys.platform == "darwin" else maxrss * 1024)


class HostPeakRSS(Probe):
    """The peak RSS of this process inside the block (`peak_bytes`, what it held on entry
    included). `scope`: "block" where the peak could be reset on entry, else "process" (the
    lifetime peak: the block's only in a fresh worker)."""

    def __init__(self) -> None:
        self.peak_bytes: int | None = None
        self.scope: str | None = None
        # lifetime peak address space (VmPeak, not resettable): what --max-memory caps on the CPU
        self.peak_address_space_bytes: int | None = None

    def start(self) -> None:
        release_free_memory()  # what earlier points freed does not count against this one
        self.scope = "block" if reset_peak_rss() else "process"

    def stop(self, failed: bool = False) -> None:
        """Read the peaks once: what runs later in the block (profiling) does not count."""
        if self.peak_bytes is None:
            self.peak_bytes = peak_rss_bytes()
            self.peak_address_space_bytes = _status_kib("VmPeak")


class TorchPeaks(Probe):
    """Torch's CUDA allocator peaks (allocated, reserved; bytes) inside the
    block, reset on entry. Both stay None on a device without an allocator to ask (the CPU)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.allocated_bytes: int | None = None
        self.reserved_bytes: int | None = None

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def stop(self, failed: bool = False) -> None:
        if self.device.type == "cuda":
            self.allocated_bytes = torch.cuda.max_memory_allocated(self.device)
            self.reserved_bytes = torch.cuda.max_memory_reserved(self.device)
