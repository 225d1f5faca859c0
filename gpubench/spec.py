"""The identity of a measurement (Point), a whole sweep (SweepSpec), and their validation.

Configuration is validated here, once, into frozen dataclasses (gpubench.suite parses suite
files into them). Every user mistake raises ConfigError with one line that names the bad value
and what is allowed.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "adam", "adamw")
SIZES = ("tiny", "small", "base")
DATA_MODES = ("device", "host")
COMPILE_MODES = ("eager", "compile")
MODES = ("speed", "convergence")
DATASETS = ("auto", "digits", "cifar10", "text")
LR_SCALINGS = ("auto", "none", "linear", "sqrt")
TARGET_METRICS = ("eval_accuracy", "eval_loss")
_USER_MODEL = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
# batch_sizes = "auto": the powers of two up to the largest batch that fits (gpubench.maxbatch).
AUTO = "auto"
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
)


class ConfigError(ValueError):
    """A user's mistake in a suite file or on the command line (exit status 2)."""


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

    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def label(self) -> str:
        return (
            f"{self.model}/{self.model_size} {self.device} {self.precision} {self.optimizer} "
            f"B={self.batch_size}"
        ) + (f" lr:{self.lr_scaling}" if self.lr_scaling is not None else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """How long to warm up and measure one point. Times in seconds.

    Measurement stops once at least `min_steps` steps and `min_time_s` seconds have passed and the
    95% confidence interval of the median step time is within `target_rel_ci` of it, or when
    `max_time_s` or `max_steps` is reached (the point is then flagged noisy if not yet stable).
    """

    warmup_steps: int = 3
    warmup_min_s: float = 0.2
    min_steps: int = 10
    max_steps: int = 10_000
    min_time_s: float = 0.3
    max_time_s: float = 2.0
    target_rel_ci: float = 0.02

    @staticmethod
    def fixed(steps: int, warmup_steps: int = 3) -> Budget:
        """Exactly `steps` measured steps, whatever the noise or the time they take."""
        return Budget(
            warmup_steps=warmup_steps,
            warmup_min_s=0.0,
            min_steps=steps,
            max_steps=steps,
            min_time_s=0.0,
            max_time_s=float("inf"),
            target_rel_ci=float("inf"),
        )


@dataclass(frozen=True)
class Convergence:
    """How a convergence run (mode = "convergence") trains and judges each point.

    Training stops at the first limit reached of `max_steps`, `max_samples` and `max_time_s`
    (training seconds, evaluation excluded; 60 s where none is set), or at the target where
    `stop_at_target`. `target` is one number for every model or a table of numbers by model
    name; where it is missing, and for `target_metric`, the data set's default holds.
    The held-out set (its first `eval_samples`) is evaluated at step 0 and then with gaps of at
    most `eval_every_steps` and at most `eval_rel_gap` of the steps done (at least 1), so that
    steps-to-target is known to within that fraction. The learning rate (`lr`, default: the
    optimizer's) is scaled from `base_batch_size` to the point's batch size by `lr_scaling`
    (auto: linear for SGD, sqrt for Adam and AdamW), ramped up linearly over `warmup_samples`
    where it grows. A train loss that is not finite or exceeds `divergence_factor` times the
    first one ends the point as diverged. The gradient noise scale is measured every
    `noise_every_steps` steps (0: never) from `noise_samples` training samples in
    `noise_splits` parts, averaged with decay `noise_ema`. Image models see `image_size`-pixel
    square images where it is set (else their own input size; the MLP takes the digits at their
    native 8x8). `data_dir` is the folder a file-based data set (cifar10) is read from.
    """

    dataset: str = "auto"
    data_dir: str | None = None
    image_size: int | None = None
    target_metric: str | None = None
    target: float | tuple[tuple[str, float], ...] | None = None
    stop_at_target: bool = False
    max_steps: int | None = None
    max_samples: int | None = None
    max_time_s: float | None = None
    eval_every_steps: int = 100
    eval_rel_gap: float = 0.05
    eval_samples: int | None = 1024
    lr: float | None = None
    lr_scaling: tuple[str, ...] = ("auto",)
    base_batch_size: int = 32
    warmup_samples: int = 2048
    divergence_factor: float = 3.0
    noise_every_steps: int = 50
    noise_samples: int = 256
    noise_splits: int = 4
    noise_ema: float = 0.9

    def target_for(self, model: str) -> float | None:
        """The suite's target for `model`, or None where the data set's default holds."""
        if isinstance(self.target, tuple):
            return dict(self.target).get(model)
        return self.target

    def time_limit_s(self) -> float | None:
        """The training-time limit in seconds: max_time_s, or 60 where no limit is set."""
        if self.max_time_s is None and self.max_steps is None and self.max_samples is None:
            return 60.0
        return self.max_time_s

    def lr_scaling_for(self, optimizer: str) -> tuple[str, ...]:
        """The scaling rules a point with `optimizer` runs with (`auto` resolved)."""
        auto = "linear" if optimizer == "sgd" else "sqrt"
        out: list[str] = []
        for rule in self.lr_scaling:
            rule = auto if rule == "auto" else rule
            if rule not in out:
                out.append(rule)
        return tuple(out)


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

    def resolved_devices(self) -> tuple[str, ...]:
        """`auto` becomes the CPU plus CUDA where present; duplicates are dropped, order kept."""
        out: list[str] = []
        for d in self.devices:
            expanded = ["cpu", *(["cuda"] if _cuda_available() else [])] if d == "auto" else [d]
            out.extend(x for x in expanded if x not in out)
        return tuple(out)

    def points(self) -> list[Point]:
        """Every point of the sweep, in a stable order (model, device, precision, optimizer, B).
        AUTO batch sizes depend on the device, so gpubench.sweep resolves them instead."""
        batch_sizes = self.batch_sizes
        assert not isinstance(batch_sizes, str), "resolve batch_sizes = 'auto' first"
        if self.mode == "convergence":
            return self._convergence_points(batch_sizes)
        return [
            Point(m, self.size, d, p, o, b, s, self.data, c, cl, g)
            for m, d, p, o, c, cl, g, s, b in itertools.product(
                self.models,
                self.resolved_devices(),
                self.precisions,
                self.optimizers,
                self.compile,
                self.channels_last,
                self.cuda_graph,
                self.seeds,
                batch_sizes,
            )
        ]

    def _convergence_points(self, batch_sizes: tuple[int, ...]) -> list[Point]:
        """As points(), with each optimizer's learning-rate scaling rules as one more axis."""
        return [
            Point(m, self.size, d, p, o, b, s, self.data, lr_scaling=rule)
            for m, d, p, o in itertools.product(
                self.models, self.resolved_devices(), self.precisions, self.optimizers
            )
            for rule in self.convergence.lr_scaling_for(o)
            for s, b in itertools.product(self.seeds, batch_sizes)
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


# ---------------------------------------------------------------------------------------------
# Validation of single values (shared by the suite parser and the CLI)


def check_one_of(value: object, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
    return value


def check_model(name: object) -> str:
    from gpubench.models import MODEL_NAMES

    if isinstance(name, str) and (name in MODEL_NAMES or _USER_MODEL.match(name)):
        return name
    raise ConfigError(
        f"unknown model {name!r}; allowed: {', '.join(MODEL_NAMES)}, "
        "or 'package.module:function' returning a Workload"
    )


def check_device(name: object) -> str:
    if not isinstance(name, str) or not _DEVICE.match(name):
        raise ConfigError(f"unknown device {name!r}; allowed: auto, cpu, cuda, cuda:N")
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(
                f"device {name!r} asked for, but this machine has no CUDA device; "
                "allowed here: auto, cpu"
            )
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise ConfigError(
                f"device {name!r} does not exist; this machine has "
                f"{torch.cuda.device_count()} CUDA device(s)"
            )
    return name


def check_bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"invalid {what} {value!r}; allowed: true, false")
    return value


def check_batch_size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"invalid batch size {value!r}; allowed: a whole number of 1 or more")
    return value


def check_seed(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"invalid seed {value!r}; allowed: a whole number of 0 or more")
    return value


def _nonempty(values: tuple[Any, ...], key: str) -> tuple[Any, ...]:
    if not values:
        raise ConfigError(f"{key} is empty; give at least one value")
    return values


def validate(spec: SweepSpec) -> SweepSpec:
    """Check every axis of `spec`; returns it unchanged or raises ConfigError."""
    if not isinstance(spec.name, str) or not spec.name:
        raise ConfigError(f"invalid suite name {spec.name!r}; allowed: a non-empty string")
    for m in _nonempty(spec.models, "models"):
        check_model(m)
    check_one_of(spec.size, SIZES, "size")
    for d in _nonempty(spec.devices, "devices"):
        check_device(d)
    if spec.batch_sizes != AUTO:
        for b in _nonempty(tuple(spec.batch_sizes), "batch_sizes"):
            check_batch_size(b)
    for p in _nonempty(spec.precisions, "precisions"):
        check_one_of(p, PRECISIONS, "precision")
    for o in _nonempty(spec.optimizers, "optimizers"):
        check_one_of(o, OPTIMIZERS, "optimizer")
    for s in _nonempty(spec.seeds, "seeds"):
        check_seed(s)
    check_one_of(spec.data, DATA_MODES, "data mode")
    for c in _nonempty(spec.compile, "compile"):
        check_one_of(c, COMPILE_MODES, "compile mode")
    for flag in _nonempty(spec.channels_last, "channels_last"):
        check_bool(flag, "channels_last")
    for flag in _nonempty(spec.cuda_graph, "cuda_graph"):
        check_bool(flag, "cuda_graph")
    check_one_of(spec.mode, MODES, "mode")
    check_budget(spec.budget)
    _check_convergence(spec)
    return spec


def _check_convergence(spec: SweepSpec) -> None:
    from gpubench.spec_convergence import check, check_models

    check(spec.convergence)
    if spec.mode == "convergence":
        try:
            check_models(spec)
        except ConfigError as e:
            raise keyed_error("convergence", str(e)) from e


def check_budget(b: Budget) -> None:
    for f in fields(b):
        v = getattr(b, f.name)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v != v:
            raise ConfigError(f"invalid budget.{f.name} {v!r}; allowed: a number of 0 or more")
    if b.min_steps < 1 or b.max_steps < b.min_steps:
        raise ConfigError(
            f"invalid budget: min_steps={b.min_steps}, max_steps={b.max_steps}; "
            "allowed: 1 <= min_steps <= max_steps"
        )
    if b.target_rel_ci <= 0:
        raise ConfigError(f"invalid budget.target_rel_ci {b.target_rel_ci!r}; allowed: above 0")


def keyed_error(key: str, message: str) -> ConfigError:
    err = ConfigError(message)
    err.key = key  # type: ignore[attr-defined]
    return err
