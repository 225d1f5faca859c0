"""The [convergence] table of a suite: its parsing and validation (the types live in spec.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.spec import (
    DATASETS,
    LR_SCALINGS,
    TARGET_METRICS,
    ConfigError,
    Convergence,
    SweepSpec,
    _nonempty,
    check_one_of,
)


def check(c: Convergence) -> None:
    """Raise ConfigError naming the first invalid value of `c`."""
    check_one_of(c.dataset, DATASETS, "convergence.dataset")
    if c.target_metric is not None:
        check_one_of(c.target_metric, TARGET_METRICS, "convergence.target_metric")
    for rule in _nonempty(c.lr_scaling, "convergence.lr_scaling"):
        check_one_of(rule, LR_SCALINGS, "convergence.lr_scaling")
    targets = c.target if isinstance(c.target, tuple) else [("", c.target)]
    for model, value in targets:
        what = f"convergence.target.{model}" if model else "convergence.target"
        if value is not None and (isinstance(value, bool) or not 0 < value < float("inf")):
            raise ConfigError(f"invalid {what} {value!r}; allowed: a number above 0")
        if c.target_metric == "eval_accuracy" and value is not None and value > 1:
            raise ConfigError(f"invalid {what} {value!r}; an accuracy is at most 1")
    positive = ["image_size", "max_steps", "max_samples", "max_time_s", "eval_every_steps", "lr"]
    positive += ["eval_samples", "base_batch_size", "noise_samples"]
    for name in positive:
        v = getattr(c, name)
        if v is not None and (isinstance(v, bool) or not v > 0 or v == float("inf")):
            raise ConfigError(f"invalid convergence.{name} {v!r}; allowed: a number above 0")
    for name in ("eval_rel_gap", "warmup_samples", "noise_every_steps"):
        v = getattr(c, name)
        if isinstance(v, bool) or not v >= 0:
            raise ConfigError(f"invalid convergence.{name} {v!r}; allowed: a number of 0 or more")
    if not c.divergence_factor > 1:
        raise ConfigError(
            f"invalid convergence.divergence_factor {c.divergence_factor!r}; allowed: above 1"
        )
    if isinstance(c.noise_splits, bool) or c.noise_splits < 2:
        raise ConfigError(
            f"invalid convergence.noise_splits {c.noise_splits!r}; allowed: 2 or more"
        )
    if not 0 <= c.noise_ema < 1:
        raise ConfigError(f"invalid convergence.noise_ema {c.noise_ema!r}; allowed: 0 <= x < 1")
    if c.data_dir is not None and not Path(c.data_dir).is_dir():
        raise ConfigError(f"data directory {c.data_dir!r} does not exist")


def check_models(spec: SweepSpec) -> None:
    """Every model of a convergence sweep must have a data set it can train on."""
    from gpubench.data import catalog

    for m in spec.models:
        if m not in catalog.MODEL_TASKS:
            raise ConfigError(
                f"model {m!r} in a convergence run; allowed: {', '.join(catalog.MODEL_TASKS)}"
            )
        name = catalog.resolve(m, spec.convergence.dataset)
        if name == "cifar10" and spec.convergence.image_size not in (None, 32):
            raise ConfigError(
                f"convergence.image_size {spec.convergence.image_size} for cifar10; allowed: 32"
            )
        task = catalog.MODEL_TASKS[m]
        if catalog.TASKS[name] != task:
            fits = ", ".join(k for k, t in catalog.TASKS.items() if t == task)
            raise ConfigError(
                f"model {m!r} cannot train on convergence.dataset {name!r}; allowed: {fits}"
            )
    if isinstance(spec.convergence.target, tuple):
        unknown = sorted({m for m, _ in spec.convergence.target} - set(spec.models))
        if unknown:
            raise ConfigError(
                f"convergence.target names {', '.join(unknown)}, not in models; "
                f"allowed: {', '.join(spec.models)}"
            )


# What each [convergence] key holds: a number (int or float), a whole number, a string, a boolean,
# or a string or list of strings.
_CONVERGENCE_KINDS = {
    "dataset": "str",
    "data_dir": "str",
    "image_size": "int",
    "target_metric": "str",
    "target": "targets",
    "stop_at_target": "bool",
    "max_steps": "int",
    "max_samples": "int",
    "max_time_s": "number",
    "eval_every_steps": "int",
    "eval_rel_gap": "number",
    "eval_samples": "int",
    "lr": "number",
    "lr_scaling": "strs",
    "base_batch_size": "int",
    "warmup_samples": "int",
    "divergence_factor": "number",
    "noise_every_steps": "int",
    "noise_samples": "int",
    "noise_splits": "int",
    "noise_ema": "number",
}


def parse_table(value: dict[str, Any]) -> Convergence:
    """The [convergence] table of a suite file, type-checked and validated."""
    out: dict[str, Any] = {}
    for k, v in value.items():
        kind = _CONVERGENCE_KINDS.get(k)
        if kind is None:
            allowed = ", ".join(sorted(_CONVERGENCE_KINDS))
            raise ConfigError(f"unknown key convergence.{k!r}; allowed: {allowed}")
        if kind == "strs" and isinstance(v, str):
            v = [v]
        ok = {
            "str": isinstance(v, str),
            "bool": isinstance(v, bool),
            "int": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, int | float) and not isinstance(v, bool),
            "strs": isinstance(v, list) and all(isinstance(x, str) for x in v),
            "targets": _is_number(v)
            or (isinstance(v, dict) and all(_is_number(x) for x in v.values())),
        }[kind]
        if not ok:
            what = {
                "strs": "a string or list of strings",
                "number": "a number",
                "targets": "a number or a table of numbers by model",
            }.get(kind, kind)
            raise ConfigError(f"convergence.{k} must be {what}, got {v!r}")
        if kind == "targets" and isinstance(v, dict):
            v = tuple(sorted(v.items()))
        out[k] = tuple(v) if kind == "strs" else v
    table = Convergence(**out)
    check(table)
    return table


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)
