"""What tune searches: the sweep's speed axes the device supports for the model, each at every
value it can take there unless the user named the values (one value fixes the axis), and the
batch sizes. An axis the device cannot use has its default only (no tf32 on the CPU, no
channels-last or cudnn.benchmark without convolutions, no CUDA graph on the CPU), and a
combination harness.step refuses is left out. The optimizer, model options and data mode are
the user's, never searched.

With a fixed effective batch (one batch size, issue 25) the size axis is the micro-batch (the
divisors that fit, down to 1/MICRO_RANGE of the largest; or the user's --accumulate), and
activation checkpointing competes where the model has repeated blocks (models.blocks).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpubench.config import needs, registry
from gpubench.config import spec as S
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point

if TYPE_CHECKING:  # the search brings the verdict's statistics (numpy, torch's timing)
    from gpubench.tune.search import Combo, Config, Space

# The competing axes other than batch size, as Point fields, in the order a combo lists them.
AXES: tuple[str, ...] = tuple(s.name for s in registry.SETTINGS if s.searched)
# With a fixed effective batch, the micro-batches searched: from the largest that fits down to
# this fraction of it (a smaller micro-batch repeats every per-pass cost more often for the same
# samples; the user's --accumulate reaches further).
MICRO_RANGE = 16
# The order in which the search screens the axes' changes from the base: what matters most on a
# device first (precision; checkpointing, which decides the micro-batch; compile), the secondary
# toggles after. A combo that changes fewer axes is screened before one that changes more.
SCREEN_ORDER: tuple[str, ...] = ("precision", "checkpoint", "compile", "threads")
SCREEN_ORDER += tuple(a for a in AXES if a not in SCREEN_ORDER)  # on/off toggles
# Precisions in the order they are screened: bf16 first-class (the mixed precision of current
# hardware, without fp16's loss scaling), tf32 (fp32's matmuls only) last.
PRECISION_ORDER = ("fp32", "bf16", "fp16", "tf32")
# The SweepSpec field (and CLI flag) of each axis.
SPEC_FIELD = {**{a: a for a in AXES}, "precision": "precisions"}


@dataclass(frozen=True)
class TuneSpace:
    """`base` (the fixed fields, with the first combo's competing ones), `values` per axis (one
    value: fixed), `batch_sizes` ascending, and `combos` the device accepts, the base first."""

    base: Point
    values: dict[str, tuple[Any, ...]]
    batch_sizes: tuple[int, ...]
    combos: tuple[Combo, ...] = field(default=())
    effective_batch: int | None = None  # set: batch_sizes are its micro-batches
    # (checkpoint mode, the largest micro-batch it fits) where max-batch searched them
    largest: tuple[tuple[str, int], ...] = ()

    @property
    def space(self) -> Space:
        from gpubench.tune.search import Space

        return Space(self.combos, self.batch_sizes, self.effective_batch, self.largest)

    def point(self, config: Config) -> Point:
        """The Point `config` is measured at."""
        return dataclasses.replace(self.base, **config.settings())

    def accumulate_values(self) -> tuple[int, ...]:
        """The accumulation steps the space holds (1 alone unless the effective batch is fixed)."""
        e = self.effective_batch
        return (1,) if e is None else tuple(sorted(e // b for b in self.batch_sizes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "axes": {k: list(v) for k, v in self.values.items()},
            "batch_sizes": list(self.batch_sizes),
            "effective_batch": self.effective_batch,
            "combos": [dict(c) for c in self.combos],
            "size": self.space.size,
            "largest_batch_by_checkpoint": dict(self.largest),
        }


def fixed_effective_batch(
    batch_sizes: tuple[int, ...] | None, accumulate: tuple[int, ...] | None
) -> int | None:
    """The effective batch the user fixed (one batch size), or None; ConfigError where
    --accumulate comes without exactly one batch size, or does not split it."""
    sizes = sorted(set(batch_sizes or ()))
    if accumulate is not None and len(sizes) != 1:
        raise ConfigError(
            "tune --accumulate splits one effective batch into micro-batches; allowed: with "
            f"exactly one --batch-sizes value (the effective batch), not {sizes}"
        )
    if len(sizes) != 1:
        return None
    if accumulate is not None:
        _check_splits(sizes[0], accumulate)
    return sizes[0]


def _check_splits(effective: int, accumulate: tuple[int, ...]) -> None:
    """ConfigError where a step count of `accumulate` does not split `effective` evenly."""
    from gpubench.run.accumulation_plan import divisors

    bad = [k for k in accumulate if effective % k]
    if bad:
        raise ConfigError(
            f"--accumulate {bad[0]} does not split the effective batch {effective} into "
            f"equal micro-batches; allowed: its divisors {divisors(effective)}"
        )


def micro_batches(
    effective: int, largest: int, accumulate: tuple[int, ...] | None
) -> tuple[int, ...]:
    """The micro-batches of `effective` searched: the user's `accumulate` steps', else its
    divisors from `largest` (the largest that fits) down to 1/MICRO_RANGE of it."""
    from gpubench.run.accumulation_plan import divisors

    if accumulate is not None:
        _check_splits(effective, accumulate)
        return tuple(sorted({effective // k for k in accumulate}))
    fits = [d for d in divisors(effective) if d <= largest]
    if not fits:
        raise ConfigError(
            f"no micro-batch of the effective batch {effective} fits in memory (not even one "
            "sample); allowed: a smaller model, --size, or more --max-memory"
        )
    top = fits[-1]
    return tuple(d for d in fits if d * MICRO_RANGE >= top)


def axis_values(
    base: Point,
    has_conv: bool,
    cpu_threads: int,
    named: Mapping[str, tuple[Any, ...]],
    has_blocks: bool = False,
    fixed_batch: bool = False,
) -> dict[str, tuple[Any, ...]]:
    """Each axis's values: the user's `named` ones, else every value the device supports for
    the model; the CPU's threads run 1, 2, 4, ... up to `cpu_threads` (and it). Checkpointing
    competes only with a fixed effective batch and repeated blocks: it costs speed, so it can
    only win by fitting a larger micro-batch."""
    cuda = base.device.startswith("cuda")
    import torch

    from gpubench.run.maxbatch import powers_of_two

    device = torch.device(base.device)
    from gpubench.config import precision  # torch's: not for the command line's parser

    has = needs.held(base.to_dict(), has_conv)
    out: dict[str, tuple[Any, ...]] = {
        s.name: ((s.choices or (False, True)) if needs.acts(s, has) else (s.default,))
        for s in registry.SETTINGS
        if s.searched
    }
    out |= {
        "precision": tuple(
            p for p in S.PRECISIONS if precision.unsupported_reason(p, device) is None
        ),
        "threads": (None,) if cuda else tuple(sorted({*powers_of_two(cpu_threads), cpu_threads})),
        "checkpoint": S.CHECKPOINT_MODES if has_blocks and fixed_batch else ("none",),
    }
    for axis, given in named.items():
        if axis not in AXES:
            continue  # accumulate: the size axis of a fixed effective batch (micro_batches)
        out[axis] = tuple(dict.fromkeys(given))
    return out


def combos(
    base: Point, values: dict[str, tuple[Any, ...]], has_conv: bool, has_blocks: bool = False
) -> tuple[Combo, ...]:
    """Every combination of `values` harness.step can run for `base`'s model: the base first
    (`_base_first`), then fewer axes changed from it first, and among those by SCREEN_ORDER."""
    from gpubench.harness.step import unsupported_reason

    ordered = {k: _base_first(k, v) for k, v in values.items()}
    out: list[Combo] = []
    for settings in itertools.product(*(ordered[a] for a in AXES)):
        combo = tuple(zip(AXES, settings, strict=True))
        point = dataclasses.replace(base, **dict(combo))
        # the model is built on meta, not here: its convolutions are known as has_conv
        reason = unsupported_reason(point) or needs.refusal(point.to_dict(), has_conv)
        if reason is None and point.checkpoint != "none" and not has_blocks:
            reason = "no repeated blocks"
        if reason is None:
            out.append(combo)
    if not out:
        named = ", ".join(f"{k}={list(v)}" for k, v in values.items() if len(v) > 0)
        raise ConfigError(
            f"nothing to search: no combination of {named} runs on {base.device} for "
            f"{base.model}; allowed: values the device supports"
        )
    base_combo = dict(out[0])

    def screen_key(combo: Combo) -> tuple[int, list[int]]:
        changed = [a for a, v in combo if base_combo[a] != v]
        return len(changed), sorted(SCREEN_ORDER.index(a) for a in changed)

    return tuple(sorted(out, key=screen_key))  # stable: the product's order among equals


def _base_first(axis: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """`values` with what a user runs without tuning first (fp32, eager, off, no checkpointing,
    the most threads); the precisions in PRECISION_ORDER."""
    if axis == "threads":
        return tuple(sorted(values, key=lambda t: -(t or 0)))
    if axis == "precision":
        known = {p: n for n, p in enumerate(PRECISION_ORDER)}
        return tuple(sorted(values, key=lambda p: known.get(p, len(known))))
    first = {"precision": "fp32", "compile": "eager", "checkpoint": "none"}.get(axis, False)
    return tuple(sorted(values, key=lambda v: v != first))
