"""The training step: zero_grad; per micro-batch forward under autocast, loss scaled by 1/k,
backward (ranks synchronise gradients in the last one only); one optimizer step."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gpubench.config import precision
from gpubench.harness import optimizers
from gpubench.models.workload import Workload


@contextlib.contextmanager
def gradient_sync(model: nn.Module, sync: bool) -> Iterator[None]:
    """A backward in this block reduces gradients across ranks only if `sync` (DDP's
    no_sync, FSDP2's set_requires_gradient_sync): under accumulation the last micro-batch
    reduces the sum once per update, not k times. The forward runs in it too (DDP prepares its
    reduction there); a single process has nothing to synchronise."""
    if not sync and isinstance(model, nn.parallel.DistributedDataParallel):
        with model.no_sync():
            yield
    elif not sync and hasattr(model, "set_requires_gradient_sync"):  # an FSDP2 module
        set_sync: Callable[[bool], None] = model.set_requires_gradient_sync  # type: ignore[assignment]
        set_sync(False)
        try:
            yield
        finally:
            set_sync(True)
    else:
        yield


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
    accumulate: int = 1  # micro-batches per optimizer step (issue 25)

    def step(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """One optimizer update on the whole batch, in `accumulate` equal micro-batches along
        dim 0, each mean loss scaled by 1/accumulate (the gradients are the whole batch's mean
        loss's). Returns the batch's mean loss, detached and unsynchronised."""
        self.optimizer.zero_grad(set_to_none=True)
        k = self.accumulate
        assert inputs.shape[0] % k == 0, (inputs.shape, k)
        total = None
        # k = 1 runs the batch itself (no views, no division): the step it always was
        micro = [(inputs, targets)]
        if k > 1:
            micro = list(zip(inputs.chunk(k), targets.chunk(k), strict=True))
        for i, (x, y) in enumerate(micro):
            # DDP decides in the forward whether the backward reduces: both go inside
            with gradient_sync(self.model, sync=i == k - 1):
                with torch.autocast(
                    self.device.type,
                    dtype=self.autocast_dtype or torch.float32,
                    enabled=self.autocast_dtype is not None,
                    cache_enabled=self.autocast_cache,
                ):
                    loss = self.loss_fn(self.model(x), y)
                    loss = loss / k if k > 1 else loss
                (loss if self.scaler is None else self.scaler.scale(loss)).backward()
            total = loss.detach() if total is None else total + loss.detach()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # unscales once, skips the step on inf/nan
            self.scaler.update()
        else:
            self.optimizer.step()
        assert total is not None
        return total


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
    accumulate: int = 1,
) -> Trainer:
    """Move the workload's model to `device` (channels-last and compiled if asked) and build its
    optimizer and loss scaler; `cuda_graph` prepares the trainer for whole-step capture."""
    prec = precision.get(precision_name)
    model = workload.model.to(device).train()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    opt, impl = optimizers.make(
        optimizer_name, model.parameters(), device, lr, capturable=cuda_graph
    )
    if compile:
        # Static shapes: a second batch size in one process (the confirmation's candidates, an
        # eval batch) gets a graph of its own, as the sweep measured, never a dynamic one.
        model = torch.compile(model, dynamic=False)  # type: ignore[assignment]
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
        accumulate=accumulate,
    )
