"""The space of one tune request, built from the model and the machine: what the model has
(convolutions, repeated blocks), which axis values the device runs, and the batch sizes: the
user's, else those that fit by max-batch's memory model (its searches kept in the run folder,
so a resumed tune does not probe again); with one batch size, the micro-batches of that
effective batch (gpubench.tune.space)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.run import maxbatch
from gpubench.run.batch_search import Probe
from gpubench.run.context import RunOptions
from gpubench.store import maxbatch_record
from gpubench.tune import space as tune_space

# The share of a tune's budget its max-batch searches may take (split among them): a probe's
# batch is capped to what that time affords (maxbatch.find's `seconds`).
MAXBATCH_SHARE = 0.15

if TYPE_CHECKING:
    from gpubench.tune.tuner import TuneRequest


def space_for(
    request: TuneRequest,
    base: Point,
    run_dir: Path,
    options: RunOptions,
    on_probe: Callable[[Probe], None] | None = None,
) -> tune_space.TuneSpace:
    """The space (module docstring): the batch sizes are the powers of two up to the largest
    the base combo fits, probed within MAXBATCH_SHARE of a budget; with a fixed effective
    batch, the largest micro-batch each checkpoint mode fits is kept too (`largest`).
    Each probe is measured under `options`' memory cap and timeout; `on_probe` is told of each
    as it ends."""
    import torch

    from gpubench import models
    from gpubench.models.blocks import repeated_blocks

    with torch.device("meta"):
        workload = models.build(request.model, request.size, **request.model_options)
    has_conv = workload.convolutional
    has_blocks = bool(repeated_blocks(workload.model))
    sizes = request.batch_sizes
    accumulate = request.named.get("accumulate")
    effective = tune_space.fixed_effective_batch(sizes, accumulate)
    seconds = None if request.budget_s is None else MAXBATCH_SHARE * request.budget_s
    values = tune_space.axis_values(
        base, has_conv, torch.get_num_threads(), request.named, has_blocks, effective is not None
    )
    combos = tune_space.combos(base, values, has_conv, has_blocks)
    first = dataclasses.replace(base, **dict(combos[0]))
    if effective is None:
        batches = sizes or maxbatch.powers_of_two(
            _largest(first, run_dir, maxbatch_record.FILE, options, on_probe, seconds)
        )
        return tune_space.TuneSpace(first, values, tuple(sorted(set(batches))), combos)
    by_mode: dict[str, int] = {}
    if accumulate is None:  # the largest micro-batch each checkpoint mode fits
        for mode in values["checkpoint"]:
            micro = dataclasses.replace(first, checkpoint=mode)
            # no micro-batch is larger than the effective batch: the search stops there
            name = maxbatch_record.mode_file(mode)
            each = None if seconds is None else seconds / len(values["checkpoint"])
            by_mode[mode] = _largest(micro, run_dir, name, options, on_probe, each, effective)
    largest = max(by_mode.values(), default=0)
    micro_sizes = tune_space.micro_batches(effective, largest, accumulate)
    return tune_space.TuneSpace(
        first, values, micro_sizes, combos, effective, tuple(sorted(by_mode.items()))
    )


def _largest(
    base: Point,
    run_dir: Path,
    name: str,
    options: RunOptions,
    on_probe: Callable[[Probe], None] | None = None,
    seconds: float | None = None,
    ceiling: int = maxbatch.CEILING,
) -> int:
    """The largest batch `base` fits, up to `ceiling` and what `seconds` of probing affords: a
    max-batch search kept in `run_dir`/`name` for a resumed tune."""
    kept = maxbatch_record.read_search(run_dir, name)
    if kept is not None:
        return int(kept["largest_batch"])
    cap = options.max_memory
    cap = cap if cap is not None else maxbatch.default_cap(base.device)
    timeout = options.point_timeout_s
    found = maxbatch.find(base, cap, timeout, ceiling=ceiling, on_probe=on_probe, seconds=seconds)
    if found.largest < 1:
        raise ConfigError(
            f"{base.label()}: not even one sample fits in memory ({found.stopped or 'oom'})"
        )
    maxbatch_record.write_search(run_dir, name, found.to_dict())
    return found.largest
