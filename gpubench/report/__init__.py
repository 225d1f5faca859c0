"""Reports of run folders (HTML and PNG charts) and comparisons between runs."""

from gpubench.report.build import build_report

__all__ = ["build_report"]
