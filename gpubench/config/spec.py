"""The identity of a measurement (Point), how long to measure it (Budget), and a whole sweep
(SweepSpec): frozen dataclasses, parsed once at the edge (config.suite for suite files, the CLI
for flags) and validated by config.validate. Every user mistake raises ConfigError with one
line that names the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import Field, asdict, dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from gpubench.config import loader as loader_axes
from gpubench.config.convergence import Convergence
from gpubench.config.keys import same_key
from gpubench.config.labels import label, model_label
from gpubench.config.model_options import encode
from gpubench.config.prices import Prices
from gpubench.config.registry import (
    CHECKPOINT_MODES,
    COMPILE_MODES,
    DATA_MODES,
    OPTIMIZERS,
    PARALLEL_MODES,
    PRECISIONS,
    SCALING_MODES,
    SETTINGS,
    SIZES,
    null,
)

__all__ = ["CHECKPOINT_MODES", "COMPILE_MODES", "DATA_MODES", "OPTIMIZERS", "PARALLEL_MODES"]
__all__ += ["PRECISIONS", "SCALING_MODES", "SIZES", "model_label"]

# Shown where precisions are listed (README, `gpubench list`, the report): gpubench's fp32 is
# not PyTorch's default fp32 (issue 16).
PRECISION_NOTE = (
    "fp32 is strict IEEE fp32 (TF32 off in cuBLAS and cuDNN); PyTorch's default runs fp32 "
    "convolutions on TF32 tensor cores (torch.backends.cudnn.allow_tf32 is on by default), so "
    "on a GPU a CNN's plain-PyTorch fp32 is closer to gpubench's tf32 (TF32 for matmuls and "
    "convolutions) than to its fp32."
)

MODES = ("speed", "convergence")
# batch_sizes = "auto": the powers of two up to the largest batch that fits (gpubench.run.maxbatch).
AUTO = "auto"
# issues 28, 42: the device types whose batch-size series grow past their listed batches by the
# growth rule (gpubench.science.growth, applied by gpubench.run.batch_growth)
GROW_DEVICE_TYPES = ("cpu", "cuda")


class _PointMethods:
    """What a Point can say of itself beyond its fields (the fields: config.registry)."""

    nproc: int
    nodes: int
    scaling: str | None
    batch_size: int
    parallel: str

    @property
    def world_size(self) -> int:
        """The ranks in all: nproc per node times the nodes."""
        return self.nproc * self.nodes

    def per_process_batch(self) -> int:
        """The batch each rank trains on: `batch_size`, or under strong scaling its share of it
        over the world (a batch that does not split is parallel.unsupported_reason's to refuse)."""
        return self.batch_size // self.world_size if self.scaling == "strong" else self.batch_size

    def key(self, drop: tuple[str, ...] = ()) -> tuple[Any, ...]:
        """The point's settings in the registry's order, but those named in `drop`
        (config.keys.same_key: a row of the point keys the same)."""
        return same_key(vars(self), *drop)

    def label(self, batch: bool = True) -> str:
        """The point in a log line: 'mlp/small cpu fp32 sgd B=4 (compiled)' (config.labels);
        without `batch`, its series'."""
        return label(self.to_dict(), whole=True, batch=batch)

    def baseline(self) -> Point:
        """The point a parallel point's scaling efficiency is against: the same in one process
        on one node (scaling None: one measurement for weak and strong); a single-process
        point is its own."""
        if self.parallel == "none":
            return self  # type: ignore[return-value]
        replaced = dataclasses.replace(self, nproc=1, nodes=1, scaling=None)  # type: ignore[type-var]
        return replaced  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload, no-any-return]

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Point:
        """The point a result row (or any mapping holding its fields) was measured at; other
        keys are ignored, and a field it lacks or holds as null (None, NaN) is at its default:
        a row written before a setting existed reads as measured at its default. Whole floats
        and 0/1 read back from a frame are ints and bools again."""
        values = {}
        for s in SETTINGS:
            v = row.get(s.name)
            if null(v):
                continue
            if s.type is bool or s.type == bool | None:
                v = bool(v)
            elif (
                isinstance(v, float)
                and v.is_integer()
                and int in getattr(s.type, "__args__", (s.type,))
            ):
                v = int(v)
            values[s.name] = v
        return Point(**values)


