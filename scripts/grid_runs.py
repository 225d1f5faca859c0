"""What scripts/tune_vs_grid.py and target_vs_grid.py share: the budget shares they read, the
finished grid they reuse (`--grid DIR`), its wall time, and the folder of each share's tune.

A comparison folder holds the grid (DIR/grid-MODEL, unless --grid names one elsewhere) and one
tune per budget share, DIR/tune-MODEL-at-25pct (tune --target: DIR/tune-target-MODEL-at-25pct),
each judged by the same grid's figures (scripts/acceptance*.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpubench.store.results import read_rows

WALL_FILE = "grid_wall.json"  # written beside the grid's rows by the script that ran it
# The file a sweep writes only once every point is measured, by mode (a stopped sweep lacks it).
FINISHED = {"speed": "confirm.json", "convergence": "batch_analysis.json"}
TUNE_FILES = ("tune.json", "tune_target.json", "tune_rows.jsonl")


def budget_shares(text: str) -> list[float]:
    """`0.15,0.25,0.40` as [0.15, 0.25, 0.4]; ValueError naming the value otherwise."""
    shares = []
    for part in text.split(","):
        try:
            share = float(part)
        except ValueError:
            share = -1.0
        if not 0 < share <= 1:
            raise ValueError(
                f"invalid --budget-share {part.strip()!r} in {text!r}; allowed: comma-separated "
                "shares of the grid's time, above 0 and at most 1, e.g. 0.15,0.25,0.40"
            )
        shares.append(share)
    if len(set(shares)) != len(shares):
        raise ValueError(f"invalid --budget-share {text!r}: a share is given twice")
    return shares


def tune_dir(out: Path, model: str, share: float, target: bool = False) -> Path:
    """The folder of the tune given `share` of the grid's time."""
    return out / f"tune-{'target-' if target else ''}{model}-at-{share * 100:g}pct"


def judged_dirs(out: Path, model: str, shares: list[float], target: bool = False) -> list[Path]:
    """The tune folders `--judge-only` judges: each share's that exists, else the one
    DIR/tune-[target-]MODEL of a comparison run before shares were a list (published ones)."""
    found = [d for d in (tune_dir(out, model, s, target) for s in shares) if d.is_dir()]
    return found or [out / f"tune-{'target-' if target else ''}{model}"]


def check_finished_grid(grid: Path, model: str, mode: str) -> None:
    """ValueError (one line) unless `grid` is a finished `mode` sweep of `model` alone: its
    rows all of `model`, and the file such a sweep writes last (FINISHED) present."""
    if not (grid / "results.jsonl").is_file():
        raise ValueError(f"--grid {grid} is not a sweep's folder: it has no results.jsonl")
    tune = [name for name in TUNE_FILES if (grid / name).is_file()]
    if tune:
        raise ValueError(f"--grid {grid} is a tune's folder ({tune[0]}), not a sweep's")
    models = sorted({str(r["model"]) for r in read_rows(grid)})
    if models != [model]:
        raise ValueError(
            f"--grid {grid} is a sweep of {', '.join(models) or 'nothing'}, not {model}"
        )
    if not (grid / FINISHED[mode]).is_file():
        raise ValueError(
            f"--grid {grid} is not a finished {mode} sweep: it has no {FINISHED[mode]}, which "
            "such a sweep writes once every point is measured"
        )


def grid_seconds(grid: Path, given: float | None) -> float:
    """The grid's wall seconds: `given` (--grid-seconds), else what the script that ran the
    grid wrote in its WALL_FILE; ValueError where neither is there."""
    if given is not None:
        return given
    path = grid / WALL_FILE
    if not path.is_file():
        raise ValueError(
            f"--grid {grid} has no {WALL_FILE} (the grid's wall time, which each tune's budget "
            "is a share of); give it with --grid-seconds S"
        )
    return float(json.loads(path.read_text(encoding="utf-8"))["wall_s"])


def write_grid_seconds(grid: Path, wall_s: float, load_before: float) -> None:
    """Note the grid's wall time (and the load around it) for a later --grid reuse."""
    found = {"wall_s": round(wall_s, 1), "load_before": load_before}
    found["load_after"] = round(os.getloadavg()[0], 2)
    (grid / WALL_FILE).write_text(json.dumps(found) + "\n", encoding="utf-8")


def merged_summary(path: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """`summary` with the shares an earlier run wrote to `path` for the same grid kept beside
    its own (a share run again is replaced): a run at 0.25 after one at 0.15,0.40 keeps all
    three."""
    if not path.is_file():
        return summary
    earlier = json.loads(path.read_text(encoding="utf-8"))
    if earlier.get("grid") != summary["grid"]:
        return summary
    mine = {s["share"] for s in summary["shares"]}
    kept = [s for s in earlier.get("shares", []) if s["share"] not in mine]
    shares = sorted([*kept, *summary["shares"]], key=lambda s: s["share"])
    return {**summary, "shares": shares}
