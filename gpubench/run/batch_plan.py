"""batch_sizes = "auto" made into batch sizes: what one rank of a point's layout is searched as,
the batch sizes that search gives in the point's own batch_size, and the plan file that holds the
searches so that every shard and every resume of a sweep measures the same points.

A rank's memory is probed in a single process (maxbatch, fresh workers): the same model,
precision and optimizer at the rank's own batch. What a parallel layout changes in a rank's
memory is its training state, which the probe measures (parameters, gradients, optimizer
state), so the search runs against the memory limit moved by that difference:

- DDP (torch's default `gradient_as_bucket_view=False`) holds its gradient buckets beside the
  gradients, one more copy of the gradients (the PyTorch DDP documentation: a view "can reduce
  peak memory usage, where the saved memory size will be equal to the total gradients size");
- FSDP shards parameters, gradients and optimizer state over the world: each rank holds 1/world
  of them. The units it gathers while they compute are not counted, and the world is the
  processes on one node (`nproc`), so under multi-node FSDP the answer is conservative. On a
  CUDA device without --max-memory no probe can use more than the device, so there FSDP's
  saving is not searched either: the answer is the single process's (conservative again).

The answer is the largest batch per rank; under weak scaling that is the point's batch size,
under strong scaling the point's (global) batch size is nproc times it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.store.results import ResultStore

FOLDER_PLAN = "maxbatch.json"  # the searches a run folder's points came from


@dataclasses.dataclass(frozen=True)
class RankLayout:
    """What one rank of a point is searched as: `probe`, the single-process point at the rank's
    batch (its batch_size is a placeholder); `share`, the part of the probe's parameters,
    gradients and optimizer state the rank holds; `gradient_copies`, further copies of the
    gradients it holds."""

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
        """The search's key in a plan: the probe's identity but its batch size, and the
        layout's difference where there is one (so every layout whose ranks hold what a single
        process holds shares one search)."""
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
    """`point.accumulate` times the powers of two up to `largest_per_rank` (the largest
    micro-batch a rank fits), in `point`'s batch_size: per rank under weak scaling and for a
    single process, global (nproc times) under strong scaling. At least one micro-batch of one
    per rank, so that a point that fits nothing still gets its `oom` row."""
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
    """Every layout's search result (maxbatch.MaxBatch.to_dict()) by its key: read from
    `plan_file` (when given), else from the run folder's maxbatch.json, else searched now, and
    written to both. A search that stopped on an error or a timeout is searched again.

    The plan file is locked while it is read, searched into and written, so shards that start
    together on one file system search once: the first searches, the others wait and read."""
    folder_path = run_dir / FOLDER_PLAN
    folder_plan = _read(folder_path) if folder_path.is_file() else {}
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
            ResultStore(run_dir).write_json(FOLDER_PLAN, folder_plan)
            if plan_file is not None:
                _write(plan_file, shared)
    return plan


@contextmanager
def _locked(plan_file: Path | None) -> Iterator[dict[str, dict[str, Any]]]:
    """The plan file's searches (empty where it does not exist yet), under an exclusive lock
    on it for the block (none without a file)."""
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
        yield _read(plan_file) if os.fstat(fd).st_size else {}
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"cannot read the batch-size plan {str(path)!r}: {e}; allowed: a maxbatch.json "
            "written by a sweep with batch_sizes = 'auto'"
        ) from e
    if not isinstance(plan, dict) or not all(
        isinstance(v, dict) and "largest_batch" in v for v in plan.values()
    ):
        raise ConfigError(
            f"{str(path)!r} is no batch-size plan; allowed: a maxbatch.json written by a sweep "
            "with batch_sizes = 'auto'"
        )
    return plan


def _write(path: Path, plan: dict[str, dict[str, Any]]) -> None:
    """In place (the plan file's lock is on this file), flushed to disk."""
    with open(path, "r+" if path.is_file() else "w", encoding="utf-8") as f:
        f.truncate(0)
        f.write(json.dumps(plan, indent=2, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
