"""gpubench: benchmark neural-network training by batch size, precision, optimizer, device."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpubench.config.spec import Budget, Point, SweepSpec
    from gpubench.config.suite import load_suite
    from gpubench.run.sweep import run_sweep
    from gpubench.store.results import load_results

__all__ = ["Budget", "Point", "SweepSpec", "load_results", "load_suite", "run_sweep"]
__version__ = "0.1.0"

# Imported on first use, so that a light part of the package (the NVML sampling process, say)
# can be imported without torch and pandas.
_HOMES = {
    "Budget": "gpubench.config.spec",
    "Point": "gpubench.config.spec",
    "SweepSpec": "gpubench.config.spec",
    "load_suite": "gpubench.config.suite",
    "run_sweep": "gpubench.run.sweep",
    "load_results": "gpubench.store.results",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'gpubench' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
