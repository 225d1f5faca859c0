"""Gradient synchronisation across ranks, once per optimizer step (issue 25).

Under gradient accumulation every micro-batch's backward but the last only adds to the local
gradients: DistributedDataParallel's `no_sync()` and FSDP2's `set_requires_gradient_sync(False)`
skip their all-reduce (reduce-scatter) there, and the last backward reduces the sum of all of
them at once. The gradients are the same; the collectives happen once per update, not k times.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn


@contextlib.contextmanager
def gradient_sync(model: nn.Module, sync: bool) -> Iterator[None]:
    """A backward in this block reduces gradients across ranks only if `sync`; the forward
    must run in it too (DDP prepares its reduction in the forward). A model that is neither
    DDP nor FSDP2 (a single process) has nothing to synchronise."""
    if sync:
        yield
    elif isinstance(model, nn.parallel.DistributedDataParallel):
        with model.no_sync():
            yield
    elif hasattr(model, "set_requires_gradient_sync"):  # an FSDP2 (fully_shard) module
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        yield
