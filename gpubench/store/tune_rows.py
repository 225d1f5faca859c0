"""A tune's tune_rows.jsonl: every measurement of its search, one row per line in the order
measured, each marked with its `tune_round` (and `tune_cut` where the deadline cut it short),
with its writer and reader (gpubench.tune.tuner). A file of rows as the results file is
(store.results): appended a whole line at a time and fsynced, a torn last line moved aside on
resume (run.context: store.results.repair_tail), skipped with a warning on read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.store.results import append_row, rows_in

FILE = "tune_rows.jsonl"


def append(run_dir: Path, row: dict[str, Any]) -> None:
    """`row` as one line at the end of `run_dir`'s tune_rows.jsonl, fsynced; RowNotWritten
    (store.results.append_row) where it fails, the file as it was."""
    append_row(Path(run_dir) / FILE, row)


def read(run_dir: str | Path) -> list[dict[str, Any]] | None:
    """Every measurement in `run_dir`'s tune_rows.jsonl, in order (None where it has none); a
    torn last line is skipped with a warning, a line that is not a row before it is a
    ResultsError naming the file and the line (store.results.rows_in)."""
    path = Path(run_dir) / FILE
    return rows_in(path) if path.is_file() else None
