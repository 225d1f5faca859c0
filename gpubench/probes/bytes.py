"""The minimum bytes one training step must move (counted by probes.step_count.CountStep with its
FLOPs): each operator reads each tensor input once and writes each tensor output once. Views, and
operators that write nothing and return aliases of their inputs, move nothing; an in-place
operator reads and writes its first argument; one tensor passed twice is read once.

A lower bound, counted on a steady eager step: a kernel that re-reads or spills moves more, a
fused one (torch.compile) less. FLOPs / minimum bytes places the step on the roofline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor's elements occupy in memory: its elements, or its storage where that is
    smaller (an expanded tensor repeats elements it stores once)."""
    logical = t.numel() * t.element_size()
    try:
        stored = t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, sparse)
        return logical
    return min(logical, stored)


@dataclass(frozen=True)
class StepBytes:
    """Minimum bytes of what ran: `total`, and per operator (`aten.addmm.default`: bytes)."""

    total: int
    by_operator: dict[str, int]


def moves_nothing(func: Any, inputs: list[Any], outputs: list[Any]) -> bool:
    """Whether `func` is a view: flagged so, or writing nothing and returning only tensors that
    share an input's storage."""
    if getattr(func, "is_view", False):
        return True
    schema = getattr(func, "_schema", None)
    if schema is None or schema.is_mutable:
        return False
    held = {_storage_ptr(x) for x in inputs if isinstance(x, torch.Tensor)}
    made = [_storage_ptr(x) for x in outputs if isinstance(x, torch.Tensor)]
    return bool(made) and all(p is not None and p in held for p in made)


def _storage_ptr(t: torch.Tensor) -> int | None:
    if t.device.type == "meta":
        return None
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse)
        return None


def distinct_bytes(leaves: list[Any]) -> int:
    """Bytes of the distinct tensors among `leaves`: `a + a` reads `a` once."""
    seen: dict[tuple[int, int, tuple[int, ...]], int] = {}
    for x in leaves:
        if isinstance(x, torch.Tensor) and x.device.type != "meta":
            seen[(x.data_ptr(), x.element_size(), tuple(x.shape))] = tensor_bytes(x)
    return sum(seen.values())
