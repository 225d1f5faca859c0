"""A whole SweepSpec's validation: every axis, the budget and the convergence settings."""

from __future__ import annotations

from dataclasses import fields

from gpubench.config import convergence
from gpubench.config.checks import (
    check_accumulate,
    check_batch_size,
    check_bool,
    check_device,
    check_divides,
    check_model,
    check_nproc,
    check_one_of,
    check_seed,
    check_threads,
    nonempty,
)
from gpubench.config.errors import ConfigError, keyed_error
from gpubench.config.spec import (
    AUTO,
    CHECKPOINT_MODES,
    COMPILE_MODES,
    DATA_MODES,
    GROW_DEVICE_TYPES,
    MODES,
    OPTIMIZERS,
    PARALLEL_MODES,
    PRECISIONS,
    SCALING_MODES,
    SIZES,
    Budget,
    SweepSpec,
)


def validate(spec: SweepSpec) -> SweepSpec:
    """Check every axis of `spec`; returns it unchanged or raises ConfigError."""
    if not isinstance(spec.name, str) or not spec.name:
        raise ConfigError(f"invalid suite name {spec.name!r}; allowed: a non-empty string")
    for m in nonempty(spec.models, "models"):
        check_model(m)
    check_one_of(spec.size, SIZES, "size")
    for d in nonempty(spec.devices, "devices"):
        check_device(d)
    if spec.batch_sizes != AUTO:
        for b in nonempty(tuple(spec.batch_sizes), "batch_sizes"):
            check_batch_size(b)
    for p in nonempty(spec.precisions, "precisions"):
        check_one_of(p, PRECISIONS, "precision")
    for o in nonempty(spec.optimizers, "optimizers"):
        check_one_of(o, OPTIMIZERS, "optimizer")
    for s in nonempty(spec.seeds, "seeds"):
        check_seed(s)
    check_one_of(spec.data, DATA_MODES, "data mode")
    for c in nonempty(spec.compile, "compile"):
        check_one_of(c, COMPILE_MODES, "compile mode")
    for flag in nonempty(spec.channels_last, "channels_last"):
        check_bool(flag, "channels_last")
    for flag in nonempty(spec.cuda_graph, "cuda_graph"):
        check_bool(flag, "cuda_graph")
    for flag in nonempty(spec.cudnn_benchmark, "cudnn_benchmark"):
        check_bool(flag, "cudnn_benchmark")
    for t in nonempty(spec.threads, "threads"):
        check_threads(t)
    check_one_of(spec.mode, MODES, "mode")
    for kind in spec.grow_batch_sizes:  # issue 28; empty: no series grows
        check_one_of(kind, GROW_DEVICE_TYPES, "device type")
    _check_parallel(spec)
    _check_effective_batch(spec)
    check_budget(spec.budget)
    _check_convergence(spec)
    return spec


def _check_parallel(spec: SweepSpec) -> None:
    for mode in nonempty(spec.parallel, "parallel"):
        check_one_of(mode, PARALLEL_MODES, "parallel mode")
    for n in nonempty(spec.nproc, "nproc"):
        check_nproc(n)
    for s in nonempty(spec.scaling, "scaling"):
        check_one_of(s, SCALING_MODES, "scaling")
    if spec.mode == "convergence" and any(m != "none" for m in spec.parallel):
        raise ConfigError(
            f"parallel {list(spec.parallel)!r} with mode 'convergence'; allowed: parallel "
            "points measure speed only (mode = 'speed'), convergence runs use parallel = ['none']"
        )


def _check_effective_batch(spec: SweepSpec) -> None:
    """issue 25: accumulate and checkpoint values, and every batch size split into equal
    micro-batches (batch sizes "auto" are checked point by point, harness.step)."""
    for k in nonempty(spec.accumulate, "accumulate"):
        check_accumulate(k)
    for c in nonempty(spec.checkpoint, "checkpoint"):
        check_one_of(c, CHECKPOINT_MODES, "checkpoint mode")
    if spec.batch_sizes != AUTO:
        try:
            for b in spec.batch_sizes:
                for k in spec.accumulate:
                    check_divides(b, k)
        except ConfigError as e:
            raise keyed_error("accumulate", str(e)) from e  # a suite names accumulate's line
    if spec.mode == "convergence" and spec.checkpoint != ("none",):
        raise ConfigError(
            f"checkpoint {list(spec.checkpoint)!r} with mode 'convergence'; allowed: "
            "checkpoint = ['none'] (checkpointing changes speed and memory, not what is learnt: "
            "measure it in a speed run)"
        )


def _check_convergence(spec: SweepSpec) -> None:
    convergence.check(spec.convergence)
    if spec.mode == "convergence":
        try:
            convergence.check_models(spec.models, spec.convergence)
        except ConfigError as e:
            raise keyed_error("convergence", str(e)) from e


def check_budget(b: Budget) -> None:
    for f in fields(b):
        v = getattr(b, f.name)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v != v:
            raise ConfigError(f"invalid budget.{f.name} {v!r}; allowed: a number of 0 or more")
        if f.name.endswith("steps") and not isinstance(v, int):
            raise ConfigError(f"invalid budget.{f.name} {v!r}; allowed: a whole number of steps")
    if b.min_steps < 1 or b.max_steps < b.min_steps:
        raise ConfigError(
            f"invalid budget: min_steps={b.min_steps}, max_steps={b.max_steps}; "
            "allowed: 1 <= min_steps <= max_steps"
        )
    if not isinstance(b.profile_steps, int):
        raise ConfigError(
            f"invalid budget.profile_steps {b.profile_steps!r}; "
            "allowed: a whole number of 0 or more"
        )
    if b.target_rel_ci <= 0:
        raise ConfigError(f"invalid budget.target_rel_ci {b.target_rel_ci!r}; allowed: above 0")
