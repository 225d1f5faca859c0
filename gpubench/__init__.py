"""gpubench: benchmark neural-network training by batch size, precision, optimizer, device."""

from gpubench.results import load_results
from gpubench.spec import Budget, Point, SweepSpec
from gpubench.suite import load_suite
from gpubench.sweep import run_sweep

__all__ = ["Budget", "Point", "SweepSpec", "load_results", "load_suite", "run_sweep"]
__version__ = "0.1.0"
