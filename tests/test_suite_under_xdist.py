"""The test suite's own set-up for pytest-xdist (tests/conftest.py): workers share the cores."""

from __future__ import annotations

from xdist_threads import threads_per_worker


def test_xdist_workers_share_the_cores_between_them() -> None:
    assert threads_per_worker(None, 16) is None  # serially a test may use every core
    assert threads_per_worker("4", 16) == 4
    assert threads_per_worker("15", 16) == 1
    assert threads_per_worker("15", 2) == 1  # never none
