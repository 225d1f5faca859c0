"""The test suite's own set-up for pytest-xdist (tests/conftest.py): workers share the cores."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# tests/conftest.py by its path: `import conftest` may find tests/benchmarks/conftest.py
_spec = importlib.util.spec_from_file_location(
    "suite_conftest", Path(__file__).with_name("conftest.py")
)
assert _spec is not None and _spec.loader is not None
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
threads_per_worker = _conftest.threads_per_worker


def test_xdist_workers_share_the_cores_between_them() -> None:
    assert threads_per_worker(None, 16) is None  # serially a test may use every core
    assert threads_per_worker("4", 16) == 4
    assert threads_per_worker("15", 16) == 1
    assert threads_per_worker("15", 2) == 1  # never none