def _point_class() -> type:
    """Point made from the registry: a frozen dataclass with a field per setting (those a
    Point must be given first), and _PointMethods."""
    required = [(s.name, s.type) for s in SETTINGS if s.required]
    optional = [(s.name, s.type, field(default=s.default)) for s in SETTINGS if not s.required]
    return make_dataclass("Point", [*required, *optional], bases=(_PointMethods,), frozen=True)


if TYPE_CHECKING:

    class Point(_PointMethods):
        """One measurement's identity (config.registry): the same Point measured twice answers
        the same question."""

        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...

else:
    Point = _point_class()
    Point.__doc__ = """One measurement's identity (config.registry): the same Point measured
    twice answers the same question."""
    Point.__module__ = __name__


# Seconds a point may take once its worker is ready, unless --point-timeout says otherwise.
DEFAULT_POINT_TIMEOUT_S = 600.0


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


class _SweepMethods:
    """What a SweepSpec does with its fields (its axes: config.registry): the points."""

    models: tuple[str, ...]
    size: str
    devices: tuple[str, ...]
    batch_sizes: tuple[int, ...] | str
    data: str
    mode: str
    convergence: Convergence
    model_options: dict[str, dict[str, Any]]
    parallel: tuple[str, ...]
    nproc: tuple[int, ...]
    scaling: tuple[str, ...]
    loader_workers: tuple[int | None, ...]
    pin_memory: tuple[bool | None, ...]
    prefetch: tuple[int | None, ...]
    persistent_workers: tuple[bool, ...]
    loader: str | None

    def resolved_devices(self) -> tuple[str, ...]:
        """`auto` becomes the CPU plus CUDA where present; duplicates are dropped, order kept."""
        out: list[str] = []
        for d in self.devices:
            expanded = ["cpu", *(["cuda"] if _cuda_available() else [])] if d == "auto" else [d]
            out.extend(x for x in expanded if x not in out)
        return tuple(out)

    def points(self) -> list[Point]:
        """Every point of the sweep, in a stable order: the list axes in the registry's order
        (model, device, precision, optimizer, ...), then the parallel and loader layouts, then
        threads, seed and batch size. A convergence run sweeps only the axes that change what
        is learnt or what it costs, with each optimizer's learning-rate rules as one more.
        AUTO batch sizes depend on the device, so gpubench.run.sweep resolves them instead."""
        assert not isinstance(self.batch_sizes, str), "resolve batch_sizes = 'auto' first"
        convergence = self.mode == "convergence"
        lists = [
            s
            for s in SETTINGS
            if s.axis is not None and s.sweep == "list" and (s.convergence or not convergence)
        ]
        outer = [s for s in lists if s.name not in _INNER]
        inner = sorted((s for s in lists if s.name in _INNER), key=lambda s: _INNER.index(s.name))
        out: list[Point] = []
        for values in itertools.product(*(self._values(s.axis) for s in outer)):
            fixed = dict(zip((s.name for s in outer), values, strict=True))
            common = {
                "model_size": self.size,
                "data": self.data,
                "model_options": self.options_of(fixed["model"]),
            }
            for layout in self._layouts(fixed, convergence):
                for more in itertools.product(*(self._values(s.axis) for s in inner)):
                    last = dict(zip((s.name for s in inner), more, strict=True))
                    out.append(Point(**common, **fixed, **layout, **last))
        return out

    def _values(self, axis: str | None) -> tuple[Any, ...]:
        if axis == "devices":
            return self.resolved_devices()
        return tuple(getattr(self, str(axis)))

    def _layouts(self, fixed: dict[str, Any], convergence: bool) -> list[dict[str, Any]]:
        """The fields of each layout of a point: the learning-rate rules of its optimizer (a
        convergence run), or each parallel layout with each loader layout of its device."""
        if convergence:
            return [{"lr_scaling": r} for r in self.convergence.lr_scaling_for(fixed["optimizer"])]
        return [
            {"parallel": pa, "nproc": n, "scaling": sc, **lo}
            for pa, n, sc in self.parallel_layouts()  # issue 17
            for lo in self.loader_layouts(fixed["device"])  # issue 31
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

    def options_of(self, model: str) -> str | None:
        """`model`'s options as a Point carries them (canonical JSON; None: none)."""
        return encode(self.model_options.get(model))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload, no-any-return]


