"""The training step: zero_grad, forward under autocast, loss, backward, optimizer step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gpubench.config import precision
from gpubench.harness import optimizers
from gpubench.models.workload import Workload


@dataclass
class Trainer:
    """One network, its optimizer and its precision: everything a training step touches."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable[[Tensor, Tensor], Tensor]
    device: torch.device
    autocast_dtype: torch.dtype | None
    scaler: torch.amp.GradScaler | None
    optimizer_impl: str
    autocast_cache: bool = True  # a CUDA graph capture needs the weight-cast cache off

    def step(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """One training step on the whole batch. Returns the loss, detached and unsynchronised."""
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            self.device.type,
            dtype=self.autocast_dtype or torch.float32,
            enabled=self.autocast_dtype is not None,
            cache_enabled=self.autocast_cache,
        ):
            loss = self.loss_fn(self.model(inputs), targets)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach()


def make_trainer(
    workload: Workload,
    device: torch.device,
    precision_name: str,
    optimizer_name: str,
    lr: float | None = None,
    *,
    compile: bool = False,
    channels_last: bool = False,
    cuda_graph: bool = False,
) -> Trainer:
    """Move the workload's model to `device` (in channels-last layout if asked, compiled with
    torch.compile if asked) and build its optimizer and loss scaler. `cuda_graph` prepares the
    trainer for whole-step capture (see gpubench.graphs)."""
    prec = precision.get(precision_name)
    model = workload.model.to(device).train()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    opt, impl = optimizers.make(
        optimizer_name, model.parameters(), device, lr, capturable=cuda_graph
    )
    if compile:
        model = torch.compile(model)  # type: ignore[assignment]
    scaler = torch.amp.GradScaler(device.type) if prec.scaler else None
    return Trainer(
        model,
        opt,
        workload.loss_fn,
        device,
        prec.autocast,
        scaler,
        impl,
        autocast_cache=not cuda_graph,
    )
