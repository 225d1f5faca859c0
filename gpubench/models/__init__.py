"""The reference workloads and the registry: `build(name, size, **overrides) -> Workload`."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from gpubench.models import cnn, mlp, transformer
from gpubench.models.workload import Workload

_REGISTRY: dict[str, tuple[dict[str, Any], Callable[[Any], Workload]]] = {
    "mlp": (mlp.PRESETS, mlp.build),
    "cnn": (cnn.PRESETS, cnn.build),
    "transformer": (transformer.PRESETS, transformer.build),
}
MODEL_NAMES = tuple(_REGISTRY)
SIZES = ("tiny", "small", "base")

__all__ = ["MODEL_NAMES", "SIZES", "Workload", "build", "describe"]


def build(name: str, size: str = "small", **overrides: Any) -> Workload:
    """Build a reference workload at a size preset, with config fields overridden by keyword,
    or a user's workload named 'package.module:function' (called with `size` if it takes it)."""
    if ":" in name:
        return _build_user(name, size, overrides)
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown model {name!r}; allowed: {', '.join(MODEL_NAMES)}, "
            "or 'package.module:function'"
        )
    presets, builder = _REGISTRY[name]
    if size not in presets:
        raise ValueError(f"unknown size {size!r} for {name}; allowed: {', '.join(presets)}")
    try:
        cfg = dataclasses.replace(presets[size], **overrides)
    except TypeError as e:
        allowed = ", ".join(f.name for f in dataclasses.fields(presets[size]))
        raise ValueError(f"unknown override for {name}: {e}; allowed: {allowed}") from e
    return builder(cfg)


def _build_user(name: str, size: str, overrides: dict[str, Any]) -> Workload:
    module_name, _, func_name = name.partition(":")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load user model {name!r}: {e}") from e
    kwargs = dict(overrides)
    if "size" in inspect.signature(func).parameters:
        kwargs["size"] = size
    workload = func(**kwargs)
    if not isinstance(workload, Workload):
        raise ValueError(f"user model {name!r} returned {type(workload).__name__}, not a Workload")
    return workload


def describe() -> list[dict[str, Any]]:
    """One entry per (model, size): its configuration and parameter count."""
    import torch

    out = []
    for name, (presets, _) in _REGISTRY.items():
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
