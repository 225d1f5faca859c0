"""Optimizer factory: sgd (momentum), adam and adamw, with torch's fastest implementation."""

from __future__ import annotations

from collections.abc import Iterable

import torch

DEFAULT_LR = {"sgd": 0.05, "adam": 1e-3, "adamw": 1e-3}


def implementation(device: torch.device) -> str:
    """Fused kernels on CUDA (one launch for all parameters); foreach (multi-tensor) on the CPU,
    where the fused CPU kernels are not faster for models of this size."""
    return "fused" if device.type == "cuda" else "foreach"


def make(
    name: str,
    params: Iterable[torch.nn.Parameter],
    device: torch.device,
    lr: float | None = None,
    capturable: bool = False,
) -> tuple[torch.optim.Optimizer, str]:
    """Build optimizer `name` over `params`; returns it and the implementation used.
    `capturable` keeps Adam's step count on the device so a CUDA graph can capture the step."""
    impl = implementation(device)
    fused, foreach = (True, None) if impl == "fused" else (None, True)
    lr = DEFAULT_LR[name] if lr is None else lr
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, fused=fused, foreach=foreach), impl
    if name == "adam":
        return torch.optim.Adam(
            params, lr=lr, fused=fused, foreach=foreach, capturable=capturable
        ), impl
    if name == "adamw":
        return torch.optim.AdamW(
            params, lr=lr, weight_decay=0.01, fused=fused, foreach=foreach, capturable=capturable
        ), impl
    raise ValueError(f"unknown optimizer {name!r}; allowed: {', '.join(DEFAULT_LR)}")
