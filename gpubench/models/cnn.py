"""A ResNet-style convolutional network (BasicBlocks with BatchNorm) on 3x32x32 images."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from gpubench.models.workload import Workload, image_classification


@dataclass(frozen=True)
class CNNConfig:
    widths: tuple[int, ...] = (16, 32, 64)
    blocks: tuple[int, ...] = (1, 1, 1)
    image_shape: tuple[int, int, int] = (3, 32, 32)
    classes: int = 10


PRESETS = {
    "tiny": CNNConfig(widths=(8, 16), blocks=(1, 1)),
    "small": CNNConfig(widths=(16, 32, 64), blocks=(1, 1, 1)),
    "base": CNNConfig(widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2)),  # ResNet-18 layout
}


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, cfg: CNNConfig) -> None:
        super().__init__()
        c0 = cfg.widths[0]
        self.stem = nn.Sequential(
            nn.Conv2d(cfg.image_shape[0], c0, 3, 1, 1, bias=False), nn.BatchNorm2d(c0), nn.ReLU()
        )
        layers: list[nn.Module] = []
        cin = c0
        for i, (width, n) in enumerate(zip(cfg.widths, cfg.blocks, strict=True)):
            for j in range(n):
                layers.append(BasicBlock(cin, width, 2 if (i > 0 and j == 0) else 1))
                cin = width
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, cfg.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def _conv_macs(cin: int, cout: int, k: int, stride: int, h: int, w: int) -> tuple[int, int, int]:
    """Multiply-accumulates of a k x k convolution with padding k//2, and its output size."""
    pad = k // 2
    ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    return cin * cout * k * k * ho * wo, ho, wo


def training_flops_per_sample(cfg: CNNConfig) -> float:
    """Convolution and linear FLOPs of forward + backward for one image: 2*MACs forward and
    4*MACs backward (input and weight gradients) per layer, less the stem's input gradient (the
    image needs none). BatchNorm, ReLU, pooling and the loss are elementwise and not counted."""
    c, h, w = cfg.image_shape
    stem, h, w = _conv_macs(c, cfg.widths[0], 3, 1, h, w)
    macs, cin = stem, cfg.widths[0]
    for i, (width, n) in enumerate(zip(cfg.widths, cfg.blocks, strict=True)):
        for j in range(n):
            stride = 2 if (i > 0 and j == 0) else 1
            m1, ho, wo = _conv_macs(cin, width, 3, stride, h, w)
            m2, _, _ = _conv_macs(width, width, 3, 1, ho, wo)
            shortcut = (
                _conv_macs(cin, width, 1, stride, h, w)[0] if stride != 1 or cin != width else 0
            )
            macs += m1 + m2 + shortcut
            cin, h, w = width, ho, wo
    macs += cin * cfg.classes  # the linear head
    return 6.0 * macs - 2.0 * stem


def build(cfg: CNNConfig) -> Workload:
    # The teacher sees a 4x4-pooled image so that the labels depend on spatial structure.
    return image_classification(
        "cnn",
        ResNet(cfg),
        cfg.image_shape,
        cfg.classes,
        training_flops_per_sample(cfg),
        lambda x: F.avg_pool2d(x, 8),
    )
