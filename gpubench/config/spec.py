"""The identity of a measurement (Point), how long to measure it (Budget), and a whole sweep
(SweepSpec): frozen dataclasses, parsed once at the edge (config.suite for suite files, the CLI
for flags) and validated by config.validate. Every user mistake raises ConfigError with one
line that names the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gpubench.config import loader as loader_axes
from gpubench.config.convergence import Convergence
from gpubench.config.model_options import encode
from gpubench.config.prices import Prices

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "adam", "adamw")
SIZES = ("tiny", "small", "base")
DATA_MODES = ("device", "host", "loader")  # issue 31: loader, a DataLoader over files
COMPILE_MODES = ("eager", "compile")
MODES = ("speed", "convergence")
# Parallel points (issue 17): how the ranks share the work, and what stays fixed as they grow.
PARALLEL_MODES = ("none", "ddp", "fsdp")
SCALING_MODES = ("weak", "strong")
# issue 25: activation checkpointing of the model's repeated blocks (gpubench.models.blocks)
CHECKPOINT_MODES = ("none", "blocks")
# batch_sizes = "auto": the powers of two up to the largest batch that fits (gpubench.run.maxbatch).
AUTO = "auto"
# issue 28: the device types whose batch-size series may keep doubling (gpubench.run.batch_growth)
GROW_DEVICE_TYPES = ("cpu", "cuda")
# The SweepSpec fields that say which points there are (the rest say how each is measured).
AXES = (
    "models",
    "size",
    "devices",
    "batch_sizes",
    "precisions",
    "optimizers",
    "seeds",
    "data",
    "compile",
    "channels_last",
    "cuda_graph",
    "cudnn_benchmark",  # issue 16
    "threads",  # issue 14: torch's intra-op threads (None: what torch picks)
    "parallel",
    "nproc",
    "scaling",
    "accumulate",  # issue 25: micro-batches per optimizer step (batch_size stays the effective)
    "checkpoint",  # issue 25: activation checkpointing: none or blocks
    "power_limit",  # issue 32: the GPU's power limit in watts (None: as the card is)
    # issue 31: the DataLoader's axes (data = "loader"; config.loader)
    "loader_workers",
    "pin_memory",
    "prefetch",
    "persistent_workers",
)


def model_label(model: str, size: str | None) -> str:
    """'mlp/small' for a reference model at a size preset; a user's 'package.module:function'
    as itself, since a size preset means nothing to it."""
    return model if ":" in model or not size else f"{model}/{size}"


@dataclass(frozen=True)
class Point:
    """One measurement's identity: the same Point measured twice answers the same question."""

    model: str
    model_size: str
    device: str
    precision: str
    optimizer: str
    batch_size: int
    seed: int = 0
    data: str = "device"
    compile: str = "eager"
    channels_last: bool = False
    cuda_graph: bool = False
    lr_scaling: str | None = None  # convergence runs: none, linear or sqrt
    # issue 16: cuDNN autotuning, and the model's options as canonical JSON (config.model_options)
    cudnn_benchmark: bool = False
    model_options: str | None = None
    threads: int | None = None  # torch's intra-op threads; None: what torch picks
    # Parallel points (issue 17): `nproc` ranks per node on `nodes` nodes (issue 23: torchrun
    # sets nodes; the world size is nproc * nodes); `scaling` None for a single process (world
    # size 1: the one baseline of weak and strong alike), else "weak" (batch_size is each rank's
    # batch) or "strong" (batch_size is the global one, split over the world).
    parallel: str = "none"
    nproc: int = 1
    scaling: str | None = None
    nodes: int = 1
    # issue 25: `accumulate` micro-batches of batch_size / accumulate samples per optimizer step
    # (batch_size is the effective batch); `checkpoint` "blocks" recomputes the activations of
    # the model's repeated blocks in backward instead of holding them
    accumulate: int = 1
    checkpoint: str = "none"
    # issue 32: the GPU power limit (watts) set through NVML for the point and restored after;
    # None: the card's as it is
    power_limit_w: int | None = None
    # issue 31: data = "loader": the DataLoader's workers, pinned memory, prefetch depth and
    # persistent workers (resolved, config.loader), and a user's factory; None otherwise
    loader_workers: int | None = None
    pin_memory: bool | None = None
    prefetch: int | None = None
    persistent_workers: bool | None = None
    loader: str | None = None

    @property
    def world_size(self) -> int:
        """The ranks in all: nproc per node times the nodes."""
        return self.nproc * self.nodes

    def per_process_batch(self) -> int:
        """The batch each rank trains on: `batch_size`, or under strong scaling its share of it
        over the world (a batch that does not split is parallel.unsupported_reason's to refuse)."""
        return self.batch_size // self.world_size if self.scaling == "strong" else self.batch_size

    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def label(self) -> str:
        return (
            (
                f"{model_label(self.model, self.model_size)} {self.device} {self.precision} "
                f"{self.optimizer} "
                f"B={self.batch_size}"
            )
            + (f" lr:{self.lr_scaling}" if self.lr_scaling is not None else "")
            + (f" threads={self.threads}" if self.threads is not None else "")
            + (f" {self.parallel}x{self.nproc}" if self.parallel != "none" else "")
            + (f" nodes={self.nodes}" if self.nodes != 1 else "")
            + (f" {self.scaling}" if self.scaling is not None else "")
            + (f" accumulate={self.accumulate}" if self.accumulate != 1 else "")
            + (f" checkpoint={self.checkpoint}" if self.checkpoint != "none" else "")
            + (f" {self.power_limit_w}W" if self.power_limit_w is not None else "")
            + loader_axes.label(self)
        )

    def baseline(self) -> Point:
        """The point a parallel point's scaling efficiency is against: the same in one process
        on one node (scaling None: one measurement for weak and strong); a single-process
        point is its own."""
        if self.parallel == "none":
            return self
        return dataclasses.replace(self, nproc=1, nodes=1, scaling=None)

    @staticmethod
    def of(row: dict[str, Any]) -> Point:
        """The point a result row (or any mapping holding its fields) was measured at; other
        keys are ignored, and a field it lacks or holds as null (None, NaN) is at its default."""
        names = {f.name for f in fields(Point)}
        return Point(**{k: v for k, v in row.items() if k in names and not _null(v)})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """How long to warm up and measure one point. Times in seconds.

    Warm-up runs at least `warmup_steps` steps and `warmup_min_s` seconds, then on until the
    step time is steady (harness.timing.steady) or `warmup_max_s` has passed since the end of
    the first step (which compiles: its time is not bounded). Measurement
    stops once at least `min_steps` steps and `min_time_s` seconds have passed and the 95%
    confidence interval of the median step time is within `target_rel_ci` of it, or when
    `max_time_s` or `max_steps` is reached. Whatever stopped it, a point whose interval is wider
    than `target_rel_ci`, or that has none (under 6 steps), is flagged noisy.
    `max_time_s` never stops it before min(`min_steps`, 6) steps, the fewest that give the median
    a confidence interval; `max_steps` always does.
    """

    warmup_steps: int = 3
    warmup_min_s: float = 0.2
    min_steps: int = 10
    max_steps: int = 10_000
    min_time_s: float = 0.3
    max_time_s: float = 2.0
    target_rel_ci: float = 0.02
    # issue 13: warm-up runs on (past warmup_steps and warmup_min_s) until the last steps' times
    # agree within warmup_steady_rel of their median, or until warmup_max_s seconds
    warmup_max_s: float = 3.0
    warmup_steady_rel: float = 0.1
    # Steps profiled after the measured windows to attribute the step's time (0: no profile).
    profile_steps: int = 1
    # A time.monotonic() value after which warm-up and measurement stop at the next step
    # boundary (harness.timing: the point comes back `cut`); None: none (a sweep's points).
    deadline: float | None = None

    @staticmethod
    def fixed(steps: int, warmup_steps: int = 3, target_rel_ci: float = 0.02) -> Budget:
        """`warmup_steps` warm-up steps and exactly `steps` measured steps, whatever the noise
        or the time they take (more warm-up steps only where the measured steps show a slow
        plateau, harness.timing). `target_rel_ci` no longer stops anything: it only says which
        points are flagged noisy (a confidence interval wider than it, or none at all)."""
        return Budget(
            warmup_steps=warmup_steps,
            warmup_min_s=0.0,
            warmup_max_s=0.0,
            min_steps=steps,
            max_steps=steps,
            min_time_s=0.0,
            max_time_s=float("inf"),
            target_rel_ci=target_rel_ci,
        )


