"""Real data sets held in memory: a fixed train/held-out split, seeded shuffled batches.

Two kinds: `ImageDataSet` (a fixed set of labelled images, shuffled each epoch) and
`TextDataSet` (a token stream; a training sample is a window at a random offset). Both give
batches made on the device, the same ones for the same seed, and a fixed held-out set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gpubench.models.workload import generator

Batch = tuple[Tensor, Tensor]


def digest(info: dict[str, Any], *tensors: Tensor) -> str:
    """sha256 of the tensors' bytes (first 16 hex digits): names exactly what was trained on.
    Computed once, then kept in the data set's `info`."""
    if "sha256" not in info:
        h = hashlib.sha256()
        for t in tensors:
            h.update(t.contiguous().cpu().numpy().tobytes())
        info["sha256"] = h.hexdigest()[:16]
    return str(info["sha256"])


@dataclass
class ImageDataSet:
    """Labelled images: `train_x`/`eval_x` are (N, C, H, W) tensors of any dtype (uint8 or
    float), normalised per batch with the training set's per-channel `mean` and `std`."""

    name: str
    train_x: Tensor
    train_y: Tensor
    eval_x: Tensor
    eval_y: Tensor
    mean: Tensor  # (C,), float32
    std: Tensor  # (C,), float32
    classes: int
    info: dict[str, Any] = field(default_factory=dict)
    task: str = "classification"

    @property
    def train_size(self) -> int:
        return len(self.train_y)

    @property
    def eval_size(self) -> int:
        return len(self.eval_y)

    def image_shape(self) -> tuple[int, int, int]:
        c, h, w = self.train_x.shape[1:]
        return (int(c), int(h), int(w))

    def sha256(self) -> str:
        return digest(self.info, self.train_x, self.train_y, self.eval_x, self.eval_y)

    def _normalise(self, x: Tensor) -> Tensor:
        mean = self.mean.to(x.device).view(1, -1, 1, 1)
        std = self.std.to(x.device).view(1, -1, 1, 1)
        return (x.float() - mean) / std

    def train_batches(self, batch_size: int, device: torch.device, seed: int) -> Iterator[Batch]:
        """Endless batches of exactly `batch_size` samples: each epoch a fresh permutation
        (seeded), the last incomplete batch of an epoch dropped."""
        if batch_size > self.train_size:
            raise ValueError(
                f"batch size {batch_size} exceeds the {self.train_size} training samples of "
                f"{self.name}"
            )
        x, y = self.train_x.to(device), self.train_y.to(device)
        g = generator(torch.device("cpu"), seed)
        while True:
            order = torch.randperm(self.train_size, generator=g).to(device)
            for start in range(0, self.train_size - batch_size + 1, batch_size):
                idx = order[start : start + batch_size]
                yield self._normalise(x[idx]), y[idx]

    def eval_batches(self, device: torch.device, limit: int | None, chunk: int) -> list[Batch]:
        """The held-out set (its first `limit` samples; None: all) in chunks of `chunk`."""
        n = self.eval_size if limit is None else min(limit, self.eval_size)
        return [
            (
                self._normalise(self.eval_x[i : min(i + chunk, n)].to(device)),
                self.eval_y[i : min(i + chunk, n)].to(device),
            )
            for i in range(0, n, chunk)
        ]


@dataclass
class TextDataSet:
    """A token stream split into a training part and a held-out part. A sample is a window of
    `seq_len` input tokens and the same window shifted by one as targets."""

    name: str
    train_tokens: Tensor  # (N,) int64
    eval_tokens: Tensor  # (M,) int64
    vocab: int
    seq_len: int
    info: dict[str, Any] = field(default_factory=dict)
    task: str = "language-model"

    @property
    def train_size(self) -> int:
        """Distinct training windows (one per start offset)."""
        return len(self.train_tokens) - self.seq_len

    @property
    def eval_size(self) -> int:
        """Non-overlapping held-out windows."""
        return (len(self.eval_tokens) - 1) // self.seq_len

    def sha256(self) -> str:
        return digest(self.info, self.train_tokens, self.eval_tokens)

    def _windows(self, tokens: Tensor, starts: Tensor) -> Batch:
        idx = starts[:, None] + torch.arange(self.seq_len + 1, device=starts.device)
        w = tokens[idx]
        return w[:, :-1], w[:, 1:]

    def train_batches(self, batch_size: int, device: torch.device, seed: int) -> Iterator[Batch]:
        """Endless batches of windows at uniformly random offsets (seeded)."""
        tokens = self.train_tokens.to(device)
        g = generator(torch.device("cpu"), seed)
        while True:
            starts = torch.randint(self.train_size, (batch_size,), generator=g).to(device)
            yield self._windows(tokens, starts)

    def eval_batches(self, device: torch.device, limit: int | None, chunk: int) -> list[Batch]:
        """`limit` (None: all) non-overlapping held-out windows, spread evenly over the held-out
        text, in chunks of `chunk` windows."""
        n = self.eval_size if limit is None else min(limit, self.eval_size)
        picks = torch.linspace(0, self.eval_size - 1, n).round().long() * self.seq_len
        tokens = self.eval_tokens.to(device)
        return [self._windows(tokens, picks[i : i + chunk].to(device)) for i in range(0, n, chunk)]


DataSet = ImageDataSet | TextDataSet
