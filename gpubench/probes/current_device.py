"""Making a point's device the current CUDA device.

CUDA events record on a stream, and `torch.cuda.Event.record()` with no stream takes the current
stream of the *current* device, which nothing sets: without this, a point on `cuda:1` would be
timed by events on `cuda:0` (as would the matmul roof). Every CUDA timing here also names its
stream explicitly (stream_of); running each point with its device current covers the rest
(`torch.cuda.current_device()`, and a user's model that allocates on "cuda").
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
