"""batch_sizes = "auto" made into batch sizes: what one rank of a point's layout is searched as, the
batch sizes that search gives, and the plan file that keeps the searches so every shard and resume
measures the same points.

A rank is probed in a single process (run.maxbatch); what its layout changes is its training
state, which the probe measures, so the search runs against the limit moved by the difference:
DDP (`gradient_as_bucket_view=False`, torch's default) holds one more copy of the gradients in its
buckets; FSDP holds 1/nproc of parameters, gradients and optimizer state (gathered units not
counted, and nproc is one node's: conservative across nodes). On CUDA without --max-memory no
probe can use more than the device, so FSDP's saving is not searched there. The answer is per
rank: the point's batch under weak scaling, nproc times it under strong.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.store import maxbatch_record


@dataclasses.dataclass(frozen=True)
class RankLayout:
    """One rank as searched: `probe`, the single-process point (batch_size a placeholder);
    `share` of its training state the rank holds; `gradient_copies`, further gradients held."""

    probe: Point
    share: float = 1.0
    gradient_copies: int = 0

    @property
    def same_as_probe(self) -> bool:
        return self.share == 1.0 and self.gradient_copies == 0

    def saved_bytes(self, row: dict[str, Any]) -> int:
        """Bytes the rank holds less than the probe that measured `row` (negative: more)."""
        parameters = row.get("memory_parameters_bytes") or 0
        gradients = row.get("memory_gradients_bytes") or 0
        optimizer = row.get("memory_optimizer_bytes") or 0
        sharded = (1.0 - self.share) * (parameters + gradients + optimizer)
        return int(sharded - self.gradient_copies * gradients)

    def key(self) -> str:
        """The search's key: the probe's identity but its batch size, and the layout's
        difference (layouts whose ranks hold what a single process holds share one search)."""
        fields = self.probe.to_dict()
        fields.pop("batch_size")
        key = " ".join(f"{k}={v}" for k, v in fields.items())
        if self.share != 1.0:
            key += f" state_share={self.share:g}"
        if self.gradient_copies:
            key += f" gradient_copies={self.gradient_copies}"
        return key


def rank_layout(point: Point) -> RankLayout:
    """What each rank of `point` is searched as (see the module's docstring)."""
    # at accumulate 1: a rank's largest batch is `accumulate` times its largest micro-batch (a
    # search of the point itself would probe batches that do not split into its micro-batches)
    probe = dataclasses.replace(
        point, batch_size=1, parallel="none", nproc=1, scaling=None, accumulate=1
    )
    if point.parallel == "ddp":
        return RankLayout(probe, gradient_copies=1)
    if point.parallel == "fsdp":
        return RankLayout(probe, share=1.0 / point.nproc)
    return RankLayout(probe)


def batch_sizes(point: Point, largest_per_rank: int) -> list[int]:
    """`point.accumulate` times the powers of two up to `largest_per_rank` (a rank's largest
    micro-batch), as `point`'s batch_size (point_batch); at least one sample per rank, so that
    a point that fits nothing still gets its `oom` row."""
    k = point.accumulate
    return [point_batch(point, k * 2**i) for i in range(max(largest_per_rank, 1).bit_length())]


def point_batch(point: Point, per_rank: int) -> int:
    """`point`'s batch_size that gives each of its ranks `per_rank` samples (the inverse of
    harness.parallel.per_process_batch)."""
    strong = point.parallel != "none" and point.scaling == "strong"
    return per_rank * point.nproc if strong else per_rank


Search = Callable[[RankLayout], dict[str, Any]]


def resolve(
    layouts: list[RankLayout], run_dir: Path, plan_file: Path | None, search: Search
) -> dict[str, dict[str, Any]]:
    """Every layout's search (MaxBatch.to_dict()) by key: from `plan_file`, else the folder's
    maxbatch.json, else searched now (also where it had stopped early) and written to both.
    The plan file stays locked meanwhile, so shards starting together search once."""
    folder_plan = maxbatch_record.read_plan(run_dir) or {}
    with _locked(plan_file) as shared:
        plan: dict[str, dict[str, Any]] = {}
        for layout in layouts:
            key = layout.key()
            if key in plan:
                continue
            entry = shared.get(key) or folder_plan.get(key)
            if entry is None or entry.get("stopped"):
                entry = search(layout)
            plan[key] = shared[key] = folder_plan[key] = entry
            # written as each search ends: a sweep stopped during the next keeps this one
            maxbatch_record.write_plan(run_dir, folder_plan)
            if plan_file is not None:
                maxbatch_record.write_shared(plan_file, shared)
    return plan


@contextmanager
def _locked(plan_file: Path | None) -> Iterator[dict[str, dict[str, Any]]]:
    """The plan file's searches ({} where new), under an exclusive lock for the block."""
    if plan_file is None:
        yield {}
        return
    try:
        plan_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(plan_file, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise ConfigError(f"cannot open the plan file {str(plan_file)!r}: {e.strerror}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another shard searches
        yield maxbatch_record.parse_plan(plan_file) if os.fstat(fd).st_size else {}
    finally:
        os.close(fd)
