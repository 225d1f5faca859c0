"""Memory caps for a worker process: `--max-memory SIZE` made real.

On the CPU the cap is an address-space limit (RLIMIT_AS) on the whole worker process, torch and
its libraries included (about 0.7 GB of address space on a Linux x86 CPU build), so an
allocation past it fails the way running out of memory does. On CUDA the cap is the caching
allocator's per-process fraction of the device's memory. Sizes are in bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from gpubench.config.errors import ConfigError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.I)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# Below this a worker cannot even hold torch; such a cap is a typo, not an experiment.
MIN_BYTES = 64 * 2**20


def parse_size(text: str) -> int:
    """'2G', '512M', '1.5GiB', '1073741824' -> bytes (binary units: 1K = 1024 bytes)."""
    m = _SIZE.match(text) if isinstance(text, str) else None
    value = float(m.group(1)) * _UNITS[m.group(2).lower()] if m else None
    if value is None or value != value or value < MIN_BYTES:
        raise ConfigError(
            f"invalid memory size {text!r}; allowed: a size of 64M or more such as 512M, 2G, 1.5G"
        )
    return int(value)


def format_size(n: int | float) -> str:
    """Bytes as a short human size: 2147483648 -> '2.0G'."""
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit.lower()]:
            return f"{n / _UNITS[unit.lower()]:.1f}{unit}"
    return f"{int(n)}B"


def exact_size(n: int) -> str:
    """Bytes as a size that parses back to exactly `n`: 2147483648 -> '2G', 1258291200 -> '1200M'"""
    for unit in ("T", "G", "M", "K"):
        if n % _UNITS[unit.lower()] == 0:
            return f"{n // _UNITS[unit.lower()]}{unit}"
    return str(n)


def address_space_bytes() -> int | None:
    """This process's virtual address space in bytes (Linux), or None where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def available_bytes() -> int | None:
    """The memory the kernel says is available for new work (Linux MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


class CapBelowHeld(MemoryError):
    """The cap is below what the process holds already: the point cannot start under it."""


@contextmanager
def capped(
    limit_bytes: int | None, device_type: str, device_index: int | None = None
) -> Iterator[None]:
    """Within the block, this process may use at most `limit_bytes` (None: no cap) on the device.
    The previous limit is restored on exit, so a worker can serve the next point uncapped. On
    the CPU a cap at or below what the process holds raises CapBelowHeld (an out-of-memory
    error) before the block starts, so the outcome does not depend on which allocation fails."""
    if limit_bytes is None:
        yield
        return
    if device_type == "cuda":
        with _cuda_capped(limit_bytes, device_index):
            yield
        return
    import resource

    held = address_space_bytes()
    if held is not None and held >= limit_bytes:
        # Every new mapping would fail, and not always as an exception: a thread's stack or an
        # unchecked allocation refused by the limit kills the process (SIGSEGV, SIGABRT).
        raise CapBelowHeld(
            f"this process already holds {format_size(held)} of address space, at or above "
            f"--max-memory {format_size(limit_bytes)}: nothing more can be allocated under it"
        )
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def _cuda_capped(limit_bytes: int, device_index: int | None) -> Iterator[None]:
    import torch

    index = torch.cuda.current_device() if device_index is None else device_index
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit_bytes / total), index)
    try:
        yield
    finally:
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(1.0, index)
