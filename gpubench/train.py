"""The training step: zero_grad, forward under autocast, loss, backward, optimizer step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gpubench import optim, precision
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

    def step(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """One training step on the whole batch. Returns the loss, detached and unsynchronised."""
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            self.device.type,
            dtype=self.autocast_dtype or torch.float32,
            enabled=self.autocast_dtype is not None,
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
) -> Trainer:
    """Move the workload's model to `device` and build its optimizer and loss scaler."""
    prec = precision.get(precision_name)
    model = workload.model.to(device).train()
    opt, impl = optim.make(optimizer_name, model.parameters(), device, lr)
    scaler = torch.amp.GradScaler(device.type) if prec.scaler else None
    return Trainer(model, opt, workload.loss_fn, device, prec.autocast, scaler, impl)
