"""Reports of run folders (HTML and PNG charts) and comparisons between runs."""

from typing import Any

__all__ = ["build_report"]


def __getattr__(name: str) -> Any:
    """`build_report`, imported (with matplotlib) on first use: a command that reads a folder
    without drawing it (explain, compare) does not pay for the charts."""
    if name == "build_report":
        from gpubench.report.build import build_report

        return build_report
    raise AttributeError(f"module 'gpubench.report' has no attribute {name!r}")
