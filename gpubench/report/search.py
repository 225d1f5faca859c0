"""The report's "search" section: how a `tune` run got to its answer, told as a search. From a
run folder's tune.json (the speed search, gpubench.report.search_speed) and tune_target.json
(the time-to-target search, gpubench.report.search_target): how it ended and why, how much of
its space it measured, where its time went, the best so far against wall time, what was pruned
or stopped when, and the answer where it is recorded. Drawn only for runs that hold one of those
files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from gpubench.report import html as H
from gpubench.report import search_speed, search_target
from gpubench.report.runs import Run
from gpubench.science.verdict import ModelVerdict

SPEED_FILE = "tune.json"
TARGET_FILE = "tune_target.json"


def section(runs: Sequence[Run], plots_dir: Path, verdicts: Sequence[ModelVerdict] = ()) -> str:
    """The search section of the runs that hold a search's file ('' where none does). Charts
    are plots/search*.png; an old one this report does not draw is removed. `verdicts` are the
    report's own (its Verdict section's): with a single run, the speed search names its answer
    as they do, so the two sections cannot disagree."""
    for old in plots_dir.glob("search*.png"):
        old.unlink()
    found = list(verdicts) if len(runs) == 1 else []  # several runs' verdicts span them all
    parts: list[str] = []
    for i, r in enumerate(runs):
        suffix = "" if len(runs) == 1 else f"_{i + 1}"
        for name in (SPEED_FILE, TARGET_FILE):
            path = r.path / name
            if not path.is_file():
                continue
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                parts.append(H.note(f"Run {r.name}: {name} cannot be read ({e})."))
                continue
            if not isinstance(record, dict) or not isinstance(record.get("trials"), list):
                parts.append(H.note(f"Run {r.name}: {name} has no list of trials."))
                continue
            if name == SPEED_FILE:
                file = f"search{suffix}.png"
                parts.append(search_speed.section(r.name, record, plots_dir, file, found))
            else:
                file = f"search_target{suffix}.png"
                parts.append(search_target.section(r.name, record, plots_dir, file))
    return "<h2>Search</h2>\n" + "\n".join(parts) if parts else ""
