"""torch's intra-op thread count for one point: the `threads` axis."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """Run the block with `threads` intra-op threads (None: leave what torch picked), then
    restore the previous count. The pool is started here, before any memory cap: threads
    created later under an address-space cap could fail to start (an OpenMP abort)."""
    previous = torch.get_num_threads()
    if threads is None or threads == previous:
        yield
        return
    torch.set_num_threads(threads)
    a = torch.ones(256, 256)
    (a @ a).sum().item()
    try:
        yield
    finally:
        torch.set_num_threads(previous)