# The list axes a point varies fastest, innermost last: one series of batch sizes runs together.
_INNER = ("threads", "seed", "batch_size")


def _sweep_class() -> type:
    """SweepSpec made from the registry: its name and models, an axis per setting that has one
    (a tuple of values, or one value for a scalar axis), and how to measure each point."""
    axes = []
    # the first axes in the order a SweepSpec has always taken them by position
    first = ("size", "devices", "batch_sizes", "precisions", "optimizers", "seeds")
    ordered = sorted(SETTINGS, key=lambda s: first.index(s.axis) if s.axis in first else 99)
    for s in ordered:
        if s.axis is None or s.axis == "models":
            continue
        kind = s.type if s.sweep == "scalar" else tuple[s.type, ...]  # type: ignore[name-defined]
        axes.append((s.axis, kind, field(default=s.spec_default())))
    return make_dataclass(
        "SweepSpec",
        [
            ("name", str),
            ("models", tuple[str, ...]),
            *axes,
            ("mode", str, field(default="speed")),
            ("budget", Budget, field(default_factory=Budget)),
            ("convergence", Convergence, field(default_factory=Convergence)),
            # options per model name ([model_options."hf:gpt2"])
            ("model_options", dict[str, dict[str, Any]], field(default_factory=dict)),
            # profile a few steps of each point after its windows (issue 15)
            ("profile", bool, field(default=True)),
            # device types ("cpu", "cuda") on which each batch-size series grows past its
            # largest listed batch by the growth rule (gpubench.science.growth)
            ("grow_batch_sizes", tuple[str, ...], field(default=())),
            # leave out the points whose precision the device only emulates (config.precision:
            # bf16 on a CPU without bf16 instructions), each recorded as planned, not measured
            ("skip_emulated", bool, field(default=False)),
            # dollars per hour per device and the epoch's samples (--price, --epoch, [prices])
            ("prices", Prices, field(default_factory=Prices)),
            # the CPU's power as the user states it (--cpu-watts, a suite's cpu_watts), in
            # watts: a CPU row without RAPL gets its energy from it (run.cpu_watts); None: none
            ("cpu_watts", float | None, field(default=None)),
            # issue 51: seconds in all of the speed sweep's noise phase (run.noise_sweep):
            # B_noise of each reference model and optimizer on its real data; 0: none
            ("noise_budget_s", float, field(default=0.0)),
        ],
        bases=(_SweepMethods,),
        frozen=True,
    )


if TYPE_CHECKING:

    class SweepSpec(_SweepMethods):
        """A whole sweep: the product of its axes, plus how to measure each point."""

        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...

else:
    SweepSpec = _sweep_class()
    SweepSpec.__doc__ = "A whole sweep: the product of its axes, plus how to measure each point."
    SweepSpec.__module__ = __name__

# The SweepSpec fields that say which points there are, in its order, each with a CLI flag of
# its name (the rest say how each point is measured; `loader`, a factory, is the suite's).
AXES = tuple(
    f for f in SweepSpec.__dataclass_fields__ if f in {s.axis for s in SETTINGS} - {"loader"}
)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
