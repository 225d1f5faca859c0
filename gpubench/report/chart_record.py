"""The report's record of the charts it drew in a plots/ folder (plots/gpubench-charts.json), so
that the next report there removes only charts an earlier report of gpubench drew and it does
not draw again: a PNG gpubench did not draw (a user's plots/throughput.png, search_old.png) is
never touched, and a plots/ folder without the record has nothing removed.

```
{"charts": [file name, ...]}
```
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable
from pathlib import Path

from gpubench.store.results import replace_durably
from gpubench.store.typed_json import RecordError, value

FILE = "gpubench-charts.json"
# A chart's file name as the report names them: a plain name in plots/, never a path
_CHART = re.compile(r"[A-Za-z0-9_]+\.png")


def drawn_before(plots_dir: Path) -> list[str]:
    """The charts the record in `plots_dir` says an earlier report drew there ([] where it has
    none). A record that cannot be read is warned about in one line and removes nothing; a
    name in it that is not a plain chart file name (a path, another kind of file) is left out."""
    path = plots_dir / FILE
    if not path.is_file():
        return []
    try:
        found = value(path)
    except RecordError as e:
        warnings.warn(f"{e}; no chart of an earlier report removed", stacklevel=2)
        return []
    charts = found.get("charts") if isinstance(found, dict) else None
    if not isinstance(charts, list):
        warnings.warn(
            f'{path} is not a chart record (expected {{"charts": [file name, ...]}}); no chart '
            "of an earlier report removed",
            stacklevel=2,
        )
        return []
    return [c for c in charts if isinstance(c, str) and _CHART.fullmatch(c)]


def replace(plots_dir: Path, drawn: Iterable[str]) -> list[str]:
    """Record `drawn` (the charts this report wrote in `plots_dir`) and remove each chart an
    earlier report recorded there that this one did not draw; returns those removed. Nothing
    is written where there is no plots/ folder (no chart drawn now or before)."""
    now = sorted(set(drawn))
    removed = [c for c in drawn_before(plots_dir) if c not in now]
    for name in removed:
        (plots_dir / name).unlink(missing_ok=True)
    if plots_dir.is_dir():
        replace_durably(plots_dir / FILE, json.dumps({"charts": now}, indent=1) + "\n")
    return removed
