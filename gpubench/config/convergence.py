"""The [convergence] table of a suite: the settings of a convergence run, their parsing and
their validation."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from gpubench.config.checks import check_one_of, nonempty
from gpubench.config.errors import ConfigError
from gpubench.data import catalog

DATASETS = ("auto", *catalog.DATASETS)
LR_SCALINGS = ("auto", "none", "linear", "sqrt")
TARGET_METRICS = ("eval_accuracy", "eval_loss")
TARGET_KEYS = ("target", "own_input_target")  # the keys that hold targets, by model or not


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
    first one ends the point as diverged. The gradient noise scale is measured on one training
    step in every `noise_every_steps` (0: never) from step `noise_from_step` on, split into
    `noise_splits` micro-batches where the point accumulates 1 (science.convergence);
    `noise_samples` and `noise_ema` are accepted and unused since issue 51. Image models see
    `image_size`-pixel square images where it is set (else their own input size; the MLP takes
    the digits at their native 8x8). `own_input_target` (a number or a table by model, only
    beside `image_size`) is the target for a model trained at its own input size instead, where a
    speed sweep predicts and checks its fastest batch to target (`at_own_input`): a CNN learns
    32x32 upscaled digits more slowly than 8x8 ones. `data_dir` is the folder a file-based data
    set (cifar10) is read from.
    """

    dataset: str = "auto"
    data_dir: str | None = None
    image_size: int | None = None
    target_metric: str | None = None
    target: float | tuple[tuple[str, float], ...] | None = None
    own_input_target: float | tuple[tuple[str, float], ...] | None = None  # issue 51
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
    noise_every_steps: int = 4
    noise_from_step: int = 0  # issue 51: measure from this step on (after a warm-up window)
    noise_samples: int = 256
    noise_splits: int = 4
    noise_ema: float = 0.9

    def target_for(self, model: str) -> float | None:
        """The suite's target for `model`, or None where the data set's default holds."""
        if isinstance(self.target, tuple):
            return dict(self.target).get(model)
        return self.target

    def at_own_input(self) -> Convergence:
        """These settings with each model at its own input size: `image_size` unset, and, where
        `image_size` was set, `own_input_target` in place of `target` for the models it names."""
        own = self.own_input_target
        if self.image_size is None or own is None:
            return replace(self, image_size=None)
        merged: float | tuple[tuple[str, float], ...] = own
        if isinstance(own, tuple):
            base = {m: self.target_for(m) for m in catalog.MODEL_TASKS}
            kept = {m: v for m, v in base.items() if v is not None}
            merged = tuple(sorted({**kept, **dict(own)}.items()))
        return replace(self, image_size=None, target=merged, own_input_target=None)

    def for_models(self, models: tuple[str, ...]) -> Convergence:
        """These settings with the target tables' entries for `models` alone: a sweep whose
        --models narrows a suite's models drops the targets of those it leaves out."""

        def kept(value: Any) -> Any:
            return (
                tuple((m, v) for m, v in value if m in models)
                if isinstance(value, tuple)
                else value
            )

        return replace(self, **{key: kept(getattr(self, key)) for key in TARGET_KEYS})

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


def check(c: Convergence) -> None:
    """Raise ConfigError naming the first invalid value of `c`."""
    check_one_of(c.dataset, DATASETS, "convergence.dataset")
    if c.target_metric is not None:
        check_one_of(c.target_metric, TARGET_METRICS, "convergence.target_metric")
    for rule in nonempty(c.lr_scaling, "convergence.lr_scaling"):
        check_one_of(rule, LR_SCALINGS, "convergence.lr_scaling")
    if c.own_input_target is not None and c.image_size is None:
        raise ConfigError(
            "convergence.own_input_target is set without convergence.image_size; allowed: "
            "own_input_target beside an image_size (without one, target is the own input's)"
        )
    for model, value, key in _targets(c):
        what = f"convergence.{key}.{model}" if model else f"convergence.{key}"
        if value is not None and (isinstance(value, bool) or not 0 < value < float("inf")):
            raise ConfigError(f"invalid {what} {value!r}; allowed: a number above 0")
        if c.target_metric == "eval_accuracy" and value is not None and value > 1:
            raise ConfigError(
                f"invalid {what} {value!r}; allowed: an accuracy, above 0 and at most 1"
            )
    positive = ["image_size", "max_steps", "max_samples", "max_time_s", "eval_every_steps", "lr"]
    positive += ["eval_samples", "base_batch_size", "noise_samples"]
    for name in positive:
        v = getattr(c, name)
        if v is not None and (isinstance(v, bool) or not v > 0 or v == float("inf")):
            raise ConfigError(f"invalid convergence.{name} {v!r}; allowed: a number above 0")
    for name in ("eval_rel_gap", "warmup_samples", "noise_every_steps", "noise_from_step"):
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
        raise ConfigError(
            f"data directory {c.data_dir!r} does not exist; allowed: an existing folder"
        )


def _targets(c: Convergence) -> list[tuple[str, float | None, str]]:
    """Every target value of `c`: (model or "", value, the key it is under)."""
    out: list[tuple[str, float | None, str]] = []
    for key in TARGET_KEYS:
        value = getattr(c, key)
        pairs = value if isinstance(value, tuple) else [("", value)]
        out += [(model, v, key) for model, v in pairs]
    return out


def check_models(models: tuple[str, ...], conv: Convergence) -> None:
    """Every model of a convergence sweep must have a data set it can train on."""
    for m in models:
        if m not in catalog.MODEL_TASKS:
            raise ConfigError(
                f"model {m!r} in a convergence run; allowed: {', '.join(catalog.MODEL_TASKS)}"
            )
        name = catalog.resolve(m, conv.dataset)
        if name == "cifar10" and conv.image_size not in (None, 32):
            raise ConfigError(f"convergence.image_size {conv.image_size} for cifar10; allowed: 32")
        task = catalog.MODEL_TASKS[m]
        if catalog.TASKS[name] != task:
            fits = ", ".join(k for k, t in catalog.TASKS.items() if t == task)
            raise ConfigError(
                f"model {m!r} cannot train on convergence.dataset {name!r}; allowed: {fits}"
            )
    for key in TARGET_KEYS:
        value = getattr(conv, key)
        unknown = sorted({m for m, _ in value} - set(models)) if isinstance(value, tuple) else []
        if unknown:
            raise ConfigError(
                f"convergence.{key} names {', '.join(unknown)}, not in models; "
                f"allowed: {', '.join(models)}"
            )


# What each [convergence] key holds, from its field's type: a string, a whole number, a number
# (int or float), a boolean, a string or list of strings, or the target (a number or a table).
_KINDS = {"str": "str", "int": "int", "float": "number", "bool": "bool", "tuple[str, ...]": "strs"}
_CONVERGENCE_KINDS = {
    f.name: _KINDS.get(str(f.type).removesuffix(" | None"), "targets") for f in fields(Convergence)
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
