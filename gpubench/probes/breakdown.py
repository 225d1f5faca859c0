"""Where a training step's memory goes: parameters, gradients, optimizer state, the activations
saved for backward, and the remainder of the allocator's peak (activations, workspace and
temporaries). All in bytes; each tensor storage is counted once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gpubench.probes.probe import Probe


def _local(t: Tensor) -> Tensor:
    """A sharded tensor's own shard (FSDP2 parameters are DTensors): what this process holds."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _storage_key(t: Tensor) -> tuple[str, int]:
    t = _local(t)
    return (str(t.device), t.untyped_storage().data_ptr())


def _unique_bytes(tensors: Iterable[Tensor], exclude: set[tuple[str, int]] | None = None) -> int:
    seen: set[tuple[str, int]] = set(exclude or ())
    total = 0
    for t in tensors:
        key = _storage_key(t)
        if key not in seen:
            seen.add(key)
            total += _local(t).untyped_storage().nbytes()
    return total


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> Iterator[Tensor]:
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, Tensor):
                yield value


@dataclass(frozen=True)
class Breakdown:
    """Bytes of parameters, gradients and optimizer state (as they stand after a step)."""

    parameters_bytes: int
    gradients_bytes: int
    optimizer_bytes: int

    @property
    def model_state_bytes(self) -> int:
        return self.parameters_bytes + self.gradients_bytes + self.optimizer_bytes

    def remainder_bytes(self, peak_allocated_bytes: int | None) -> int | None:
        """The allocator's peak less the model state: activations, workspace and temporaries.
        None where there is no allocator peak (the CPU)."""
        if peak_allocated_bytes is None:
            return None
        return peak_allocated_bytes - self.model_state_bytes


def breakdown(model: nn.Module, optimizer: torch.optim.Optimizer) -> Breakdown:
    """Measure the model state. Call after a step, while gradients and optimizer state exist
    (before the next zero_grad)."""
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    param_keys = {_storage_key(p) for p in params}
    return Breakdown(
        parameters_bytes=_unique_bytes(params),
        gradients_bytes=_unique_bytes(grads, exclude=param_keys),
        optimizer_bytes=_unique_bytes(_optimizer_tensors(optimizer), exclude=param_keys),
    )


class SavedActivations(Probe):
    """The bytes autograd saves for backward inside the block (`bytes`),
    each storage once, parameters excluded (they are counted as parameters). Where the block
    runs several forward/backward passes (gradient accumulation: a pass's saved tensors are
    freed by its backward before the next forward), `bytes` is the largest pass's: what is held
    at once, not the sum."""

    def __init__(self, model: nn.Module) -> None:
        self._params = {_storage_key(p) for p in model.parameters()}
        self._seen: set[tuple[str, int]] = set()
        self._pass_bytes = 0
        self._peak = 0
        self._in_backward = False
        self._hooks: contextlib.AbstractContextManager[None] | None = None

    @property
    def bytes(self) -> int:
        return max(self._peak, self._pass_bytes)

    def _pack(self, t: Tensor) -> Tensor:
        if self._in_backward:  # a new forward after a backward: the last pass's tensors are gone
            self._peak, self._pass_bytes = self.bytes, 0
            self._seen.clear()
            self._in_backward = False
        if t.layout == torch.strided and t.device.type != "meta":
            key = _storage_key(t)
            if key not in self._params and key not in self._seen:
                self._seen.add(key)
                self._pass_bytes += t.untyped_storage().nbytes()
        return t

    def _unpack(self, t: Tensor) -> Tensor:
        self._in_backward = True
        return t

    def start(self) -> None:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()

    def stop(self, failed: bool = False) -> None:
        assert self._hooks is not None
        self._hooks.__exit__(None, None, None)
