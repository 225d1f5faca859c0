"""The FLOP formulas a training step is counted with (probes.step_count.CountStep), and what one
step's count says.

The formulas are torch.utils.flop_counter's registry (so `flops_method` is "FlopCounterMode"):
matmuls, convolutions and fused attention; nothing elementwise. We add the CPU attention kernel
with the registry's CUDA formulas, so every device counts attention alike: the full T x T scores
(a causal mask's skipped half included) and a five-matmul backward, since the fused kernels
recompute the scores. That recomputed matmul is in the total (the device did it) but not in
`StepFlops.model` (what MFU divides, 3x the forward as PaLM and nanoGPT count), nor is the
recomputation of activation checkpointing (`StepFlops.recomputed`). The optimizer's elementwise
FLOPs are counted analytically per parameter element (`optimizer_flops`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import flop_counter as fc

aten = torch.ops.aten

COUNTER = "FlopCounterMode"


def _cpu_sdpa(query: Any, key: Any, value: Any, *args: Any, **kw: Any) -> int:
    return fc.sdpa_flop_count(query, key, value)


def _cpu_sdpa_backward(
    grad_out: Any, query: Any, key: Any, value: Any, *args: Any, **kw: Any
) -> int:
    return fc.sdpa_backward_flop_count(grad_out, query, key, value)


# Kernels the counter does not know, with the formula that counts them (on tensor shapes).
MISSED: dict[Any, Callable[..., int]] = {
    getattr(aten, name): formula
    for name, formula in (
        ("_scaled_dot_product_flash_attention_for_cpu", _cpu_sdpa),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_sdpa_backward),
    )
    if hasattr(aten, name)
}


def _scores_recomputed(
    grad_out: Any, query: Any, key: Any, value: Any, *args: Any, **kw: Any
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
