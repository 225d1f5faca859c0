"""The reference workloads and the registry: `build(name, size, **overrides) -> Workload`.

A name is a reference model (`mlp`, `cnn`, `transformer`), an ecosystem model
(`torchvision:resnet50`, `timm:vit_small_patch16_224`, `hf:gpt2`: see the *_adapter modules),
or a user's `package.module:function` returning a Workload.

Light to import: the names and sizes are plain constants, and torch comes with the first model
built (the command line's parser checks a model's name without it)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from collections.abc import Callable
from typing import Any

if typing.TYPE_CHECKING:
    from gpubench.models.workload import Workload

# The reference models and the modules that build them (each has PRESETS and build(config)).
_REFERENCE = {
    "mlp": "gpubench.models.mlp",
    "cnn": "gpubench.models.cnn",
    "transformer": "gpubench.models.transformer",
}
MODEL_NAMES = tuple(_REFERENCE)
SIZES = ("tiny", "small", "base")
# The ecosystem prefixes and the modules that build their models (imported when first used).
ECOSYSTEMS = {
    "torchvision": "gpubench.models.torchvision_adapter",
    "timm": "gpubench.models.timm_adapter",
    "hf": "gpubench.models.hf_adapter",
}
# Model options every kind of model understands, as names of the reference configs' fields.
_COMMON_OPTIONS = {"num_classes": "classes"}

__all__ = ["MODEL_NAMES", "SIZES", "Workload", "build", "describe"]


def __getattr__(name: str) -> Any:
    """`gpubench.models.Workload`, imported (with torch) on first use."""
    if name == "Workload":
        from gpubench.models.workload import Workload

        return Workload
    raise AttributeError(f"module 'gpubench.models' has no attribute {name!r}")


def _reference(name: str) -> tuple[dict[str, Any], Callable[[Any], Workload]]:
    """Reference model `name`'s size presets and builder (its module imported on first use)."""
    module = importlib.import_module(_REFERENCE[name])
    return module.PRESETS, module.build


def build(name: str, size: str = "small", **overrides: Any) -> Workload:
    """Build a reference workload at a size preset, with config fields overridden by keyword,
    an ecosystem model with `overrides` as its options (`size` does not apply), or a user's
    workload named 'package.module:function' (called with `size` if it takes it, and with the
    overrides as keyword arguments). Every problem is a ValueError of one line."""
    prefix, _, rest = name.partition(":")
    if prefix in ECOSYSTEMS:
        return importlib.import_module(ECOSYSTEMS[prefix]).build(rest, overrides)  # type: ignore[no-any-return]
    if ":" in name:
        return _build_user(name, size, overrides)
    if name not in _REFERENCE:
        raise ValueError(
            f"unknown model {name!r}; allowed: {', '.join(MODEL_NAMES)}, "
            "or 'package.module:function'"
        )
    presets, builder = _reference(name)
    if size not in presets:
        raise ValueError(f"unknown size {size!r} for {name}; allowed: {', '.join(presets)}")
    cfg = presets[size]
    changes = _reference_options(name, cfg, overrides)
    try:
        cfg = dataclasses.replace(cfg, **changes)
    except TypeError as e:
        allowed = ", ".join(f.name for f in dataclasses.fields(cfg))
        raise ValueError(f"unknown override for {name}: {e}; allowed: {allowed}") from e
    return builder(cfg)


def _reference_options(name: str, cfg: Any, options: dict[str, Any]) -> dict[str, Any]:
    """A reference config's changes from model options: its own fields (TOML lists become
    tuples), plus `num_classes` and `image_size` (square) where the config has classes and
    images. An option it does not have is a ValueError naming the ones it has."""
    own = {f.name for f in dataclasses.fields(cfg)}
    extra = {k for k, v in _COMMON_OPTIONS.items() if v in own}
    extra |= {"image_size"} if "image_shape" in own else set()
    unknown = sorted(set(options) - own - extra)
    if unknown:
        allowed = ", ".join(sorted(own | extra))
        raise ValueError(
            f"model {name!r} has no option {', '.join(map(repr, unknown))}; allowed: {allowed}"
        )
    hints = typing.get_type_hints(type(cfg))
    for key, value in options.items():
        field = _COMMON_OPTIONS.get(key, key)
        _check_option(name, key, value, int if key == "image_size" else hints[field])
    changes = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    for alias, field in _COMMON_OPTIONS.items():
        if alias in changes:
            changes[field] = changes.pop(alias)
    if "image_size" in changes:
        size = changes.pop("image_size")
        changes["image_shape"] = (changes.get("image_shape", cfg.image_shape)[0], size, size)
    return changes


def _check_option(model: str, key: str, value: Any, kind: Any) -> None:
    """`value` of option `key` fits its config field's type `kind` (a whole number of 1 or
    more, or a list of them, of the field's length where it has one), or a ValueError naming
    the option, the value and what is allowed: a bad value must not reach torch, whose error
    names neither, nor build a model other than the one asked for (layers=-1 as layers=0)."""

    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if kind is int:
        if whole(value):
            return
        allowed = "a whole number of 1 or more"
    else:
        args = typing.get_args(kind)
        fixed = None if Ellipsis in args else len(args)
        items = value if isinstance(value, list | tuple) else None
        if items and all(whole(v) for v in items) and fixed in (None, len(items)):
            return
        count = f"a list of {fixed} whole numbers" if fixed else "a list of whole numbers"
        allowed = f"{count} of 1 or more, such as [{', '.join(['8'] * (fixed or 2))}]"
    raise ValueError(f"invalid model option {model}.{key} = {value!r}; allowed: {allowed}")


def _build_user(name: str, size: str, overrides: dict[str, Any]) -> Workload:
    from gpubench.models.workload import Workload, imported_function

    func = imported_function(name, "user model")
    if not callable(func):
        raise ValueError(
            f"user model {name!r} is a {type(func).__name__}, not a function; allowed: a "
            "function that returns a gpubench.models.Workload"
        )
    kwargs = dict(overrides)
    try:
        takes_size = "size" in inspect.signature(func).parameters
    except (TypeError, ValueError):  # a builtin or C type has no signature to read
        takes_size = False
    if takes_size:
        kwargs["size"] = size
    workload = func(**kwargs)
    if not isinstance(workload, Workload):
        shown = repr(workload)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ValueError(
            f"user model {name!r} returned {type(workload).__name__} {shown}, not a Workload; "
            "allowed: a function that returns a gpubench.models.Workload"
        )
    return workload


def describe() -> list[dict[str, Any]]:
    """One entry per (model, size): its configuration and parameter count."""
    import torch

    out = []
    for name in MODEL_NAMES:
        presets, _ = _reference(name)
        for size, cfg in presets.items():
            with torch.device("meta"):  # count parameters without allocating them
                parameters = build(name, size).parameter_count()
            out.append(
                {
                    "model": name,
                    "size": size,
                    "parameters": parameters,
                    "config": dataclasses.asdict(cfg),
                }
            )
    return out