@dataclass(frozen=True)
class SweepSpec:
    """A whole sweep: the product of its axes, plus how to measure each point."""

    name: str
    models: tuple[str, ...]
    size: str = "small"
    devices: tuple[str, ...] = ("auto",)
    batch_sizes: tuple[int, ...] | str = (16, 64)  # or AUTO
    precisions: tuple[str, ...] = ("fp32",)
    optimizers: tuple[str, ...] = ("sgd",)
    seeds: tuple[int, ...] = (0,)
    data: str = "device"
    compile: tuple[str, ...] = ("eager",)
    channels_last: tuple[bool, ...] = (False,)
    cuda_graph: tuple[bool, ...] = (False,)
    mode: str = "speed"
    budget: Budget = field(default_factory=Budget)
    convergence: Convergence = field(default_factory=Convergence)
    # issue 16: cuDNN autotuning (an axis), and options per model name ([model_options."hf:gpt2"])
    cudnn_benchmark: tuple[bool, ...] = (False,)
    model_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    threads: tuple[int | None, ...] = (None,)  # None: what torch picks
    # issue 17: parallel points (see parallel_layouts)
    parallel: tuple[str, ...] = ("none",)
    nproc: tuple[int, ...] = (1,)
    scaling: tuple[str, ...] = ("weak",)
    profile: bool = True  # profile a few steps of each point after its windows (issue 15)
    # issue 25: micro-batches per optimizer step, and activation checkpointing (axes)
    accumulate: tuple[int, ...] = (1,)
    checkpoint: tuple[str, ...] = ("none",)
    # issue 28: device types ("cuda") on which each batch-size series keeps doubling past its
    # largest listed batch while that is its fastest (gpubench.run.batch_growth)
    grow_batch_sizes: tuple[str, ...] = ()
    # issue 32: dollars per hour per device and the epoch's samples (--price, --epoch, [prices])
    prices: Prices = field(default_factory=Prices)
    power_limit: tuple[int | None, ...] = (None,)  # an axis: GPU power limits in watts
    # issue 31: the DataLoader's axes with data = "loader" (None: "auto", config.loader), and a
    # user's Dataset or DataLoader factory 'package.module:function' (None: gpubench's own)
    loader_workers: tuple[int | None, ...] = (None,)
    pin_memory: tuple[bool | None, ...] = (None,)
    prefetch: tuple[int | None, ...] = (None,)
    persistent_workers: tuple[bool, ...] = (True,)
    loader: str | None = None

    def resolved_devices(self) -> tuple[str, ...]:
        """`auto` becomes the CPU plus CUDA where present; duplicates are dropped, order kept."""
        out: list[str] = []
        for d in self.devices:
            expanded = ["cpu", *(["cuda"] if _cuda_available() else [])] if d == "auto" else [d]
            out.extend(x for x in expanded if x not in out)
        return tuple(out)

    def points(self) -> list[Point]:
        """Every point of the sweep, in a stable order (model, device, precision, optimizer, B).
        AUTO batch sizes depend on the device, so gpubench.run.sweep resolves them instead."""
        batch_sizes = self.batch_sizes
        assert not isinstance(batch_sizes, str), "resolve batch_sizes = 'auto' first"
        if self.mode == "convergence":
            return self._convergence_points(batch_sizes)
        return [
            Point(
                m,
                self.size,
                d,
                p,
                o,
                b,
                s,
                self.data,
                c,
                cl,
                g,
                cudnn_benchmark=cb,
                model_options=self.options_of(m),
                threads=t,
                parallel=pa,
                nproc=n,
                scaling=sc,
                accumulate=k,
                checkpoint=ck,
                power_limit_w=w,
                **lo,
            )
            for m, d, p, o, c, cl, g, cb in itertools.product(
                self.models,
                self.resolved_devices(),
                self.precisions,
                self.optimizers,
                self.compile,
                self.channels_last,
                self.cuda_graph,
                self.cudnn_benchmark,
            )
            for pa, n, sc in self.parallel_layouts()  # issue 17
            for ck, k in itertools.product(self.checkpoint, self.accumulate)  # issue 25
            for w in self.power_limit  # issue 32
            for lo in self.loader_layouts(d)  # issue 31
            for t, s, b in itertools.product(self.threads, self.seeds, batch_sizes)
        ]

    def loader_layouts(self, device: str) -> list[dict[str, Any]]:
        """issue 31: the Point fields of each DataLoader layout on `device`: one empty layout
        where data is not "loader" (the fields stay None)."""
        if self.data != "loader":
            return [{}]
        lays = loader_axes.layouts(
            device, self.loader_workers, self.pin_memory, self.prefetch, self.persistent_workers
        )
        return [{**lay, "loader": self.loader} for lay in lays]

    def parallel_layouts(self) -> list[tuple[str, int, str | None]]:
        """(parallel, nproc, scaling) of each point: one layout for "none", and for ddp and fsdp
        every scaling at every nproc, fewest processes first (the baseline is measured first).
        One process is one layout, scaling None: the same workload under weak and strong."""
        out: list[tuple[str, int, str | None]] = []
        for mode in self.parallel:
            if mode == "none":
                out.append(("none", 1, None))
                continue
            out.extend(
                (mode, n, None if n == 1 else s)
                for s in self.scaling
                for n in sorted(set(self.nproc))
            )
        return list(dict.fromkeys(out))

    def on_nodes(self, points: Iterable[Point], nodes: int) -> list[Point]:
        """`points` of this sweep launched on `nodes` nodes (torchrun): each parallel point's
        world is nproc * nodes ranks. A one-process layout (scaling None) on more than one node
        is a world of several ranks, so it becomes a point per scaling of the sweep; the
        baseline of all of them is the one process on one node."""
        out: list[Point] = []
        for p in points:
            if p.parallel == "none" or nodes == 1:
                out.append(p)
                continue
            scalings = self.scaling if p.scaling is None else (p.scaling,)
            out.extend(dataclasses.replace(p, nodes=nodes, scaling=s) for s in scalings)
        return list(dict.fromkeys(out))

    def _convergence_points(self, batch_sizes: tuple[int, ...]) -> list[Point]:
        """As points(), with each optimizer's learning-rate scaling rules as one more axis."""
        return [
            Point(
                m,
                self.size,
                d,
                p,
                o,
                b,
                s,
                self.data,
                lr_scaling=rule,
                model_options=self.options_of(m),
                threads=t,
                accumulate=k,
                power_limit_w=w,
            )
            for m, d, p, o in itertools.product(
                self.models, self.resolved_devices(), self.precisions, self.optimizers
            )
            for rule in self.convergence.lr_scaling_for(o)
            for k in self.accumulate  # issue 25: micro-batches per update (checkpoint: speed only)
            for w in self.power_limit  # issue 32
            for t, s, b in itertools.product(self.threads, self.seeds, batch_sizes)
        ]

    def options_of(self, model: str) -> str | None:
        """`model`'s options as a Point carries them (canonical JSON; None: none)."""
        return encode(self.model_options.get(model))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
