"""What tune searches: the sweep's speed axes that the device supports for the model, each at
every value it can take there unless the user named the values (then only those: one value
fixes the axis), and the batch sizes.

An axis the device cannot use has its default only: no tf32 on the CPU (harness precision
rules), no channels-last or cudnn.benchmark without convolutions, no CUDA graph or
cudnn.benchmark on the CPU; and any combination harness.step refuses (a CUDA graph under
fp16's loss scaling, say) is left out. The optimizer, the model's options and the data mode are
the user's choices, never searched.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpubench.config import precision
from gpubench.config import spec as S
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.tune.search import Combo, Config, Space

# The competing axes other than batch size, as Point fields, in the order a combo lists them.
AXES = ("precision", "compile", "threads", "channels_last", "cuda_graph", "cudnn_benchmark")
# The SweepSpec field (and CLI flag) of each axis.
SPEC_FIELD = {
    "precision": "precisions",
    "compile": "compile",
    "threads": "threads",
    "channels_last": "channels_last",
    "cuda_graph": "cuda_graph",
    "cudnn_benchmark": "cudnn_benchmark",
}


@dataclass(frozen=True)
class TuneSpace:
    """The search space: `base` (a Point holding the fixed fields; its competing fields are the
    first combo's), `values` per axis (one value: fixed), `batch_sizes` ascending, and
    `combos` (the product of the values the device accepts, the base first)."""

    base: Point
    values: dict[str, tuple[Any, ...]]
    batch_sizes: tuple[int, ...]
    combos: tuple[Combo, ...] = field(default=())

    @property
    def space(self) -> Space:
        return Space(self.combos, self.batch_sizes)

    def point(self, config: Config) -> Point:
        """The Point `config` is measured at."""
        return dataclasses.replace(self.base, **config.settings())

    def to_dict(self) -> dict[str, Any]:
        return {
            "axes": {k: list(v) for k, v in self.values.items()},
            "batch_sizes": list(self.batch_sizes),
            "combos": [dict(c) for c in self.combos],
            "size": self.space.size,
        }


def axis_values(
    base: Point, has_conv: bool, cpu_threads: int, named: Mapping[str, tuple[Any, ...]]
) -> dict[str, tuple[Any, ...]]:
    """Each axis's values: the `named` ones (the user's), else every value the device supports
    for a model with (or without) convolutions; `cpu_threads` is torch's own thread count, and
    the CPU's thread axis runs 1, 2, 4, ... up to it (and it)."""
    cuda = base.device.startswith("cuda")
    import torch

    device = torch.device(base.device)
    out: dict[str, tuple[Any, ...]] = {
        "precision": tuple(
            p for p in S.PRECISIONS if precision.unsupported_reason(p, device) is None
        ),
        "compile": S.COMPILE_MODES,
        "threads": (None,) if cuda else _thread_counts(cpu_threads),
        "channels_last": (False, True) if has_conv else (False,),
        "cuda_graph": (False, True) if cuda else (False,),
        "cudnn_benchmark": (False, True) if cuda and has_conv else (False,),
    }
    for axis, given in named.items():
        out[axis] = tuple(dict.fromkeys(given))
    return out


def _thread_counts(most: int) -> tuple[int, ...]:
    powers = [2**i for i in range(max(most, 1).bit_length()) if 2**i <= most]
    return tuple(sorted({*powers, max(most, 1)}))


def combos(base: Point, values: dict[str, tuple[Any, ...]], has_conv: bool) -> tuple[Combo, ...]:
    """Every combination of `values` that harness.step can run for `base`'s model, the base
    first: the first value of each axis, except that the default of an on/off option (off,
    eager) and the most threads come first where they are among the values."""
    from gpubench.harness.step import unsupported_reason

    ordered = {k: _base_first(k, v) for k, v in values.items()}
    out: list[Combo] = []
    for settings in itertools.product(*(ordered[a] for a in AXES)):
        combo = tuple(zip(AXES, settings, strict=True))
        point = dataclasses.replace(base, **dict(combo))
        reason = unsupported_reason(point)
        if reason is None and point.channels_last and not has_conv:
            reason = "no convolution"
        if reason is None:
            out.append(combo)
    if not out:
        named = ", ".join(f"{k}={list(v)}" for k, v in values.items() if len(v) > 0)
        raise ConfigError(
            f"nothing to search: no combination of {named} runs on {base.device} for "
            f"{base.model}; allowed: values the device supports"
        )
    return tuple(out)


def _base_first(axis: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """`values` with the base's value first: fp32 (else the first given), eager, off, and the
    most threads (what a user runs without tuning)."""
    if axis == "threads":
        return tuple(sorted(values, key=lambda t: -(t or 0)))
    first = {"precision": "fp32", "compile": "eager"}.get(axis, False)
    return tuple(sorted(values, key=lambda v: v != first))
