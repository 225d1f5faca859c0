"""The append-only results store (RESULTS_FILE: one JSON row per line) and loading run folders
into pandas; the appending and the tail repair that any file of rows shares (store.tune_rows)."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.config.errors import ConfigError
from gpubench.config.registry import SETTINGS, null
from gpubench.store import row_schema
from gpubench.store.row import COLUMNS, RENAMED, SERIES

# A run folder's rows, one JSON object per line: the one place the name is spelled.
RESULTS_FILE = "results.jsonl"

if TYPE_CHECKING:
    import pandas as pd


class ResultStore:
    """The run folder's RESULTS_FILE: one complete line per finished point, flushed and fsynced
    before the next point starts, so a crash loses at most the point in flight."""

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / RESULTS_FILE

    def append(self, row: dict[str, Any]) -> None:
        """`row` appended as append_row says."""
        append_row(self.path, row)

    def check_writable(self) -> None:
        """Before the first point: the folder takes a new file the size of a large row and
        the results file (where it exists) opens for appending, or a ConfigError names the path
        and why (read-only, not a folder, no space), before anything is measured."""
        probe = self.dir / f"{TEMPORARY_PREFIX}write-check.{os.getpid()}.tmp"
        try:
            with open(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb") as f:
                f.write(b"\0" * ROW_ROOM)
                f.flush()
                os.fsync(f.fileno())
            probe.unlink()
            if self.path.is_symlink():
                raise ConfigError(
                    f"{str(self.path)!r} is a symbolic link; a run folder's files are its own, "
                    "so gpubench does not write through one: replace it by the file, or choose "
                    "another --out"
                )
            if self.path.exists():
                with open(self.path, "ab"):
                    pass
        except OSError as e:
            probe.unlink(missing_ok=True)
            where = e.filename if e.filename is not None else self.dir
            raise ConfigError(
                f"cannot write into the run folder: {str(where)!r}: {e.strerror or e}; "
                "make it writable, free space, or choose another --out"
            ) from None

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
        """results.csv: the flat table of the rows (today's columns, no raw series)."""
        return replace_durably(self.dir / "results.csv", csv_text(self.dir))


# Bytes a row may take on disk (a row with its raw step times is some 6 KB): the room the
# check before the first point asks for.
ROW_ROOM = 64 * 1024


def append_row(path: Path, row: dict[str, Any]) -> None:
    """`row` as one line at the end of the file of rows `path`, fsynced; where that fails (a
    full disk, a file made read-only), RowNotWritten, which holds the row, and the file ends
    where it ended before: no part of the row is left in it (a resume would take it for a torn
    line, and a row appended after it for a corrupt middle line)."""
    line = json.dumps(row, allow_nan=False) + "\n"
    try:
        # a symlink planted at the file is refused (ELOOP), never appended through
        with open(path, "ab", buffering=0, opener=_not_through_a_link) as f:
            end = f.tell()
            try:
                data = memoryview(line.encode("utf-8"))
                while data:  # a full disk may take part of it before it refuses
                    data = data[f.write(data) :]
                os.fsync(f.fileno())
            except OSError:
                f.truncate(end)
                raise
    except OSError as e:
        raise RowNotWritten(e, path, line) from e


def _not_through_a_link(path: str, flags: int) -> int:
    """os.open's opener that refuses a symlink at `path` (ELOOP) rather than follow it."""
    return os.open(path, flags | os.O_NOFOLLOW, 0o644)


class RowNotWritten(OSError):
    """A measured row that the results file did not take (its OS error's errno, message and path):
    `line` is the row, kept so that the caller can save it elsewhere and say where."""

    def __init__(self, cause: OSError, path: Path, line: str) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.line = line

    def keep(self) -> Path | None:
        """The row saved in the temporary folder (gpubench-unwritten-PID.jsonl, appended), or
        None where that cannot be written either."""
        import tempfile

        aside = Path(tempfile.gettempdir()) / f"gpubench-unwritten-{os.getpid()}.jsonl"
        try:
            with open(aside, "a", encoding="utf-8") as f:
                f.write(self.line)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            return None
        return aside


# The temporary files gpubench writes in a folder are named TEMPORARY_PREFIX + ... + ".tmp": a
# run's clean-up removes those and no other file (a user's analysis.tmp is theirs).
TEMPORARY_PREFIX = ".gpubench-"
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def temporaries(folder: Path) -> list[Path]:
    """The temporary files gpubench left in `folder` (a run killed while replacing a file)."""
    return sorted(folder.glob(f"{TEMPORARY_PREFIX}*.tmp"))


def replace_durably(path: Path, text: str) -> Path:
    """Replace `path` by `text` atomically: written to a new temporary file beside it (created
    exclusively: a link planted under its name is never followed) and fsynced, renamed into
    place (a symlink at `path` is replaced, not written through), and the rename fsynced in the
    folder."""
    fd, name = tempfile.mkstemp(
        prefix=f"{TEMPORARY_PREFIX}{path.name}.", suffix=".tmp", dir=path.parent
    )
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as an ordinary new file (mkstemp's is private)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half file behind
        raise
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


class ResultsError(ConfigError):
    """A results folder or file that cannot be read (a user's input: exit status 2, one line)."""


# The keys without which a line is not a row: what names its point everywhere (explain, compare,
# merge, a resume's skip list). A setting added later may be missing (upgraded gives its default);
# these were in every row gpubench ever wrote.
REQUIRED = ("model", "model_size", "device", "precision", "optimizer", "batch_size")
# Where a resume moves a last line that is not a row: kept for the user, never deleted.
REJECTED_SUFFIX = ".rejected"


def parse_row(line: str) -> dict[str, Any] | str:
    """`line` (one line of a file of rows) as its row, or why it is not one: not JSON, not a
    JSON object, or an object without a key of REQUIRED. The one rule of what a row is, for
    the reader and a resume's repair alike."""
    try:
        row = json.loads(line)
    except ValueError as e:
        return f"not JSON: {e}"
    if not isinstance(row, dict):
        return f"not a JSON object but {type(row).__name__}"
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        return f"a JSON object without {', '.join(missing)}"
    return row


def _lines(data: bytes) -> list[str]:
    """`data`'s lines as the reader and the repair both split them: on newlines only (a JSON
    row holds no raw line break of another kind), each decoded on its own."""
    return [b.decode("utf-8", errors="replace") for b in data.split(b"\n")]


def checked_lines(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], int | None, str]:
    """The rows of the results file `path` (each with its line number, from 1), and where its
    last non-blank line is not a row, the byte offset that line starts at and why (else None
    and ""). A line that is not a row before the last is a ResultsError naming file and line:
    rows were written after it, so it is no crash in mid-write, and nothing may be appended
    after it."""
    data = path.read_bytes()
    lines = _lines(data)
    filled = [i for i, line in enumerate(lines) if line.strip()]
    rows: list[tuple[int, dict[str, Any]]] = []
    for i in filled:
        parsed = parse_row(lines[i])
        if isinstance(parsed, dict):
            rows.append((i + 1, parsed))
        elif i == filled[-1]:
            offset = sum(len(b) + 1 for b in data.split(b"\n")[:i])
            return rows, offset, parsed
        else:
            raise ResultsError(f"{path}, line {i + 1}: corrupt row ({parsed})")
    return rows, None, ""


def read_rows(run_dir: str | Path, skip_odd: bool = False) -> list[dict[str, Any]]:
    """Every row of `run_dir`'s RESULTS_FILE (rows_in); a folder without one is a ResultsError."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.is_file():
        raise ResultsError(f"no {RESULTS_FILE} in {str(run_dir)!r}; expected a gpubench run folder")
    return rows_in(path, skip_odd)


def rows_in(path: Path, skip_odd: bool = False) -> list[dict[str, Any]]:
    """Every row of the file of rows `path` (parse_row), each field of each checked against the
    row's schema (store.row_schema). A last line that is not a row (a crash mid-write) is
    skipped with a warning; one elsewhere is a ResultsError naming file and line. A valid last
    row without its final newline is a row. A row with a field of the wrong type or range is a
    ResultsError naming the file, its line and the field (what a resume, which appends to the
    file, must not read past); with `skip_odd` (a reader: explain, report, compare) it is left
    out with a warning that says the same, and the other rows are read."""
    rows, torn, why = checked_lines(path)
    if torn is not None:
        warnings.warn(f"{path}: skipping its last line, not a row ({why})", stacklevel=3)
    kept = []
    for line, row in rows:
        odd = row_schema.problem(row)
        if odd is None:
            kept.append(row)
            continue
        where = f"{path}, line {line}: {odd}"
        if not skip_odd:
            raise ResultsError(
                f"{where}; correct the line or remove it (its point is measured again)"
            )
        warnings.warn(f"{where}; that row is left out", stacklevel=3)
    return kept


def repair_tail(path: Path) -> None:
    """Make `path` (a results file) safe to append to, its rows untouched: a last line that is
    not a row (checked_lines) is moved to `path`.rejected (appended, fsynced, never deleted)
    with one warning, and a last row without its final newline gets one. A line that is not a
    row before the last is a ResultsError (checked_lines): nothing is appended after it."""
    if not path.is_file():
        return
    _, torn, why = checked_lines(path)
    data = path.read_bytes()
    if torn is not None:
        aside = path.with_name(path.name + REJECTED_SUFFIX)
        with open(aside, "ab") as f:
            f.write(data[torn:] if data.endswith(b"\n") else data[torn:] + b"\n")
            f.flush()
            os.fsync(f.fileno())
        with open(path, "r+b") as f:
            f.truncate(torn)
            f.flush()
            os.fsync(f.fileno())
        warnings.warn(
            f"{path}: moved its last line, not a row ({why}; {len(data) - torn} bytes, left by "
            f"an interrupted run), to {aside}; its point is measured again",
            stacklevel=2,
        )
        data = data[:torn]
    if data and not data.endswith(b"\n"):
        with open(path, "ab") as f:
            f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())


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
    import pandas as pd  # not at import: a worker and the records' readers need none

    rows = [upgraded(r) for r in read_rows(run_dir, skip_odd=True)]
    frame = pd.DataFrame(rows)
    # The schema's missing columns are added at once: one at a time fragments the frame (and
    # pandas warns about it on every report).
    missing = [c for c in COLUMNS if c not in frame]
    frame = pd.concat([frame, pd.DataFrame(None, index=frame.index, columns=missing)], axis=1)
    extra = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + extra]


def csv_text(run_dir: str | Path) -> str:
    """The text of `run_dir`'s results.csv as its rows give it today: the loader's
    columns (schema first) without the raw series, which live only in the JSONL."""
    frame = load_results(run_dir)
    return str(frame.drop(columns=[c for c in SERIES if c in frame]).to_csv(index=False))
