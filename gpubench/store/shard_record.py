"""A sharded run folder's shard.json: which share of the sweep's points it measures
(`--shard INDEX/COUNT`), with its writer and reader (run.shard), so that a resume stays that
shard and explain plans that shard's points.

```
{"index": int, "count": int}
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from gpubench.store import typed_json
from gpubench.store.results import ResultStore

FILE = "shard.json"


@dataclass(frozen=True)
class ShardRecord:
    """The whole of shard.json: shard `index` of `count` (1-based; run.shard checks the pair)."""

    index: int
    count: int

    def write(self, run_dir: Path) -> Path:
        """shard.json in `run_dir`, written whole and durably."""
        return ResultStore(run_dir).write_json(FILE, dataclasses.asdict(self))


def read(run_dir: str | Path) -> ShardRecord | None:
    """`run_dir`'s shard.json (None where it has none); typed_json.RecordError (one line: the
    file and what is wrong) where it is not what run.shard writes."""
    return typed_json.read_in(run_dir, FILE, ShardRecord, "a shard record")
