"""The minimum bytes one training step must move, counted by probes.step_count.CountStep in the
same pass as its FLOPs: every operator that runs reads each of its tensor inputs once and writes
each of its tensor outputs once. Views (`t`, `view`, `expand`, ...) move nothing and are not
counted, nor are operators whose schema does not flag them as views but whose outputs alias their
inputs (`_unsafe_view`, `_reshape_alias`, `alias`, `lift_fresh`) and which write nothing. An
in-place operator (`add_`) reads and writes its first argument: both are counted, as the hardware
moves both; one tensor passed twice (`a + a`) is read once.

It is counted on a steady step (harness.point: the second warm-up step), not the first, which
also creates the optimizer's state.

It is a lower bound: a kernel that re-reads a tile from memory, or spills, moves more; a fused
kernel (torch.compile, a CUDA graph does not fuse) moves less than the eager operators it
replaces, which is why the count is taken on the eager step. With the FLOP count it places a
step on the roofline: arithmetic intensity = FLOPs / minimum bytes.
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
