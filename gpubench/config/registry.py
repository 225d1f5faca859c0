"""The registry of settings: every setting of a measured configuration, defined once.

One entry holds a setting's field name (the Point field and the result row's column), its type
and default (an old row that lacks the column, or holds null, reads as the default), the sweep
axis that lists its values (the SweepSpec field, the suite key and the CLI flag `--axis-name`),
the check of one value, its role in a verdict (`fixed`: the user's choice, one verdict per
value; `competing`: what the verdict chooses), its words (a label, a table heading) and, for a
speed option, the value that turns it on and the bottlenecks it is a lever for.

`Point`, `SweepSpec`'s axes, the row's identity columns, the CLI's axis flags, suite keys, the
verdict's partition and levers, tune's space and every label are made from this table, so a new
setting is one entry here plus its effect in the harness.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from gpubench.config import loader
from gpubench.config.checks import (
    check_accumulate,
    check_batch_size,
    check_bool,
    check_device,
    check_model,
    check_nproc,
    check_one_of,
    check_power_limit,
    check_seed,
    check_threads,
)
from gpubench.models import SIZES  # the size presets are the reference models'

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "adam", "adamw")
DATA_MODES = ("device", "host", "loader")  # loader: a DataLoader over files (config.loader)
COMPILE_MODES = ("eager", "compile")
PARALLEL_MODES = ("none", "ddp", "fsdp")  # how the ranks of a parallel point share the work
SCALING_MODES = ("weak", "strong")  # what stays fixed as the ranks grow
CHECKPOINT_MODES = ("none", "blocks")  # activation checkpointing of the repeated blocks

# How a setting's values are swept: `list` an axis of several values (a point each), `scalar`
# one value for the whole sweep, `layout` several values combined by a SweepSpec layout (the
# parallel layouts, the loader layouts); None: not swept (set by a convergence rule, the model
# options table, or torchrun).
Sweep = str | None


def null(value: Any) -> bool:
    """Whether a value is unset: None, or the NaN a frame reads a null as."""
    return value is None or (isinstance(value, Real) and math.isnan(value))


@dataclass(frozen=True)
class Setting:
    """One setting of a measured configuration."""

    name: str  # the Point field and the row's column
    type: Any  # its Python type, as Point declares it
    default: Any = field(default=None)  # Point's default; a missing column reads as it
    required: bool = False  # a Point must be given it (no default)
    axis: str | None = None  # the SweepSpec field, suite key and CLI flag (--axis-name)
    sweep: Sweep = "list"
    axis_default: Any = None  # SweepSpec's default (None: (default,) for a list axis)
    choices: tuple[str, ...] = ()  # the values allowed, where they are words
    check: Callable[[Any], Any] | None = None  # one value's check (choices: derived)
    what: str = ""  # how an error names one value ("precision", "compile mode")
    help: str = ""  # the CLI flag's help, past what `choices` already says
    role: str = "competing"  # fixed (one verdict per value) or competing
    convergence: bool = False  # an axis of convergence runs too (else speed runs only)
    # A speed option: the value that turns it on, the word a label names it by when on, the
    # value it is off at where that is not the default, the bottleneck kinds it is a lever
    # for, and the lever's name in a verdict.
    on: Any = None
    word: str | None = None
    shown: Any = None  # the value at which a label shows `word` (None: `on`)
    off: Any = None
    levers: tuple[str, ...] = ()
    lever: str | None = None
    # What the setting needs to act: "cuda" (a CUDA device), "conv" (a model with 2-D
    # convolutions), "loader" (a DataLoader's batches). A point that sets it where one is
    # missing is refused (config.needs: an `unsupported` row, or ConfigError where a sweep
    # spec already shows it), and a lever or a value tune searches is offered only where all
    # hold. `refused`: (need, words) where the setting says why in its own words rather than
    # config.needs' ("{model}": the point's model).
    needs: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    searched: bool = False  # an axis tune searches (tune.space says its values on a device)
    heading: str | None = None  # a table's heading for it (None: never a table column)
    unset: str = "none"  # how a table writes its null

    @property
    def flag(self) -> str | None:
        """The CLI flag of its axis ('--cuda-graph'), or None where it has none."""
        return None if self.axis is None else "--" + self.axis.replace("_", "-")

    def spec_default(self) -> Any:
        """The SweepSpec field's default: `axis_default`, else the setting's default (one
        value for a scalar axis, a tuple of one for a list)."""
        if self.axis_default is not None:
            return self.axis_default
        return self.default if self.sweep == "scalar" else (self.default,)

    def checked(self, value: Any) -> Any:
        """One value of the axis as the spec holds it, or ConfigError naming it and what is
        allowed."""
        if self.choices:
            return check_one_of(value, self.choices, self.what or self.name)
        if self.check is not None:
            return self.check(value)
        if self.type is bool:
            return check_bool(value, self.name)
        return value

    def value(self, row: Mapping[str, Any]) -> Any:
        """`row`'s value of the setting, its default where the row lacks it or holds null."""
        v = row.get(self.name)
        return self.default if null(v) else v

    def is_on(self, row: Mapping[str, Any]) -> bool:
        """Whether `row` ran with the speed option on (a bool read back as 0/1 too)."""
        return self.on is not None and normal(self.value(row)) == normal(self.on)

    def worded(self, row: Mapping[str, Any]) -> bool:
        """Whether a label names `row`'s value of the setting by its word."""
        when = self.on if self.shown is None else self.shown
        return self.word is not None and normal(self.value(row)) == normal(when)

    def engaged(self, row: Mapping[str, Any]) -> bool:
        """Whether `row` sets the setting to act: a value that is neither null, its default
        nor its off value (channels_last true, a loader's worker count)."""
        v = normal(self.value(row))
        return v is not None and v not in (normal(self.default), normal(self.off))

    def lever_flag(self) -> str:
        """The flags that measure the lever: '--cuda-graph false,true', '--data device'."""
        if self.sweep == "scalar":
            return f"{self.flag} {_text(self.on)}"
        off = self.default if self.off is None else self.off
        return f"{self.flag} {_text(off)},{_text(self.on)}"


