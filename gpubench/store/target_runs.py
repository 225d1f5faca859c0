"""A sweep's target_runs.jsonl (issue 51, `sweep --confirm-target`): the training runs to a
quality target that confirm or refute a verdict's predicted "fastest to target", one convergence
row per line in the order trained (run.target_confirm writes them, science.target_check reads
them). A file of rows as the results file is (store.results): appended a whole line at a time
and fsynced, a torn last line moved aside before appending again (store.results.repair_tail),
skipped with a warning on read. Kept beside the results file, not in it: their samples/s are
those of training on real data with evaluations between, not the speed points' figures the
verdict ranks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.store.results import append_row, repair_tail, rows_in

FILE = "target_runs.jsonl"


def append(run_dir: Path, row: dict[str, Any]) -> None:
    """`row` as one line at the end of `run_dir`'s target_runs.jsonl, fsynced; RowNotWritten
    (store.results.append_row) where it fails, the file as it was."""
    append_row(Path(run_dir) / FILE, row)


def repair(run_dir: Path) -> None:
    """Before appending again (a resumed sweep): a torn last line moved aside, as
    store.results.repair_tail does for the results file."""
    repair_tail(Path(run_dir) / FILE)


def read(run_dir: str | Path, skip_odd: bool = False) -> list[dict[str, Any]]:
    """Every run in `run_dir`'s target_runs.jsonl, in order ([] where it has none); a torn last
    line is skipped with a warning, a line that is not a row before it is a ResultsError naming
    the file and the line, or with `skip_odd` (a reader) left out with a warning
    (store.results.rows_in)."""
    path = Path(run_dir) / FILE
    return rows_in(path, skip_odd) if path.is_file() else []
