"""maxbatch.json: the max-batch searches a run folder's batch sizes came from, with their writers
and readers, so that a resume (and every shard) plans the same batches without probing again.
Each search is run.maxbatch.MaxBatch.to_dict(): the probe point's settings, `largest_batch`
(a whole number) and how the search went.

Two shapes, one per kind of folder:
- a sweep's plan (batch_sizes = "auto", run.batch_plan): {layout key: search}, in the folder
  and in a shared plan file (`--plan`, rewritten in place under its lock);
- a tune's search (gpubench.tune.space_for): one search, in maxbatch.json (or
  maxbatch-MODE.json, one per checkpoint mode, for a fixed effective batch).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.store import typed_json
from gpubench.store.results import ResultStore

FILE = "maxbatch.json"

Search = dict[str, Any]  # one search: MaxBatch.to_dict()
Plan = dict[str, Search]  # a sweep's searches by layout key (run.batch_plan.RankLayout.key)


def mode_file(mode: str) -> str:
    """The name of the tune's search file for checkpoint mode `mode`."""
    return f"maxbatch-{mode}.json"


def parse_plan(path: Path) -> Plan:
    """The plan in the file `path` (a folder's maxbatch.json or a shared plan file); a
    ConfigError (one line naming the file, and what is allowed) where it cannot be read, is not
    JSON, or is not an object of searches each with its `largest_batch`."""
    allowed = f"allowed: a {FILE} written by a sweep with batch_sizes = 'auto'"
    try:
        plan = typed_json.value(path)
    except typed_json.RecordError as e:
        raise ConfigError(f"cannot read the batch-size plan: {e}; {allowed}") from None
    if not isinstance(plan, dict) or not all(
        isinstance(v, dict) and "largest_batch" in v for v in plan.values()
    ):
        raise ConfigError(f"{str(path)!r} is no batch-size plan; {allowed}")
    return plan


def read_plan(run_dir: str | Path) -> Plan | None:
    """`run_dir`'s plan (None where it has no maxbatch.json); parse_plan's ConfigError where it
    is not one."""
    path = Path(run_dir) / FILE
    return parse_plan(path) if path.is_file() else None


def write_plan(run_dir: Path, plan: Plan) -> Path:
    """`plan` as `run_dir`'s maxbatch.json, written whole and durably."""
    return ResultStore(run_dir).write_json(FILE, plan)


def write_shared(path: Path, plan: Plan) -> None:
    """`plan` as the shared plan file `path`, rewritten in place (its lock is on this file, so it
    is not replaced) and fsynced."""
    with open(path, "r+" if path.is_file() else "w", encoding="utf-8") as f:
        f.truncate(0)
        f.write(json.dumps(plan, indent=2, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_search(run_dir: str | Path, name: str = FILE) -> Search | None:
    """The tune's search kept in `run_dir`/`name` (None where there is none); a
    typed_json.RecordError (one line naming the file) where it is not JSON or not an object
    with a whole-number `largest_batch`."""
    path = Path(run_dir) / name
    if not path.is_file():
        return None
    search = typed_json.value(path)
    largest = search.get("largest_batch") if isinstance(search, dict) else None
    if not isinstance(largest, int) or isinstance(largest, bool):
        raise typed_json.RecordError(
            f"{path} is not a max-batch search: it holds no whole-number largest_batch"
        )
    return dict(search)


def write_search(run_dir: Path, name: str, search: Search) -> Path:
    """The tune's search `search` as `run_dir`/`name`, written whole and durably."""
    return ResultStore(run_dir).write_json(name, search)
