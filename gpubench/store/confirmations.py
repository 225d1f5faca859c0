"""A run folder's confirm.json: the verdict's interleaved re-measurement of its leaders
(written by run.confirm, read by the verdict)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = "confirm.json"


def read(run_dir: str | Path) -> list[dict[str, Any]] | None:
    """The partitions' records of `run_dir`'s confirm.json; None where it has none."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return list(data["partitions"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{path} is not a confirmation record ({e}); delete it, and the verdict goes by "
            "the rows' intervals"
        ) from None
