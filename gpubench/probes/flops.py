"""FLOPs of one training step, counted with torch.utils.flop_counter.FlopCounterMode.

The counter knows matmuls, convolutions and the fused attention kernels; it counts nothing for
elementwise work (norms, activations, the loss) and, on the CPU, nothing for
scaled_dot_product_attention, whose CPU kernel it does not know. We add the CPU kernel with the
counter's own formulas for the CUDA kernels, so every device counts attention the same way:
the full T x T score matrix (a causal mask's skipped half is counted as work), and a backward of
five matmuls (the scores are recomputed, as flash attention does).

The optimizer's FLOPs are elementwise, so the counter sees none of them: they are counted
analytically per parameter element (`optimizer_flops`).

Activation checkpointing (issue 25) recomputes forward work in backward: the counter sees it
(it is work the device did), and the recomputation runs under `recomputation()`, which counts
it a second time apart, so that `StepFlops.recomputed` says how much of the total it is.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import flop_counter as fc

aten = torch.ops.aten

COUNTER = "FlopCounterMode"


def _cpu_sdpa(
    query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    return fc.sdpa_flop_count(query, key, value)


def _cpu_sdpa_backward(
    grad_out: Any, query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    return fc.sdpa_backward_flop_count(grad_out, query, key, value)


# Kernels the counter does not know, with the formula that counts them (on tensor shapes).
MISSED: dict[Any, Callable[..., int]] = {}
for _name, _formula in (
    ("_scaled_dot_product_flash_attention_for_cpu", _cpu_sdpa),
    ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_sdpa_backward),
):
    if hasattr(aten, _name):
        MISSED[getattr(aten, _name)] = _formula


@dataclass(frozen=True)
class StepFlops:
    """One step's forward + backward FLOPs, and which part came from formulas we added."""

    total: int
    added: int  # counted by our formulas for kernels the counter misses (part of total)
    by_operator: dict[str, int]
    recomputed: int = 0  # recomputed in backward by activation checkpointing (part of total)

    @property
    def model(self) -> int:
        """The FLOPs the model needs, recomputation left out (what MFU divides, as PaLM)."""
        return self.total - self.recomputed

    @property
    def method(self) -> str:
        return COUNTER + ("+cpu_sdpa" if self.added else "")


class CountFlops:
    """Context manager counting the FLOPs of what runs inside it (`result` is set on exit)."""

    def __init__(self) -> None:
        self._mode = fc.FlopCounterMode(display=False, custom_mapping=dict(MISSED))
        self.result: StepFlops | None = None
        self._recomputed = 0

    def __enter__(self) -> CountFlops:
        self._recomputed = 0
        self._mode.__enter__()
        _COUNTING.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _COUNTING.remove(self)
        self._mode.__exit__(*exc)
        if exc[0] is not None:
            return  # the step failed: its own exception is the one to report
        # no "Global" entry at all where nothing counted ran (a step of elementwise work only)
        counts = self._mode.get_flop_counts().get("Global", {})
        by_op = {str(op): int(n) for op, n in counts.items()}
        added = sum(n for op, n in counts.items() if op in MISSED)
        total = int(self._mode.get_total_flops())
        self.result = StepFlops(total, int(added), by_op, self._recomputed)


# The counters open now. A list, not a thread-local: on a GPU the backward (and so the
# recomputation) runs on autograd's own threads.
_COUNTING: list[CountFlops] = []
_LOCK = threading.Lock()


@contextlib.contextmanager
def recomputation() -> Iterator[None]:
    """Around the forward work activation checkpointing recomputes in backward: counted apart
    into each open CountFlops (nothing at all when none is open: a timed step pays nothing).
    Counted in a `finally`: torch.utils.checkpoint ends a recomputation early, by raising
    inside it, once it has the tensors backward needs."""
    if not _COUNTING:
        yield
        return
    mode = fc.FlopCounterMode(display=False, custom_mapping=dict(MISSED))
    try:
        with mode:
            yield
    finally:
        n = int(mode.get_total_flops())
        with _LOCK:
            for counter in _COUNTING:
                counter._recomputed += n


# Elementwise FLOPs per parameter element of one optimizer step, as torch implements them with
# the settings gpubench uses (steady state: momentum buffers and moments exist).
_OPTIMIZER_FLOPS_PER_ELEMENT = {
    # buf = momentum*buf + grad (2); param -= lr*buf (2)
    "sgd": 4,
    # m.lerp_(g, 1-b1) (3); v = b2*v + (1-b2)*g*g (4); denom = sqrt(v)/c2 + eps (3);
    # param -= step * m / denom (3)
    "adam": 13,
    # adam, plus decoupled weight decay: param *= 1 - lr*wd (1)
    "adamw": 14,
}


def optimizer_flops(optimizer_name: str, parameters: int) -> int | None:
    """Analytic FLOPs of one optimizer step over `parameters` elements, None for an optimizer
    this table does not know."""
    per = _OPTIMIZER_FLOPS_PER_ELEMENT.get(optimizer_name)
    return None if per is None else per * parameters
