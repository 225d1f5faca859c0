"""The FLOP formulas a training step is counted with (probes.step_count.CountStep counts them),
and what one step's count says.

The formulas are torch.utils.flop_counter's registry, FlopCounterMode's own (so `flops_method`
keeps its value "FlopCounterMode"): matmuls, convolutions and the fused attention kernels; nothing
for elementwise work (norms, activations, the loss) and, on the CPU, nothing for
scaled_dot_product_attention, whose CPU kernel the registry does not know. We add the CPU kernel
with the registry's own formulas for the CUDA kernels, so every device counts attention the same
way: the full T x T score matrix (a causal mask's skipped half is counted as work), and a
backward of five matmuls: the fused kernels (flash, memory-efficient, cuDNN, and the CPU's flash
kernel) keep no score matrix and recompute it in backward. That one recomputed matmul is work the
device did, so it is in the total; it is no work the model needs, so `StepFlops.model` (what MFU
divides, as PaLM and nanoGPT count: 3x the forward) leaves it out, like the recomputation of
activation checkpointing.

The optimizer's FLOPs are elementwise, so the formulas see none of them: they are counted
analytically per parameter element (`optimizer_flops`).

Activation checkpointing (issue 25) recomputes forward work in backward: the counter sees it
(it is work the device did) and counts it apart too (`StepFlops.recomputed`).
"""

from __future__ import annotations

from collections.abc import Callable
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


def _scores_recomputed(
    grad_out: Any, query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    # the backward's first matmul, Q K^T again: [b, h, s_q, d] @ [b, h, d, s_k]
    b, h, s_q, d = query
    s_k = key[2]
    return fc.bmm_flop((b * h, s_q, d), (b * h, d, s_k))


# Every formula, keyed by operator packet (aten.mm): the registry's, then ours (shape formulas,
# wrapped as the registry wraps its own).
FORMULAS: dict[Any, Callable[..., int]] = {
    **fc.flop_registry,
    **{op: fc.shape_wrapper(f) for op, f in MISSED.items()},
}

# Fused attention backward kernels, with the FLOPs of the score matrix each recomputes (part of
# its formula's count). The raw kernels (_flash_attention_backward, used for nested and
# variable-length batches) are not here: their recomputation stays in `StepFlops.model`.
RECOMPUTED_IN_BACKWARD: dict[Any, Callable[..., int]] = {
    getattr(aten, name): fc.shape_wrapper(_scores_recomputed)
    for name in (
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_cudnn_attention_backward",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
    )
    if hasattr(aten, name)
}


@dataclass(frozen=True)
class StepFlops:
    """One step's forward + backward FLOPs, and which part came from formulas we added."""

    total: int
    added: int  # counted by our formulas for kernels the counter misses (part of total)
    by_operator: dict[str, int]
    recomputed: int = 0  # recomputed in backward by activation checkpointing (part of total)
    # the score matrices fused attention kernels recompute in their backward (part of total)
    attention_recomputed: int = 0

    @property
    def model(self) -> int:
        """The FLOPs the model needs, every recomputation left out (what MFU divides, as PaLM)."""
        return self.total - self.recomputed - self.attention_recomputed

    @property
    def method(self) -> str:
        return COUNTER + ("+cpu_sdpa" if self.added else "")


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
