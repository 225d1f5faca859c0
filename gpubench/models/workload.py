"""The Workload: everything the harness needs to train one model on synthetic batches."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

BatchMaker = Callable[[int, torch.device, int], tuple[Tensor, Tensor]]


@dataclass
class Workload:
    """A model to train, how to make its batches, and how to score them.

    `model` is an nn.Module on the CPU in fp32. `make_batch(batch_size, device, seed)` returns
    `(inputs, targets)` built directly on `device`; the same seed gives the same batch.
    `tokens_per_sample` is the sequence length of a sequence model (None otherwise).
    `flops_per_sample` is the analytic count of one training step's forward and backward FLOPs
    per sample, where the workload knows it (None otherwise).
    """

    name: str
    model: nn.Module
    make_batch: BatchMaker
    loss_fn: Callable[[Tensor, Tensor], Tensor]
    tokens_per_sample: int | None = None
    flops_per_sample: float | None = None
    task: str = "classification"

    def batch(
        self, batch_size: int, device: torch.device | str, seed: int = 0
    ) -> tuple[Tensor, Tensor]:
        return self.make_batch(batch_size, torch.device(device), seed)

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        return self.loss_fn(outputs, targets)

    def samples(self, batch_size: int) -> int:
        return batch_size

    def tokens(self, batch_size: int) -> int | None:
        return None if self.tokens_per_sample is None else batch_size * self.tokens_per_sample

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def convolutional(self) -> bool:
        """Whether the model has a 2-D convolution (nn.Conv2d, or a library's subclass of it):
        what channels-last lays out, cuDNN autotunes and an image loader augments for. The one
        answer to "has convolutions" (config.needs' "conv")."""
        return any(isinstance(m, nn.Conv2d) for m in self.model.modules())


def generator(device: torch.device, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def teacher_classes(inputs: Tensor, classes: int, teacher_seed: int = 1234) -> Tensor:
    """Labels from a fixed random linear teacher: a synthetic task a network can learn.

    The teacher is the same for every batch (its seed is fixed), so labels are a function of the
    inputs and the loss falls as the network learns it, unlike random labels.
    """
    flat = inputs.flatten(1).float()
    g = generator(inputs.device, teacher_seed)
    weight = torch.randn(flat.shape[1], classes, generator=g, device=inputs.device)
    return (flat @ weight).argmax(dim=1)


def image_classification(
    name: str,
    model: nn.Module,
    image_shape: tuple[int, ...],
    classes: int,
    flops_per_sample: float | None,
    teacher_view: Callable[[Tensor], Tensor] = lambda x: x,
) -> Workload:
    """A Workload of random images of `image_shape`, each labelled by teacher_classes from
    `teacher_view` of it, trained with cross-entropy."""

    def make_batch(batch_size: int, device: torch.device, seed: int) -> tuple[Tensor, Tensor]:
        x = torch.randn(batch_size, *image_shape, generator=generator(device, seed), device=device)
        return x, teacher_classes(teacher_view(x), classes)

    return Workload(name, model, make_batch, F.cross_entropy, flops_per_sample=flops_per_sample)


def next_token_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy of every position's prediction: logits (N, T, V), targets (N, T)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def language_model(
    name: str,
    model: nn.Module,
    sequences: Callable[[int, torch.device, int], Tensor],
    seq_len: int,
    flops_per_sample: float | None,
) -> Workload:
    """A Workload of next-token prediction: `sequences(batch_size, device, seed)` makes token
    ids (N, seq_len + 1); the inputs are their first seq_len, the targets the same shifted by
    one."""

    def make_batch(batch_size: int, device: torch.device, seed: int) -> tuple[Tensor, Tensor]:
        tokens = sequences(batch_size, device, seed)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    return Workload(
        name, model, make_batch, next_token_loss, seq_len, flops_per_sample, "language-model"
    )


def imported_function(name: str, what: str) -> Any:
    """What 'package.module:function' names (a user's model or loader factory); a ValueError of
    one line, naming it as `what`, where it does not import."""
    module_name, _, func_name = name.partition(":")
    try:
        return getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load {what} {name!r}: {e}") from e
