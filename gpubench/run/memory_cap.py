"""`--max-memory SIZE` made real for a worker process (sizes in bytes). On the CPU: an address-space
limit (RLIMIT_AS) on what the worker maps beyond what it held when the cap was applied, so a size
means the same with any torch build (a CPU build's worker holds ~0.7 GB before its first point, a
CUDA build's 3-4 GB). On CUDA: the caching allocator's per-process fraction of the device.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpubench.config.checks import shown
from gpubench.config.errors import ConfigError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.I)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# Below this a worker cannot even hold torch; such a cap is a typo, not an experiment.
MIN_BYTES = 64 * 2**20
MAX_BYTES = 2**63  # a process's memory limit (RLIMIT_AS) is below it


def parse_size(text: str) -> int:
    """'2G', '512M', '1.5GiB', '1073741824' -> bytes (binary units: 1K = 1024 bytes)."""
    m = _SIZE.match(text) if isinstance(text, str) else None
    value = float(m.group(1)) * _UNITS[m.group(2).lower()] if m else None
    if value is None or not MIN_BYTES <= value < MAX_BYTES:
        raise ConfigError(
            f"invalid memory size {shown(text)}; allowed: a size of 64M or more, under 2**63 "
            "bytes (8,388,608T: what a process's limit can hold), such as 512M, 2G, 1.5G"
        )
    return int(value)


def exact_size(n: int) -> str:
    """Bytes as a size that parses back to exactly `n`: 2147483648 -> '2G', 1258291200 -> '1200M'"""
    for unit in ("T", "G", "M", "K"):
        if n % _UNITS[unit.lower()] == 0:
            return f"{n // _UNITS[unit.lower()]}{unit}"
    return str(n)


def address_space_bytes() -> int | None:
    """This process's virtual address space in bytes (Linux), or None where unknown."""
    from gpubench.probes import memory  # torch's allocator probes: not for the parser's sizes

    return memory.address_space_bytes()


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


@contextmanager
def capped(
    limit_bytes: int | None, device_type: str, device_index: int | None = None
) -> Iterator[None]:
    """Within the block, at most `limit_bytes` (None: no cap) on the device: on the CPU, address
    space beyond what the process holds on entry (the whole where /proc cannot tell). The
    previous limit is restored on exit."""
    if limit_bytes is None:
        yield
        return
    if device_type == "cuda":
        with _cuda_capped(limit_bytes, device_index):
            yield
        return
    import resource

    held = address_space_bytes()
    allowed = limit_bytes if held is None else held + limit_bytes
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = allowed if hard == resource.RLIM_INFINITY else min(allowed, hard)
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


def capped_peak(row: dict[str, Any], device: str) -> int | None:
    """A row's peak of what the cap counts (bytes; None: not measured): on the CPU the worker's
    peak address space less its start, on CUDA the allocator's peak reserved bytes."""
    if not device.startswith("cpu"):
        value = row.get("torch_peak_reserved_bytes")
        return int(value) if value is not None else None
    peak, start = (
        row.get("host_peak_address_space_bytes"),
        row.get("host_address_space_start_bytes"),
    )
    if peak is None:
        return None
    # rows written before the start was recorded: the whole worker, as the cap counted then
    return int(peak) - int(start or 0)
