"""The FLOPs and the minimum bytes of one training step, counted by one dispatch mode that keeps
nothing but numbers. FlopCounterMode's module tracker holds every submodule's outputs until it
exits, which kept checkpointed blocks' recomputed activations; `CountStep` uses the same formulas
(torch's flop registry plus `flops.MISSED`) and decompositions without the tracker, and counts the
bytes of probes.bytes in the same pass.

What activation checkpointing recomputes in backward runs under `recomputation()`, which marks
what every open counter sees meanwhile as recomputed too.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gpubench.probes import bytes as step_bytes
from gpubench.probes import flops
from gpubench.probes.probe import Probe

# Metadata queries a tensor subclass (a nested tensor) may send here: FlopCounterMode declines
# them, so that the subclass answers; they move nothing and count nothing.
_METADATA = {
    getattr(torch.ops.aten, name).default
    for name in (
        "sym_is_contiguous",
        "is_strides_like_format",
        "is_non_overlapping_and_dense",
        "size",
        "sym_size",
        "stride",
        "sym_stride",
        "storage_offset",
        "sym_storage_offset",
        "numel",
        "sym_numel",
        "dim",
    )
    if hasattr(torch.ops.aten, name)
} | {
    torch.ops.aten.is_contiguous.default,
    torch.ops.aten.is_contiguous.memory_format,
    torch.ops.prim.layout.default,
}


@dataclass(frozen=True)
class StepCount:
    """What ran inside one CountStep: its FLOPs and its minimum bytes moved."""

    flops: flops.StepFlops
    bytes: step_bytes.StepBytes


class CountStep(Probe):
    """Counts the FLOPs and minimum bytes of what runs inside it; `result` is set on a clean
    exit. It keeps counts only (no tensor outlives its operator), so the block's peak memory is
    its own. One block at a time per instance; several instances may be open."""

    def __init__(self) -> None:
        self.result: StepCount | None = None
        self._mode: _CountingMode | None = None

    def start(self) -> None:
        self.result = None
        self._flops: Counter[str] = Counter()
        self._bytes: Counter[str] = Counter()
        self._added = self._recomputed = self._attention_recomputed = 0
        self._recomputing = 0  # > 0 inside a checkpointed block's recomputation
        self._mode = _CountingMode(self)
        self._mode.__enter__()
        with _LOCK:
            _COUNTING.append(self)

    def stop(self, failed: bool = False) -> None:
        with _LOCK:
            _COUNTING.remove(self)
        assert self._mode is not None
        self._mode.__exit__(None, None, None)
        self._mode = None
        if failed:
            return  # the step failed: its own exception is the one to report
        counted = flops.StepFlops(
            total=sum(self._flops.values()),
            added=self._added,
            by_operator=dict(self._flops),
            recomputed=self._recomputed,
            attention_recomputed=self._attention_recomputed,
        )
        moved = step_bytes.StepBytes(sum(self._bytes.values()), dict(self._bytes))
        self.result = StepCount(counted, moved)

    def _count_flops(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        packet = func._overloadpacket
        formula = flops.FORMULAS.get(packet)
        if formula is None:
            return
        n = int(formula(*args, **kwargs, out_val=out))
        if not n:
            return
        again = flops.RECOMPUTED_IN_BACKWARD.get(packet)
        with _LOCK:  # on a GPU the backward runs on autograd's own thread
            self._flops[str(packet)] += n
            if packet in flops.MISSED:
                self._added += n
            if self._recomputing:
                self._recomputed += n
            if again is not None:
                self._attention_recomputed += int(again(*args, **kwargs, out_val=out))

    def _count_bytes(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        inputs, outputs = tree_leaves((args, kwargs)), tree_leaves(out)
        if step_bytes.moves_nothing(func, inputs, outputs):
            return
        moved = step_bytes.distinct_bytes(inputs) + step_bytes.distinct_bytes(outputs)
        if moved:
            with _LOCK:
                self._bytes[str(func)] += moved


class _CountingMode(TorchDispatchMode):
    """A CountStep's dispatch mode: runs each operator and hands it to the counts."""

    def __init__(self, counter: CountStep) -> None:
        super().__init__()
        self.counter = counter
        # how deep in an operator's decomposition this thread is: its pieces count FLOPs, and
        # the bytes are the decomposed operator's own (as a byte count above a FLOP counter
        # saw them)
        self._depth = threading.local()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _METADATA:
            return NotImplemented
        depth = getattr(self._depth, "n", 0)
        if func._overloadpacket not in flops.FORMULAS and func is not torch.ops.prim.device.default:
            # as FlopCounterMode: an operator without a formula may decompose into ones with one
            self._depth.n = depth + 1
            try:
                with self:
                    out = func.decompose(*args, **kwargs)
            finally:
                self._depth.n = depth
            if out is not NotImplemented:
                if depth == 0:
                    self.counter._count_bytes(func, args, kwargs, out)
                return out
        out = func(*args, **kwargs)
        self.counter._count_flops(func, args, kwargs, out)
        if depth == 0:
            self.counter._count_bytes(func, args, kwargs, out)
        return out


# The counters open now. A list, not a thread-local: on a GPU the backward (and so the
# recomputation) runs on autograd's own threads.
_COUNTING: list[CountStep] = []
_LOCK = threading.RLock()


@contextlib.contextmanager
def recomputation() -> Iterator[None]:
    """Around the forward work activation checkpointing recomputes in backward: every open
    CountStep counts it as recomputed too (none open: a timed step pays nothing). Ended in a
    `finally`: torch.utils.checkpoint ends a recomputation early by raising inside it."""
    with _LOCK:
        counting = list(_COUNTING)
        for counter in counting:
            counter._recomputing += 1
    try:
        yield
    finally:
        with _LOCK:
            for counter in counting:
                counter._recomputing -= 1
