"""A run's plan against its rows (issues 41 and 42): the points it planned and did not measure,
and why, so that a run that stopped early says what it did not reach and no verdict calls a
batch "the largest" or a setting "not measured" as if nothing more had been planned.

Why a planned point has no row: the sweep recorded it in growth.json (store.growth_record:
"stopped", the sweep was stopped before it; "over budget", its series' time budget could not
hold it; "emulated", its device only emulates its precision and the suite left it out), or,
where nothing recorded it (a run killed outright), "not reached": the run ended before it.
Points a growing series would have added past its listed batches were never planned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpubench.config.keys import identity, identity_dict, partition_key, same_key
from gpubench.science.partition import grouped, label
from gpubench.store.growth_record import Unmeasured

STOPPED, OVER_BUDGET, NOT_REACHED = "stopped", "over budget", "not reached"
EMULATED = "emulated"  # left out: its device only emulates its precision (skip_emulated)
RUNNING = "running"  # the run that planned it still holds its folder: not measured yet
# a line names this many series at most (the JSON lists every point)
SHOWN = 4


@dataclass(frozen=True)
class Unreached:
    """A point planned and not measured: its identity (`point`, by setting name), `reason`
    (STOPPED, OVER_BUDGET, EMULATED, NOT_REACHED or RUNNING), `detail` (growth.json's words,
    where it said) and `folder` (the run folder that planned it: a stopped one is finished by
    resuming it)."""

    point: dict[str, Any]
    reason: str
    detail: str = ""
    folder: str | None = None

    def why(self) -> str:
        """Why it has no row, in words: 'over its series' time budget: B=64 would take about
        18.7 s, 4.7 s of its series' 12 s left', 'the sweep was stopped before it', 'not reached:
        the run ended before it'."""
        if self.reason == OVER_BUDGET:
            return "over its series' time budget" + (f": {self.detail}" if self.detail else "")
        if self.reason == STOPPED:
            return "the sweep was stopped before it"
        if self.reason == EMULATED:
            return f"left out: {self.detail}"
        if self.reason == RUNNING:
            return "not measured yet: the sweep is still running"
        return "not reached: the run ended before it"

    def to_dict(self, among: Iterable[str] = ()) -> dict[str, Any]:
        return {
            "label": label(self.point, among),
            "identity": self.point,
            "reason": self.reason,
            "why": self.why(),
            "folder": self.folder,
        }


def unreached(
    planned: Iterable[Mapping[str, Any]],
    rows: Iterable[Mapping[str, Any]],
    recorded: Sequence[Unmeasured] = (),
    folder: str | None = None,
    running: bool = False,
) -> list[Unreached]:
    """The points of `planned` (a run's plan, each point's settings by name) and of `recorded`
    (growth.json's unmeasured points) that no row of `rows` measured (a row of any status
    counts: a failed point says what happened), in that order, each once: recorded ones with
    their reason, the rest NOT_REACHED, or RUNNING where the run is `running` (its sweep still
    holds the folder). A recorded point measured since (a resumed sweep) is not unreached."""
    measured = {identity(r) for r in rows}
    out: dict[tuple[Any, ...], Unreached] = {}
    for u in recorded:
        key = identity(u.point)
        if key not in measured and key not in out:
            out[key] = Unreached(identity_dict(u.point), u.reason, u.detail, folder)
    for p in planned:
        key = identity(p)
        if key not in measured and key not in out:
            reason = RUNNING if running else NOT_REACHED
            out[key] = Unreached(identity_dict(p), reason, folder=folder)
    return list(out.values())


def of_partition(items: Iterable[Unreached], row: Mapping[str, Any]) -> list[Unreached]:
    """The points of `items` in `row`'s verdict partition (science.partition)."""
    key = partition_key(dict(row))
    return [u for u in items if partition_key(u.point) == key]


def line(items: Sequence[Unreached], among: Iterable[str] = ()) -> str | None:
    """One line for a verdict: per series and reason its batches and why ('cuda bf16 B=4, 16,
    64 (not reached: the run ended before it)'), the first SHOWN series, then how many more;
    None where nothing planned went unmeasured."""
    groups = grouped(items, lambda u: (same_key(u.point, "batch_size", "seed"), u.reason))
    parts = []
    for group in list(groups.values())[:SHOWN]:
        batches = sorted({int(u.point["batch_size"]) for u in group})
        series = label(group[0].point, among, batch=False)
        first = min(group, key=lambda u: int(u.point["batch_size"]))
        parts.append(f"{series} B={', '.join(map(str, batches))} ({first.why()})")
    if not parts:
        return None
    more = len(groups) - SHOWN
    return "; ".join(parts) + (f"; and {more} more series" if more > 0 else "")


def larger(best: Mapping[str, Any], items: Iterable[Unreached]) -> list[Unreached]:
    """The points of `items` in `best`'s batch-size series at a batch above `best`'s, by
    batch size."""
    key = same_key(best, "batch_size", "seed")
    b = int(best["batch_size"])
    found = [
        u
        for u in items
        if same_key(u.point, "batch_size", "seed") == key and int(u.point["batch_size"]) > b
    ]
    return sorted(found, key=lambda u: int(u.point["batch_size"]))


def resume(items: Iterable[Unreached]) -> str | None:
    """The next experiment where a run stopped or ended before points it planned: finish it
    ('measure what was planned and not reached: gpubench sweep --resume DIR'); None where every
    unmeasured point was left out for its series' budget or is still to come in a running
    sweep, or none names a folder that can be resumed (a merge of folders is resumed in its
    sources)."""
    named = sorted({u.folder for u in items if u.reason in (STOPPED, NOT_REACHED) and u.folder})
    if not named:
        return None
    where = "; ".join(f"gpubench sweep --resume {f}" for f in named)
    return f"measure what was planned and not reached: {where}"
