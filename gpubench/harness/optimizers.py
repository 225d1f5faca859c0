"""Optimizer factory: sgd (momentum), adam and adamw, with torch's fastest implementation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

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
    if name not in DEFAULT_LR:
        raise ValueError(f"unknown optimizer {name!r}; allowed: {', '.join(DEFAULT_LR)}")
    impl = implementation(device)
    fused, foreach = (True, None) if impl == "fused" else (None, True)
    table: dict[str, tuple[Callable[..., torch.optim.Optimizer], dict[str, Any]]] = {
        "sgd": (torch.optim.SGD, dict(momentum=0.9)),
        "adam": (torch.optim.Adam, dict(capturable=capturable)),
        "adamw": (torch.optim.AdamW, dict(weight_decay=0.01, capturable=capturable)),
    }
    cls, settings = table[name]
    lr = DEFAULT_LR[name] if lr is None else lr
    return cls(params, lr=lr, fused=fused, foreach=foreach, **settings), impl
