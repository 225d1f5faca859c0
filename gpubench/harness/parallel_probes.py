"""What a rank of a parallel point observes besides its step times: the FLOPs and bytes of a
steady step, and the CPU that processes outside its group took while it measured; and what the
group's row makes of them (the load outside the group, oversubscribed cores).

The machine's busy time over a rank's measured steps counts the group's other ranks as "other
processes" too, so each rank also reports its own CPU time: what lies outside the group is the
rank's reading less the other ranks' own (their measured steps run in the same seconds: every
step ends in a collective).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from types import TracebackType

from torch import Tensor

from gpubench.harness.step import PreparedStep
from gpubench.probes import load
from gpubench.probes.step_count import CountStep


@dataclass(frozen=True)
class CountedStep:
    """One steady step run under the FLOP and byte counter: its loss (unsynchronised), and
    this rank's FLOPs, the model's share of them (recomputations left out: what MFU divides)
    and the minimum bytes moved in it."""

    loss: Tensor
    flops: int
    bytes: int
    model_flops: int


def counted_step(prepared: PreparedStep) -> CountedStep:
    """Run one training step of `prepared` under the FLOP and byte counters (as the single
    process counts its second warm-up step: a steady one). Every rank runs it, as the step's
    collectives must match; the counters see the collectives but count no FLOPs in them."""
    inputs, targets = prepared.batches.next()
    with CountStep() as counted:
        loss = prepared.trainer.step(inputs, targets)
    assert counted.result is not None
    n = counted.result.flops
    return CountedStep(loss, n.total, counted.result.bytes.total, n.model)


class RankLoad:
    """Context manager over a rank's measured steps: `others_cores`, the cores every other
    process kept busy meanwhile (the group's other ranks included; None where unknown, see
    probes.load.OtherLoad), and `own_cores`, this process's CPU time (all its threads) over the
    block's wall time."""

    def __init__(self) -> None:
        self.others_cores: float | None = None
        self.own_cores: float | None = None
        self._others = load.OtherLoad()
        self._start = (0.0, 0.0)

    def __enter__(self) -> RankLoad:
        self._start = (time.perf_counter(), _cpu_s())
        self._others.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._others.__exit__(exc_type, exc, tb)
        wall0, cpu0 = self._start
        wall = time.perf_counter() - wall0
        self.others_cores = self._others.cores
        self.own_cores = (_cpu_s() - cpu0) / wall if wall > 0 else None


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def outside_load(readings: list[tuple[float | None, float | None]]) -> float | None:
    """The cores that processes outside the group kept busy while it measured, from each rank's
    (others_cores, own_cores): each rank's reading less the other ranks' own cores, the largest
    of those (never below 0); None where no rank could tell."""
    outside = []
    for i, (others, _) in enumerate(readings):
        peers = [own for j, (_, own) in enumerate(readings) if j != i]
        if others is None or any(own is None for own in peers):
            continue
        outside.append(max(0.0, others - sum(own for own in peers if own is not None)))
    return max(outside) if outside else None


def oversubscribed(nproc: int, threads: int, cores: int) -> bool:
    """Whether `nproc` processes of `threads` threads each want more than this node's `cores`
    (their ranks then take turns on cores, and their step times say so, not the hardware)."""
    return nproc * threads > cores
