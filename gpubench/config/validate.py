"""A whole SweepSpec's validation: every axis, the budget and the convergence settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from gpubench.config import convergence, needs
from gpubench.config.checks import (
    check_divides,
    check_noise_budget,
    check_one_of,
    check_watts,
    nonempty,
)
from gpubench.config.errors import ConfigError, keyed_error
from gpubench.config.registry import axes
from gpubench.config.spec import AUTO, GROW_DEVICE_TYPES, MODES, Budget, SweepSpec


def _name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"invalid suite name {value!r}; allowed: a non-empty string")
    return value


# A SweepSpec's one-value settings, and each list axis with the check of one of its values:
# a suite file's values (config.suite) and a finished spec's go through the same checks, each
# returning the value as the spec holds it.
SCALAR_CHECKS: dict[str, Callable[[Any], Any]] = {
    "name": _name,
    "mode": lambda v: check_one_of(v, MODES, "mode"),
    **{s.axis: s.checked for s in axes() if s.sweep == "scalar" and s.axis is not None},
}
ELEMENT_CHECKS: dict[str, Callable[[Any], Any]] = {
    **{s.axis: s.checked for s in axes() if s.sweep != "scalar" and s.axis is not None},
    "grow_batch_sizes": lambda v: check_one_of(v, GROW_DEVICE_TYPES, "device type"),  # issue 28
}


def validate(spec: SweepSpec) -> SweepSpec:
    """Check every setting and axis of `spec`; returns it unchanged or raises ConfigError."""
    for key, check in SCALAR_CHECKS.items():
        check(getattr(spec, key))
    for key, check in ELEMENT_CHECKS.items():
        given = getattr(spec, key)
        if key == "batch_sizes" and given == AUTO:
            continue  # searched point by point
        for value in given if key == "grow_batch_sizes" else nonempty(tuple(given), key):
            check(value)  # grow_batch_sizes may be empty: no series grows
    if spec.mode == "convergence" and any(m != "none" for m in spec.parallel):
        raise ConfigError(
            f"parallel {list(spec.parallel)!r} with mode 'convergence'; allowed: parallel "
            "points measure speed only (mode = 'speed'), convergence runs use parallel = ['none']"
        )
    _check_effective_batch(spec)
    needs.check_sweep(spec)  # issue 31: the loader axes without the loader data mode
    check_budget(spec.budget)
    _check_convergence(spec)
    if spec.cpu_watts is not None:  # issue 49
        try:
            check_watts(spec.cpu_watts)
        except ConfigError as e:
            raise keyed_error("cpu_watts", str(e)) from e
    try:  # issue 51
        check_noise_budget(spec.noise_budget_s)
    except ConfigError as e:
        raise keyed_error("noise_budget_s", str(e)) from e
    return spec


def _check_effective_batch(spec: SweepSpec) -> None:
    """issue 25: every batch size split into equal micro-batches (batch sizes "auto" are
    checked point by point, harness.step), and no checkpointing in a convergence run."""
    if not isinstance(spec.batch_sizes, str):  # not AUTO
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
        if f.name == "deadline" and v is None:  # none: a sweep's point (tune sets one)
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v != v:
            raise ConfigError(f"invalid budget.{f.name} {v!r}; allowed: a number of 0 or more")
        if f.name.endswith("steps") and not isinstance(v, int):
            raise ConfigError(f"invalid budget.{f.name} {v!r}; allowed: a whole number of steps")
    if b.min_steps < 1 or b.max_steps < b.min_steps:
        raise ConfigError(
            f"invalid budget: min_steps={b.min_steps}, max_steps={b.max_steps}; "
            "allowed: 1 <= min_steps <= max_steps"
        )
    if b.target_rel_ci <= 0:
        raise ConfigError(f"invalid budget.target_rel_ci {b.target_rel_ci!r}; allowed: above 0")
