"""The step a point measures: its trainer and batches, with the point's speed options applied
(torch.compile, channels-last layout, whole-step CUDA graph capture: one replay launches the
forward, backward and optimizer step)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from gpubench import models
from gpubench.config import needs, precision
from gpubench.config.checks import split_reason
from gpubench.config.model_options import decode
from gpubench.config.spec import Point
from gpubench.data import synthetic
from gpubench.harness.checkpointing import checkpoint_blocks
from gpubench.harness.input_wait import LoaderBatches, loader_reason
from gpubench.harness.timing import synchronize
from gpubench.harness.train import Trainer, make_trainer
from gpubench.models import blocks
from gpubench.models.workload import Workload


def build_workload(point: Point) -> Workload:
    """`point`'s workload, its weights drawn after seeding torch with the point's seed (so every
    rank of a parallel point, and every rebuild, starts from the same weights)."""
    torch.manual_seed(point.seed)
    return models.build(point.model, point.model_size, **decode(point.model_options))


def unsupported_reason(point: Point, workload: Workload | None = None) -> str | None:
    """Why `point` cannot run on its device, or None (the model's checks only with `workload`)."""
    device = torch.device(point.device)
    reason = precision.unsupported_reason(point.precision, device)
    reason = reason or synthetic.unsupported_reason(point.data, device)
    # a setting without what it needs (config.needs: a CUDA device, convolutions, a loader)
    reason = reason or needs.refusal(point.to_dict(), workload is None or workload.convolutional)
    reason = reason or loader_reason(point)  # issue 31
    reason = reason or _graph_reason(point)
    return reason or _effective_batch_reason(point, workload)


def _effective_batch_reason(point: Point, workload: Workload | None) -> str | None:
    """A batch that does not split into `accumulate` equal micro-batches ("auto" batch sizes
    and a strong-scaling rank's share meet this here), or checkpointing without blocks."""
    if reason := split_reason(point.per_process_batch(), point.accumulate):
        return reason
    if point.checkpoint == "blocks" and workload is not None:
        return blocks.unsupported_reason(workload.model, point.model)
    return None


@contextlib.contextmanager
def backend_flags(point: Point) -> Iterator[None]:
    """The point's process-wide backend flags for the block, then restored: TF32 for its
    precision and torch.backends.cudnn.benchmark (PyTorch's default: off; it autotunes in a
    shape's first steps: the warm-up's)."""
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = point.cudnn_benchmark
    try:
        with precision.tf32_mode(precision.get(point.precision).tf32):
            yield
    finally:
        torch.backends.cudnn.benchmark = old


# Steps run on a side stream before capture, as CUDA graphs require (lazy state such as
# optimizer moments and cuBLAS workspaces must exist before the capture records their addresses).
_GRAPH_WARMUP_STEPS = 3


def _graph_reason(point: Point) -> str | None:
    """Why a CUDA graph cannot capture `point`'s step where it has a CUDA device."""
    if not point.cuda_graph:
        return None
    if precision.get(point.precision).scaler:
        return "fp16 loss scaling checks for inf on the host every step, which a graph cannot hold"
    if point.compile == "compile":
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
            for _ in range(_GRAPH_WARMUP_STEPS):
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


@dataclass
class PreparedStep:
    """`step()` runs one training step on the next batch and returns its (unsynchronised) loss;
    `capture_time_s`: the one-off cost of CUDA graph capture (None without a graph)."""

    trainer: Trainer
    batches: synthetic.Batches | LoaderBatches
    step: Callable[[], Tensor]
    capture_time_s: float | None


def prepare(point: Point, workload: Workload, lr: float | None = None) -> PreparedStep:
    """`point`'s trainer and batches on its device (`lr`: the optimizer's default if None);
    with checkpoint = "blocks", the workload's model checkpoints its repeated blocks."""
    device = torch.device(point.device)
    if point.checkpoint == "blocks":
        checkpoint_blocks(workload.model)
    trainer = make_trainer(
        workload,
        device,
        point.precision,
        point.optimizer,
        lr,
        compile=point.compile == "compile",
        channels_last=point.channels_last,
        cuda_graph=point.cuda_graph,
        accumulate=point.accumulate,
    )
    batches: synthetic.Batches | LoaderBatches
    if point.data == "loader":  # issue 31: a DataLoader over files, per-sample work in workers
        batches = LoaderBatches(point, workload)
    else:
        batches = synthetic.Batches(
            workload,
            point.batch_size,
            device,
            point.data,
            point.seed,
            channels_last=point.channels_last,
        )
    if not point.cuda_graph:
        return PreparedStep(trainer, batches, lambda: trainer.step(*batches.next()), None)
    synchronize(device)
    t0 = time.perf_counter()
    graphed = GraphedStep(trainer, *batches.next())
    synchronize(device)
    return PreparedStep(
        trainer, batches, lambda: graphed(*batches.next()), time.perf_counter() - t0
    )
