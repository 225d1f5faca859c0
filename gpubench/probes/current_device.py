"""Making a point's device the current CUDA device: `torch.cuda.Event.record()` without a stream
takes the *current* device's stream, so a point on `cuda:1` would be timed on `cuda:0`. Timings
also name their stream (stream_of); the current device covers the rest (a user's model on "cuda").
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any

import torch


def made_current(device: torch.device | str) -> AbstractContextManager[Any]:
    """A context in which `device` is the current CUDA device (nothing changes for a CPU, or
    for a bare "cuda", which means the current device already)."""
    device = torch.device(device)
    if device.type != "cuda" or device.index is None:
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def stream_of(device: torch.device) -> torch.cuda.Stream:
    """The current stream of `device` (not of the current device): where its work runs."""
    return torch.cuda.current_stream(device)


def cuda_index(device: torch.device) -> int:
    """The index of CUDA device `device` (a bare "cuda": the current device's)."""
    return device.index if device.index is not None else torch.cuda.current_device()


def synchronize(device: torch.device) -> None:
    """Wait for `device`'s work to finish (nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
