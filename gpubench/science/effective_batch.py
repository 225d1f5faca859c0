"""The effective-batch answer (issue 25): for each effective batch a run measured in more than one
way (accumulation steps x micro-batch, with or without activation checkpointing), which way is
fastest, and what each other way costs in samples/s and saves in peak memory.

A pure function of rows. Rows compare where they differ only in `accumulate` and `checkpoint`
(same device, precision, effective batch and speed options; over seeds a way's median row
stands for it): their samples/s are per effective sample, so they compare directly. Peak
memory is the allocator's peak where the device has one (CUDA: torch_peak_allocated_bytes),
else the process's peak RSS (the CPU).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from gpubench.config.keys import same_key
from gpubench.config.labels import way
from gpubench.science import standing
from gpubench.science.leaders import interval
from gpubench.science.partition import grouped, label, norm, varying
from gpubench.store.wording import number, percent, size, times

CHOICE = ("accumulate", "checkpoint")
# What a row's peak memory is read from, in order of preference: (column, its name in words).
MEMORY = (
    ("torch_peak_allocated_bytes", "allocator peak"),
    ("host_peak_rss_bytes", "peak RSS"),
)


@dataclass(frozen=True)
class Choice:
    """One way to reach the effective batch: `accumulate` passes of `micro_batch` samples, with
    `checkpoint` ("none" or "blocks"); its status, samples/s (per effective sample) and peak
    memory (bytes). `ratio`: samples/s over the fastest's; `memory_ratio`: peak memory over
    the fastest's (None where either is unmeasured); `within_noise`: its samples/s interval
    reaches the fastest's, so it is not shown slower."""

    accumulate: int
    checkpoint: str
    micro_batch: int
    status: str
    samples_per_s: float | None = None
    memory_bytes: int | None = None
    ratio: float | None = None
    memory_ratio: float | None = None
    within_noise: bool = False
    contended: bool = False  # measured while other processes shared the machine (`busy`)

    @property
    def name(self) -> str:
        """'as 4 x 128' (4 passes of 128 samples), 'as 2 x 256, checkpoint blocks' (the
        labeler's words)."""
        return way(self.accumulate, self.micro_batch, self.checkpoint)


@dataclass(frozen=True)
class EffectiveBatch:
    """The answer at one effective batch: `where` (device, precision, B=effective batch and
    whatever else tells it apart), the ways measured (fastest first, then the others that ran
    by speed, then those that did not run) and the memory column the ratios come from."""

    where: str
    batch_size: int
    choices: list[Choice] = field(default_factory=list)
    memory: str = ""

    @property
    def fastest(self) -> Choice | None:
        return self.choices[0] if self.choices and self.choices[0].ratio is not None else None

    def line(self) -> str:
        """'cpu fp32 B=512: fastest as 4 x 128 (1,234 samples/s, peak RSS 300.0M); as 2 x 256,
        checkpoint blocks: x0.83 the samples/s, 41% of the memory; as 1 x 512: oom'."""
        best = self.fastest
        if best is None:
            return f"{self.where}: none ran ({'; '.join(_failed(c) for c in self.choices)})"
        memory = "" if best.memory_bytes is None else f", {self.memory} {size(best.memory_bytes)}"
        busy = ", contended" if best.contended else ""
        parts = [f"fastest {best.name} ({number(best.samples_per_s)} samples/s{memory}{busy})"]
        for c in self.choices[1:]:
            if c.ratio is None:
                parts.append(_failed(c))
                continue
            text = f"{c.name}: {times(c.ratio)} the samples/s"
            text += " (within noise of the fastest)" if c.within_noise else ""
            text += " (contended)" if c.contended else ""
            if c.memory_ratio is not None:
                text += f", {percent(c.memory_ratio)} of the memory"
            parts.append(text)
        return f"{self.where}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "batch_size": self.batch_size,
            "memory": self.memory,
            "fastest": None if self.fastest is None else self.fastest.name,
            "choices": [asdict(c) | {"name": c.name} for c in self.choices],
        }


def effective_batches(rows: list[dict[str, Any]]) -> list[EffectiveBatch]:
    """One answer per effective batch (and every other setting) that `rows` measured in two or
    more ways, in order of device, precision and batch; [] where every row used one way (the
    run swept neither accumulate nor checkpoint)."""
    if not any(_choice(r) != (1, "none") for r in rows):
        return []
    groups = grouped(rows, lambda r: same_key(r, *CHOICE, "seed"))
    among = [k for k in varying(rows) if k not in (*CHOICE, "seed")]
    out = []
    for group in groups.values():
        ways = grouped(group, _choice)
        if len(ways) < 2:
            continue
        out.append(_answer([_median(w) for w in ways.values()], among))
    out.sort(key=lambda a: (a.where.split(" B=")[0], a.batch_size, a.where))
    return out


def _answer(rows: list[dict[str, Any]], among: list[str]) -> EffectiveBatch:
    ran = sorted((r for r in rows if standing.ran(r)), key=lambda r: -float(r["samples_per_s"]))
    failed = sorted(
        (r for r in rows if not standing.ran(r)),
        key=lambda r: (_choice(r)[1] != "none", _choice(r)[0]),  # plain ways first
    )
    column, words = memory_column(ran or rows)
    best = ran[0] if ran else None
    choices = []
    for r in ran:
        assert best is not None
        memory = _bytes(r.get(column))
        top = _bytes(best.get(column))
        choices.append(
            Choice(
                *_choice(r),
                micro_batch=_micro(r),
                status=str(r["status"]),
                samples_per_s=float(r["samples_per_s"]),
                memory_bytes=memory,
                ratio=float(r["samples_per_s"]) / float(best["samples_per_s"]),
                memory_ratio=None if memory is None or not top else memory / top,
                within_noise=r is not best and interval(r)[1] >= interval(best)[0],
                contended=r.get("busy") is True,
            )
        )
    for r in failed:
        choices.append(Choice(*_choice(r), micro_batch=_micro(r), status=str(r["status"])))
    first = best or rows[0]
    where = label({**first, "accumulate": 1, "checkpoint": "none"}, among)  # the ways say those
    return EffectiveBatch(where, int(first["batch_size"]), choices, words)


def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A way's row across seeds (and repeats): the median by samples/s of those that ran (the
    slower of the middle two), else the last."""
    ran = sorted((r for r in rows if standing.ran(r)), key=lambda r: float(r["samples_per_s"]))
    return ran[(len(ran) - 1) // 2] if ran else rows[-1]


def _choice(row: dict[str, Any]) -> tuple[int, str]:
    """(accumulate, checkpoint) of a row; a row from before issue 25 used (1, 'none')."""
    return int(norm(row.get("accumulate")) or 1), str(norm(row.get("checkpoint")) or "none")


def _micro(row: dict[str, Any]) -> int:
    """The samples of one forward/backward pass (a process's: the row's micro_batch_size where
    it says, else batch / accumulate)."""
    micro = norm(row.get("micro_batch_size"))
    return int(micro) if micro is not None else int(row["batch_size"]) // _choice(row)[0]


def memory_column(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The first memory column every row of `rows` measured (so the ratios compare like with
    like), else the first any measured."""
    for measured in (all, any):
        for column, words in MEMORY:
            if measured(_bytes(r.get(column)) for r in rows):
                return column, words
    return MEMORY[-1]


def _bytes(value: Any) -> int | None:
    v = norm(value)
    if v is None or isinstance(v, str) or not math.isfinite(float(v)) or float(v) <= 0:
        return None
    return int(v)


def _failed(c: Choice) -> str:
    return f"{c.name}: {c.status}"
