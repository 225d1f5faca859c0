"""Activation checkpointing of a model's repeated blocks: each block's forward runs under
torch.utils.checkpoint (use_reentrant=False), which holds only the block's input and recomputes
the rest in backward, under the step counter's `recomputation()` context (so a counted step
says how many FLOPs were recomputed). Blocks are patched in place (their `forward`): the module
tree, parameter names and FSDP units are unchanged.

Under torch.compile no `context_fn` is given: dynamo accepts only dispatch modes there, and
nothing compiled is counted. BatchNorm in a checkpointed block (the CNN's) updates its running
statistics twice per step; the gradients are unchanged, as torch.utils.checkpoint documents.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from gpubench.models.blocks import repeated_blocks
from gpubench.probes.step_count import recomputation

_ORIGINAL = "_gpubench_forward"  # where a patched block keeps its own forward


def checkpoint_blocks(model: nn.Module) -> int:
    """Run each of `model`'s repeated blocks (gpubench.models.blocks) under activation
    checkpointing; returns how many blocks are checkpointed. Patching twice changes nothing.
    Raises ValueError where the model has no blocks (harness.step refuses such points first)."""
    blocks = repeated_blocks(model)
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no repeated blocks to checkpoint")
    for block in blocks:
        if _ORIGINAL not in block.__dict__:
            setattr(block, _ORIGINAL, block.forward)
            block.forward = functools.partial(_checkpointed, block.__dict__[_ORIGINAL])  # type: ignore[method-assign]
    return len(blocks)


def _checkpointed(forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if torch.compiler.is_compiling():
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    # (around the first forward, around the recomputation in backward)
    contexts = lambda: (contextlib.nullcontext(), recomputation())  # noqa: E731
    return checkpoint(forward, *args, use_reentrant=False, context_fn=contexts, **kwargs)
