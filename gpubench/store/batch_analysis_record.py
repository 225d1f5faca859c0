"""A convergence run folder's batch_analysis.json: per series (a configuration less its batch
size and seed), the recommended batch size and the fits behind it (science.batch_analysis.analyse
gives the entries), with its writer (run.sweep, through science.batch_analysis) and reader (the
console's convergence tables, the report's learning curves).

```
{"groups": [entry, ...]}
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpubench.store.typed_json import Record

FILE = "batch_analysis.json"


@dataclass(frozen=True)
class BatchAnalysisRecord(Record):
    """The whole of batch_analysis.json: one entry (a JSON object, plain values) per series."""

    FILE = FILE
    WHAT = "a batch analysis"

    groups: tuple[dict[str, Any], ...] = ()


read = BatchAnalysisRecord.read
