"""A multi-layer perceptron classifying flattened images."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from gpubench.models.workload import Workload, image_classification


@dataclass(frozen=True)
class MLPConfig:
    image_shape: tuple[int, int, int] = (3, 32, 32)
    hidden: tuple[int, ...] = (512, 512)
    classes: int = 10

    @property
    def in_features(self) -> int:
        c, h, w = self.image_shape
        return c * h * w

    def layer_shapes(self) -> list[tuple[int, int]]:
        dims = [self.in_features, *self.hidden, self.classes]
        return list(itertools.pairwise(dims))


PRESETS = {
    "tiny": MLPConfig(image_shape=(1, 8, 8), hidden=(32,)),
    "small": MLPConfig(hidden=(512, 512)),
    "base": MLPConfig(hidden=(4096, 4096, 4096)),
}


class MLP(nn.Module):
    def __init__(self, cfg: MLPConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(i, o) for i, o in cfg.layer_shapes())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


def training_flops_per_sample(cfg: MLPConfig) -> float:
    """Matmul FLOPs of forward + backward for one sample: 2*in*out forward, 4*in*out backward
    (gradients of inputs and weights), less the first layer's input gradient (nothing needs it)."""
    shapes = cfg.layer_shapes()
    first_in, first_out = shapes[0]
    return 6.0 * sum(i * o for i, o in shapes) - 2.0 * first_in * first_out


def build(cfg: MLPConfig) -> Workload:
    return image_classification(
        "mlp", MLP(cfg), cfg.image_shape, cfg.classes, training_flops_per_sample(cfg)
    )
