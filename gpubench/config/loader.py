"""The input-pipeline axes of `data = "loader"` (issue 31): DataLoader workers, pinned memory,
prefetch depth and persistent workers, their checks, and the defaults a machine gives them.

A suite or the command line may leave each axis at "auto" (held as None in the SweepSpec); a
Point always holds the resolved value, so its identity names what was measured."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from gpubench.config.checks import check_bool, whole
from gpubench.config.errors import ConfigError

AUTO = "auto"
# The most workers "auto" picks: past a few, a small model's batches arrive faster than it
# trains on them, and each worker holds a copy of the data set's index.
AUTO_WORKERS_MAX = 4
# PyTorch's own default prefetch_factor (batches each worker loads ahead).
TORCH_PREFETCH = 2
_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# The SweepSpec's loader axes (suite keys and --flags: --loader-workers, ...) with their default
# values ("auto" is None), in layouts' order.
DEFAULTS: dict[str, tuple[Any, ...]] = dict(
    loader_workers=(None,), pin_memory=(None,), prefetch=(None,), persistent_workers=(True,)
)


def check_workers(value: object) -> int | None:
    """A worker count: a whole number of 0 or more (0: load in the training process), or
    "auto" (None: auto_workers() of the machine)."""
    if value is None or value == AUTO:
        return None
    return whole(value, "loader worker count", least=0, note=', or "auto" (from the machine)')


def check_pin(value: object) -> bool | None:
    """Pinned host memory: true, false or "auto" (None: on for CUDA devices, off on the CPU)."""
    if value is None or value == AUTO:
        return None
    if not isinstance(value, bool):
        raise ConfigError(f'invalid pin_memory {value!r}; allowed: true, false, "auto"')
    return value


def check_prefetch(value: object) -> int | None:
    """Batches each worker loads ahead: a whole number of 1 or more, or "auto" (None: 2)."""
    if value is None or value == AUTO:
        return None
    return whole(value, "prefetch", note=f', or "auto" (PyTorch\'s {TORCH_PREFETCH})')


def check_persistent(value: object) -> bool:
    return check_bool(value, "persistent_workers")


def check_factory(value: object) -> str | None:
    """A user's Dataset or DataLoader factory 'package.module:function' (None: gpubench's own
    on-disk data for the model)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _FACTORY.match(value):
        raise ConfigError(
            f"invalid loader {value!r}; allowed: 'package.module:function' returning a "
            "torch Dataset or DataLoader"
        )
    return value


def auto_workers(cores: int | None = None) -> int:
    """The machine's default worker count: half its cores (the other half trains and drives
    the device), at most AUTO_WORKERS_MAX; 0 on a single core."""
    n = os.cpu_count() if cores is None else cores
    return min(AUTO_WORKERS_MAX, (n or 1) // 2)


@dataclass(frozen=True)
class LoaderLayout:
    """One combination of the loader axes, resolved for a device: what a Point holds."""

    loader_workers: int
    pin_memory: bool
    prefetch: int | None  # None with 0 workers: nothing loads ahead
    persistent_workers: bool  # False with 0 workers: there are none to keep


def layouts(
    device: str,
    workers: tuple[int | None, ...],
    pins: tuple[bool | None, ...],
    prefetches: tuple[int | None, ...],
    persistent: tuple[bool, ...],
) -> list[dict[str, Any]]:
    """Every combination of the axes for `device` with "auto" resolved, duplicates dropped
    (with 0 workers, prefetch and persistence mean nothing and collapse), in axis order."""
    out: list[LoaderLayout] = []
    for w in workers:
        n = auto_workers() if w is None else w
        for pin in pins:
            pinned = device.startswith("cuda") if pin is None else pin
            for pf in prefetches:
                for keep in persistent:
                    ahead = None if n == 0 else (TORCH_PREFETCH if pf is None else pf)
                    out.append(LoaderLayout(n, pinned, ahead, keep and n > 0))
    return [asdict(lay) for lay in dict.fromkeys(out)]


def default_fields(device: str, data: str) -> dict[str, Any]:
    """The Point fields a command without the loader axes (tune, max-batch) measures `data`
    with on `device`: a sweep's default layout for "loader" (auto workers, pinned on CUDA,
    torch's prefetch, persistent), none for other data."""
    return layouts(device, *DEFAULTS.values())[0] if data == "loader" else {}
