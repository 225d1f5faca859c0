"""Restating a run folder (DESIGN.md section 4): its results.jsonl and results.csv rewritten into
today's schema (results.upgraded, written into the files for readers of the CSV or JSONL), and
the rewrite recorded in the folder (restated.json). Nothing is re-measured."""

from __future__ import annotations

import datetime
import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.store.env import git_commit
from gpubench.store.results import csv_text, load_results, read_rows, replace_durably, upgraded
from gpubench.store.row import COLUMNS, RENAMED

RECORD = "restated.json"

# Columns whose meaning changed, and how the restated value is made (from the row's own values).
MEANINGS = {
    "mfu": (
        "was the fraction of the measured matmul roof (now in matmul_roof_fraction); now "
        "tflops / datasheet_peak_tflops of the row, null where the datasheet peak is unknown"
    ),
    "matmul_roof_fraction": (
        "added: the fraction of the measured matmul roof, the value the row held under mfu"
    ),
}
NOTE = (
    "Nothing was re-measured: every measured value is kept as written; a column whose meaning "
    "changed is recomputed from the row's own values, a column the row did not have is null."
)


class RestateError(RuntimeError):
    """A rewrite that would not keep the folder's values (an invariant of ours failed)."""


def completed(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with every schema column in order (None where it has none, as `make_row` writes a
    row), then its other keys (the raw series) in their own order."""
    out = {c: row.get(c) for c in COLUMNS}
    out.update({k: v for k, v in row.items() if k not in out})
    return out


def restate(
    run_dir: str | Path, commit: str | None = None, today: str | None = None
) -> dict[str, Any] | None:
    """Rewrite `run_dir`'s results.jsonl and results.csv into today's schema and append what
    changed to its restated.json; returns that entry, or None when the folder already is in
    today's schema (then nothing is written: running it twice changes nothing).

    `commit` (default: this checkout's) and `today` (default: today's UTC date, ISO) go into the
    record. Before anything is replaced, the rows are checked to keep every value of every
    column whose meaning did not change, and the loader to read the same frame as before."""
    run = Path(run_dir)
    old = read_rows(run)
    new = [completed(upgraded(r)) for r in old]
    jsonl = "".join(json.dumps(r, allow_nan=False) + "\n" for r in new)
    jsonl_path, csv_path = run / "results.jsonl", run / "results.csv"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results.jsonl").write_text(jsonl, encoding="utf-8")
        _check_loaded_alike(load_results(run), load_results(tmp), run)
        csv = csv_text(tmp)
    same_csv = csv_path.is_file() and csv_path.read_text(encoding="utf-8") == csv
    if jsonl_path.read_text(encoding="utf-8") == jsonl and same_csv:
        return None
    columns = column_changes(old, new)
    entry: dict[str, Any] = {
        "date": today or datetime.datetime.now(datetime.UTC).date().isoformat(),
        "gpubench_commit": commit if commit is not None else git_commit(),
        "note": NOTE,
        "rows": len(new),
        "files": ["results.jsonl", "results.csv"],
        "columns": {c: ch for c, ch in columns.items() if ch["change"] != "added, null"},
        # Columns the rows did not have and get as null (not measured then), with how many rows.
        "columns_added_null": {
            c: ch["rows_changed"] for c, ch in columns.items() if ch["change"] == "added, null"
        },
    }
    record_path = run / RECORD
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
    record.setdefault("restatements", []).append(entry)
    replace_durably(jsonl_path, jsonl)
    replace_durably(csv_path, csv)
    replace_durably(record_path, json.dumps(record, indent=2) + "\n")
    return entry


def column_changes(
    old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per column of the new rows that differs from the old: what changed and in how many rows.
    Raises RestateError where a column whose meaning did not change would get another value."""
    renamed_from = {v: k for k, v in RENAMED.items()}
    out: dict[str, dict[str, Any]] = {}
    for column in dict.fromkeys(k for n in new for k in n):  # every key, in first-seen order
        source = renamed_from.get(column, column)
        changed, added = 0, 0
        for o, n in zip(old, new, strict=True):
            if column not in n:  # a raw series this row has not got (an out-of-memory row)
                continue
            if column in o:
                changed += o[column] != n[column]
            elif source in o:
                changed += 1
                if o[source] != n[column]:
                    raise RestateError(f"{column}: renamed from {source} with another value")
            else:
                added += 1
                changed += n[column] is not None
        if column not in MEANINGS and changed and source == column:
            raise RestateError(f"{column}: a value changed, but its meaning did not")
        if column in MEANINGS and changed:
            out[column] = {"change": MEANINGS[column], "rows_changed": changed}
        elif source != column and changed:
            out[column] = {"change": f"renamed from {source}", "rows_changed": changed}
        elif added and not changed:
            out[column] = {"change": "added, null", "rows_changed": added}
    return out


def _check_loaded_alike(before: pd.DataFrame, after: pd.DataFrame, run: Path) -> None:
    """The loader must read the restated rows as it read the old ones (it upgrades old rows on
    read): the same columns in the same order, the same values (None and NaN both missing)."""
    try:
        pd.testing.assert_frame_equal(missing_as_none(before), missing_as_none(after))
    except AssertionError as e:
        raise RestateError(f"{run}: the restated rows would load differently: {e}") from e


def missing_as_none(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` as objects with every missing value None: the loader fills a column no row has
    with NaN, and a column that rows hold as null with None; both mean not measured."""
    return frame.astype(object).where(frame.notna(), None)
