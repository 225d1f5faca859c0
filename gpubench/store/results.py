"""The append-only results store (results.jsonl) and loading run folders into pandas."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.config.registry import SETTINGS, null
from gpubench.store.row import COLUMNS, RENAMED, SERIES


class ResultStore:
    """The run folder's results.jsonl: one complete line per finished point, flushed and fsynced
    before the next point starts, so a crash loses at most the point in flight."""

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "results.jsonl"

    def append(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def write_json(self, name: str, obj: Any) -> Path:
        """Write `name` whole or not at all, and durably: suite.json and env.json are what make
        the folder resumable, so a crash must leave either the old file or the new one."""
        return replace_durably(self.dir / name, json.dumps(obj, indent=2, default=str) + "\n")

    def drop(self, statuses: tuple[str, ...]) -> int:
        """Remove the rows whose status is in `statuses` (so their points run again on a
        resume); returns how many were removed. The file is replaced whole and durably."""
        rows = read_rows(self.dir) if self.path.is_file() else []
        kept = [r for r in rows if r.get("status") not in statuses]
        if len(kept) < len(rows):
            text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in kept)
            replace_durably(self.path, text)
        return len(rows) - len(kept)

    def write_csv(self) -> Path:
        """results.csv: the flat table of results.jsonl (today's columns, no raw series)."""
        return replace_durably(self.dir / "results.csv", csv_text(self.dir))


def replace_durably(path: Path, text: str) -> Path:
    """Replace `path` by `text` atomically: written to a temporary file and fsynced, renamed
    into place, and the rename fsynced in the folder."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


class ResultsError(ValueError):
    """A results folder or file that cannot be read (a user's input: exit status 2)."""


def read_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete row of `run_dir`'s results.jsonl. A torn last line (a crash mid-write) is
    skipped with a warning; a corrupt line elsewhere is an error naming file and line."""
    path = Path(run_dir) / "results.jsonl"
    if not path.is_file():
        raise ResultsError(f"no results.jsonl in {str(run_dir)!r}; expected a gpubench run folder")
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    rows = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            if i == len(lines):
                warnings.warn(f"{path}: skipping a torn last line {i}", stacklevel=2)
                continue
            raise ResultsError(f"{path}, line {i}: corrupt row ({e})") from e
        rows.append(row)
    return rows


def upgraded(row: dict[str, Any]) -> dict[str, Any]:
    """`row` in today's schema, the one place every change of a column is undone (on read): an
    old row's `mfu` (then the matmul roof fraction) moves to
    `matmul_roof_fraction` and `mfu` becomes its `tflops` / `datasheet_peak_tflops` (null where
    unknown); a renamed column (row.RENAMED) takes its new name; a setting the row was written
    before (its column missing, or null) is at its default (config.registry), so an old row
    and a new one of the same point are one point everywhere. Nothing else changes."""
    if "matmul_roof_fraction" not in row and row.get("mfu") is not None:
        tflops, sheet = row.get("tflops"), row.get("datasheet_peak_tflops")
        mfu = tflops / sheet if tflops is not None and sheet else None
        row = {**row, "matmul_roof_fraction": row["mfu"], "mfu": mfu}
    if any(old in row for old in RENAMED):
        row = {RENAMED.get(k, k): v for k, v in row.items()}
    unset = [s for s in SETTINGS if s.default is not None and null(row.get(s.name))]
    return {**row, **{s.name: s.default for s in unset}} if unset else row


def load_results(run_dir: str | Path) -> pd.DataFrame:
    """A run folder's rows as a DataFrame with the schema's columns first."""
    rows = [upgraded(r) for r in read_rows(run_dir)]
    frame = pd.DataFrame(rows)
    # The schema's missing columns are added at once: one at a time fragments the frame (and
    # pandas warns about it on every report).
    missing = [c for c in COLUMNS if c not in frame]
    frame = pd.concat([frame, pd.DataFrame(None, index=frame.index, columns=missing)], axis=1)
    extra = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + extra]


def csv_text(run_dir: str | Path) -> str:
    """The text of `run_dir`'s results.csv as its results.jsonl gives it today: the loader's
    columns (schema first) without the raw series, which live only in the JSONL."""
    frame = load_results(run_dir)
    return str(frame.drop(columns=[c for c in SERIES if c in frame]).to_csv(index=False))
