"""A sharded run folder's shard.json: which share of the sweep's points it measures
(`--shard INDEX/COUNT`), with its writer and reader (run.shard), so that a resume stays that
shard and explain plans that shard's points.

```
{"index": int, "count": int, "whole_series": bool}
```
`whole_series` (absent in a folder from before it: false): the shards were dealt whole
batch-size series (a launch's, run.launcher), not point by point (`--shard`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.store.typed_json import Record

FILE = "shard.json"


@dataclass(frozen=True)
class ShardRecord(Record):
    """The whole of shard.json: shard `index` of `count` (1-based; run.shard checks the pair),
    dealt by whole batch-size series where `whole_series` (run.shard.unit)."""

    FILE = FILE
    WHAT = "a shard record"

    index: int
    count: int
    whole_series: bool = False


read = ShardRecord.read
