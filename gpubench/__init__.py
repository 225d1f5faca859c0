"""gpubench: benchmark neural-network training by batch size, precision, optimizer, device."""

from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.run.sweep import run_sweep
from gpubench.store.results import load_results

__all__ = ["Budget", "Point", "SweepSpec", "load_results", "load_suite", "run_sweep"]
__version__ = "0.1.0"
