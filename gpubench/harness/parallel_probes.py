"""What a rank of a parallel point observes besides its step times: the FLOPs and bytes of a
steady step, and the CPU that processes outside its group took while it measured; and what the
group's row makes of them (the load outside the group, oversubscribed cores).

A rank's reading of other processes' load leaves out gpubench's whole process tree
(probes.process_tree), and the group's ranks are in it: on one node they are forked by the
sweep's fork server; under torchrun the tree's root is the agent that started them. So no
rank counts another as "other", and each node's ranks read their own node's load.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from gpubench.harness.step import PreparedStep
from gpubench.probes import bytes as step_bytes
from gpubench.probes import flops


@dataclass(frozen=True)
class CountedStep:
    """One steady step run under the FLOP and byte counters: its loss (unsynchronised), and
    this rank's FLOPs and minimum bytes moved in it."""

    loss: Tensor
    flops: int
    bytes: int


def counted_step(prepared: PreparedStep) -> CountedStep:
    """Run one training step of `prepared` under the FLOP and byte counters (as the single
    process counts its second warm-up step: a steady one). Every rank runs it, as the step's
    collectives must match; the counters see the collectives but count no FLOPs in them."""
    counted, moved = flops.CountFlops(), step_bytes.CountBytes()
    inputs, targets = prepared.batches.next()
    with counted, moved:
        loss = prepared.trainer.step(inputs, targets)
    assert counted.result is not None and moved.result is not None
    return CountedStep(loss, counted.result.total, moved.result.total)


def outside_load(readings: list[float | None]) -> float | None:
    """The cores that processes outside gpubench's process tree kept busy while the group
    measured, from each rank's reading (probes.load.OtherLoad over its warm-up and measured
    steps: the group's ranks are in the tree, see the module docstring): the largest, None
    where no rank could tell."""
    known = [r for r in readings if r is not None]
    return max(known) if known else None


def oversubscribed(nproc: int, threads: int, cores: int) -> bool:
    """Whether `nproc` processes of `threads` threads each want more than this node's `cores`
    (their ranks then take turns on cores, and their step times say so, not the hardware)."""
    return nproc * threads > cores
