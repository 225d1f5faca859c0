"""Whole-step CUDA graph capture: one replay launches the forward, backward and optimizer step."""

from __future__ import annotations

import torch
from torch import Tensor

from gpubench.harness.train import Trainer

# Steps run on a side stream before capture, as CUDA graphs require (lazy state such as
# optimizer moments and cuBLAS workspaces must exist before the capture records their addresses).
WARMUP_STEPS = 3


def unsupported_reason(
    trainer_precision_scaled: bool, compiled: bool, device: torch.device
) -> str | None:
    if device.type != "cuda":
        return "CUDA graphs need a CUDA device"
    if trainer_precision_scaled:
        return "fp16 loss scaling checks for inf on the host every step, which a graph cannot hold"
    if compiled:
        return (
            "torch.compile manages its own CUDA graphs (mode='reduce-overhead'); whole-step "
            "capture applies to eager steps"
        )
    return None


class GraphedStep:
    """Captures `trainer.step` on static input buffers; each call copies the batch into them
    and replays the graph. Returns the step's loss (a fresh tensor, so earlier losses survive)."""

    def __init__(self, trainer: Trainer, inputs: Tensor, targets: Tensor) -> None:
        self.inputs = inputs.clone()
        self.targets = targets.clone()
        side = torch.cuda.Stream(trainer.device)
        side.wait_stream(torch.cuda.current_stream(trainer.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                trainer.step(self.inputs, self.targets)
        torch.cuda.current_stream(trainer.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.loss = trainer.step(self.inputs, self.targets)

    def __call__(self, inputs: Tensor, targets: Tensor) -> Tensor:
        self.inputs.copy_(inputs, non_blocking=True)
        self.targets.copy_(targets, non_blocking=True)
        self.graph.replay()
        return self.loss.clone()
