"""Workloads for the device pool's tests (not part of gpubench): each names, in its Workload's
name (a row's `workload`), the CUDA_VISIBLE_DEVICES its worker saw; `visible_slow` also sleeps
at its second forward pass (a measured point surely in flight when a test stops the sweep)."""

from __future__ import annotations

import os

from fault_workloads import _asleep_at, _wrap

from gpubench import models
from gpubench.models.workload import Workload


def _seen() -> str:
    return f"visible={os.environ.get('CUDA_VISIBLE_DEVICES')}"


def visible() -> Workload:
    """The tiny MLP, named after the CUDA_VISIBLE_DEVICES of the process that built it."""
    w = models.build("mlp", "tiny")
    w.name = _seen()
    return w


def visible_slow() -> Workload:
    """fault_workloads.slow (its second forward pass sleeps $GPUBENCH_TEST_SLOW_S seconds, after
    touching $GPUBENCH_TEST_SLOW_MARKER), named as visible()."""
    w = _wrap(_asleep_at(2))
    w.name = _seen()
    return w
