"""Whether a test has the GPU and the host's cores to itself (not a test module).

Under pytest-xdist with more than one worker, the other workers' CUDA points share the GPU (its
time slices, NVML's driver lock) and the host's cores (the H100 run: 14 workers on 16 cores, each
with its own workers, samplers and ranks). A real-hardware timing figure is then that sharing's,
not the code's: an NVML sampler's rate, CUDA events against the host clock (each window's first
mark waits for another process's kernels, each synchronisation for a core), a point against a
matmul roof calibrated at another moment of the sharing. Tests assert such figures only where
`workers` is 1 (`pytest -m gpu`, serially); what holds under any sharing they assert always.
"""

from __future__ import annotations

import pytest


def workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers run this session (1 without xdist). Read from xdist's
    worker input, not the environment: tests/conftest.py removes xdist's variables from it."""
    workerinput = getattr(config, "workerinput", None)
    return 1 if workerinput is None else int(workerinput["workercount"])
