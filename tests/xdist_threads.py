"""The torch threads a pytest-xdist worker of this test suite may use (tests/conftest.py)."""

from __future__ import annotations


def threads_per_worker(workers: str | None, cores: int) -> int | None:
    """The torch threads each of `workers` pytest-xdist workers (its PYTEST_XDIST_WORKER_COUNT;
    None: not under xdist) may use on `cores` cores: their share, at least 1. None: not under
    xdist, where a test may use every core."""
    if not workers:
        return None
    return max(1, cores // int(workers))
