"""A convergence run folder's batch_analysis.json: per series (a configuration less its batch
size and seed), the recommended batch size and the fits behind it (science.batch_analysis.analyse
gives the entries), with its writer (run.sweep, through science.batch_analysis) and reader (the
console's convergence tables, the report's learning curves).

```
{"groups": [entry, ...]}
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.store import typed_json
from gpubench.store.results import ResultStore

FILE = "batch_analysis.json"


@dataclass(frozen=True)
class BatchAnalysisRecord:
    """The whole of batch_analysis.json: one entry (a JSON object, plain values) per series."""

    groups: tuple[dict[str, Any], ...] = ()

    def write(self, run_dir: Path) -> Path:
        """batch_analysis.json in `run_dir`, written whole and durably."""
        return ResultStore(run_dir).write_json(FILE, dataclasses.asdict(self))


def read(run_dir: str | Path) -> BatchAnalysisRecord | None:
    """`run_dir`'s batch_analysis.json (None where it has none); typed_json.RecordError (one
    line: the file and what is wrong) where it is not what science.batch_analysis writes."""
    return typed_json.read_in(run_dir, FILE, BatchAnalysisRecord, "a batch analysis")
