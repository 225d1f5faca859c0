"""How a failed point is classified: the one place that decides whether an exception is an
out-of-memory error (status `oom`) or another error (status `error`), and the one-line reason
a row records for it."""

from __future__ import annotations

import torch

_OOM_MARKERS = (
    "can't allocate memory",
    "cannot allocate memory",
    "not enough memory",
    "bad_alloc",
    "out of memory",
    "alloc_failed",
)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}" if text else type(exc).__name__


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is a device or host allocation failure."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError | OSError) and any(m in text for m in _OOM_MARKERS)