def normal(v: Any) -> Any:
    """One spelling per value whatever a frame made of it: None for NaN, ints for bools and
    whole floats (batch 64.0 and True read back from a CSV-like frame)."""
    if null(v):
        return None
    if isinstance(v, bool | int) or (isinstance(v, float) and v.is_integer()):
        return int(v)
    return v


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _bool_axis(name: str, word: str, help: str, **more: Any) -> Setting:
    return Setting(name, bool, False, axis=name, on=True, word=word, help=help, **more)


SETTINGS: list[Setting] = [
    Setting(
        "model",
        str,
        required=True,
        axis="models",
        check=check_model,
        role="fixed",
        convergence=True,
    ),
    Setting(
        "model_size",
        str,
        required=True,
        axis="size",
        sweep="scalar",
        axis_default="small",
        choices=SIZES,
        what="size",
        role="fixed",
        convergence=True,
    ),
    Setting(
        "device",
        str,
        required=True,
        axis="devices",
        axis_default=("auto",),
        check=check_device,
        convergence=True,
    ),
    Setting(
        "precision",
        str,
        required=True,
        axis="precisions",
        axis_default=("fp32",),
        choices=PRECISIONS,
        what="precision",
        convergence=True,
        on="bf16",
        off="fp32",
        levers=("memory", "compute", "mixed"),
        lever="a lower precision (bf16)",
        searched=True,
    ),
    Setting(
        "optimizer",
        str,
        required=True,
        axis="optimizers",
        axis_default=("sgd",),
        choices=OPTIMIZERS,
        what="optimizer",
        role="fixed",
        convergence=True,
    ),
    Setting(
        "batch_size",
        int,
        required=True,
        axis="batch_sizes",
        axis_default=(16, 64),
        check=check_batch_size,
        convergence=True,
    ),
    Setting("seed", int, 0, axis="seeds", check=check_seed, convergence=True, heading="seed"),
    Setting(
        "data",
        str,
        "device",
        axis="data",
        sweep="scalar",
        choices=DATA_MODES,
        what="data mode",
        convergence=True,
        on="device",
        word="host data",
        shown="host",
        levers=("input",),
        lever="batches made on the device",
        heading="data",
    ),
    Setting(
        "compile",
        str,
        "eager",
        axis="compile",
        choices=COMPILE_MODES,
        what="compile mode",
        help="eager, compile (torch.compile), or both: eager,compile",
        on="compile",
        word="compiled",
        levers=("launch", "memory", "mixed"),
        lever="torch.compile",
        searched=True,
        heading="compile",
    ),
    _bool_axis(
        "channels_last",
        "channels-last",
        " (convolutional models only)",
        levers=("memory", "mixed"),
        needs=("conv",),
        searched=True,
        heading="channels last",
    ),
    _bool_axis(
        "cuda_graph",
        "CUDA graph",
        ": capture the whole step in a CUDA graph",
        levers=("launch",),
        lever="a CUDA graph",
        needs=("cuda",),
        refused=(("cuda", "CUDA graphs need a CUDA device"),),
        searched=True,
        heading="CUDA graph",
    ),
    Setting(
        "lr_scaling", str | None, None, sweep=None, role="fixed", heading="lr rule", unset="fixed"
    ),
    _bool_axis(
        "cudnn_benchmark",
        "cudnn.benchmark",
        ": let cuDNN autotune convolutions (torch.backends.cudnn.benchmark; CUDA and "
        "convolutional models only)",
        needs=("cuda", "conv"),
        refused=(("cuda", "cudnn_benchmark autotunes cuDNN convolutions; the CPU has no cuDNN"),),
        searched=True,
        heading="cudnn.benchmark",
    ),
    Setting(
        "model_options",
        str | None,
        None,
        sweep=None,
        role="fixed",
        heading="model options",
        unset="default",
    ),
    Setting(
        "threads",
        int | None,
        None,
        axis="threads",
        check=check_threads,
        convergence=True,
        help="torch's intra-op threads per point: whole numbers of 1 or more, or auto "
        "(what torch picks); e.g. 1,2",
        searched=True,
        heading="threads asked",
        unset="auto",
    ),
    Setting(
        "parallel",
        str,
        "none",
        axis="parallel",
        sweep="layout",
        choices=PARALLEL_MODES,
        what="parallel mode",
        help="none, ddp, fsdp, or several: none,ddp (torch.distributed, one node)",
        heading="parallel",
    ),
    Setting(
        "nproc",
        int,
        1,
        axis="nproc",
        sweep="layout",
        check=check_nproc,
        help="processes per node of the ddp and fsdp points, e.g. 1,2",
        heading="processes",
    ),
    Setting(
        "scaling",
        str | None,
        None,
        axis="scaling",
        sweep="layout",
        axis_default=("weak",),
        choices=SCALING_MODES,
        what="scaling",
        help="weak (batch per process), strong (global batch split), or both",
        heading="scaling",
    ),
    Setting("nodes", int, 1, sweep=None, heading="nodes"),
    Setting(
        "accumulate",
        int,
        1,
        axis="accumulate",
        check=check_accumulate,
        convergence=True,
        help="micro-batches per optimizer step, e.g. 1,2,4,8 (the batch size stays the "
        "effective batch: each micro-batch holds batch / accumulate samples)",
        heading="accumulate",
    ),
    Setting(
        "checkpoint",
        str,
        "none",
        axis="checkpoint",
        choices=CHECKPOINT_MODES,
        what="checkpoint mode",
        help="none, blocks (recompute the activations of the "
        "model's repeated blocks in backward), or both: none,blocks",
        searched=True,
        heading="checkpoint",
    ),
    Setting(
        "power_limit_w",
        int | None,
        None,
        axis="power_limit",
        check=check_power_limit,
        convergence=True,
        help="GPU power limits in watts, set through NVML for each point "
        "and restored after, e.g. 300,500,700 (needs root and a driver that allows it; "
        "refused with the reason where not, and on the CPU)",
        heading="power limit (W)",
    ),
    Setting(
        "loader_workers",
        int | None,
        None,
        axis="loader_workers",
        sweep="layout",
        check=loader.check_workers,
        needs=("loader",),
        help="DataLoader worker processes per point, e.g. "
        "0,2,4,8, or auto (half the cores, at most 4); --data loader",
    ),
    Setting(
        "pin_memory",
        bool | None,
        None,
        axis="pin_memory",
        sweep="layout",
        check=loader.check_pin,
        on=True,
        off=False,
        levers=("input",),
        needs=("loader", "cuda"),
        refused=(
            ("cuda", "pinned memory speeds host-to-device copies; the CPU has none to speed"),
        ),
        lever="pinned memory",
        help="false, true, both, or auto (on for CUDA): the loader's batches in pinned host memory",
    ),
    Setting(
        "prefetch",
        int | None,
        None,
        axis="prefetch",
        sweep="layout",
        check=loader.check_prefetch,
        needs=("loader",),
        help="batches each loader worker loads ahead, e.g. 2,4, or auto (PyTorch's 2)",
    ),
    Setting(
        "persistent_workers",
        bool | None,
        None,
        axis="persistent_workers",
        sweep="layout",
        axis_default=(True,),
        check=loader.check_persistent,
        needs=("loader",),
        help=": keep the loader's workers between epochs",
    ),
    Setting(
        "loader",
        str | None,
        None,
        axis="loader",
        sweep="scalar",
        check=loader.check_factory,
        needs=("loader",),
    ),
]
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def names() -> list[str]:
    """Every setting's field name, in the registry's order: a row's identity columns."""
    return [s.name for s in SETTINGS]


def fixed() -> tuple[str, ...]:
    """The settings that partition a verdict (the user's choices), in the registry's order."""
    return tuple(s.name for s in SETTINGS if s.role == "fixed")


def competing() -> list[str]:
    """What competes within a verdict's partition."""
    return [s.name for s in SETTINGS if s.role != "fixed"]


def axes() -> list[Setting]:
    """The settings a sweep has an axis for (a SweepSpec field, a suite key, a flag)."""
    return [s for s in SETTINGS if s.axis is not None]


def speed_options() -> list[Setting]:
    """The settings a label names by a word when on (compiled, CUDA graph, ...)."""
    return [s for s in SETTINGS if s.word is not None]


def levers(kind: str) -> list[Setting]:
    """The settings that are levers for a bottleneck of `kind`, in the registry's order."""
    return [s for s in SETTINGS if kind in s.levers]


def lever_name(s: Setting) -> str:
    return s.lever or s.word or s.name
