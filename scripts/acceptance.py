"""Whether `tune` found the grid's answer, judged by the grid's own measurements (issue 29): a
tune's own figure for its pick is biased high by its selection, so the pick is judged by the
grid's figure for it against the grid's best, and is *within the margin* where that ratio is at
least 1 - margin. It *agrees* where it is the grid's winner or inside the grid's tie; a tie of
more than `max_tie` configurations answered nothing ("the grid could not tell").

Issue 42 decided the acceptance instead: tune's pick and the grid's, re-measured interleaved in
fresh worker processes after both runs, are judged head to head (`head_to_head`): accepted where
tune's pick is not slower than the grid's by more than the margin (the interval's upper bound
of tune/grid at or above 1 - margin), or is the same configuration; the grid-against-grid
agreement is reported beside it as the noise floor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from gpubench.config.keys import configuration as config_key
from gpubench.config.keys import partition_key
from gpubench.science import standing
from gpubench.science.leaders import (
    CONFIDENCE,
    MARGIN,  # the verdict's practical difference, one figure
    MIN_ROUNDS,
)
from gpubench.science.partition import heading, label, varying
from gpubench.store import confirmations
from gpubench.store.results import RESULTS_FILE, read_rows

MAX_TIE = 3  # a grid tie of more configurations than this names no answer

SAME = "the grid's winner"
TIED = "inside the grid's tie"
UNTOLD = "the grid could not tell"
DIFFERENT = "different"
NO_ANSWER = "tune named no answer"  # it measured nothing (its budget ended in its set-up)
BOTH_TIED = "a tie, each leader inside the other's"  # two runs compared (agreement())
AGREEING = (SAME, TIED, BOTH_TIED)


@dataclass(frozen=True)
class Answer:
    """A run's lead row for one partition, and the rows tied with it (empty: a winner)."""

    best: dict[str, Any]
    tied: tuple[dict[str, Any], ...]

    @property
    def members(self) -> list[dict[str, Any]]:
        return [self.best, *self.tied]


def answer(rows: list[dict[str, Any]], confirmation: dict[str, Any] | None) -> Answer:
    """The verdict's answer for one partition's `rows` and `confirmation` record
    (science.standing.lead). Raises ValueError where no row ran."""
    pool = standing.pool(rows)
    if not pool:
        raise ValueError("no row of the partition ran (status ok with a samples/s figure)")
    lead = standing.lead(pool, confirmation, varying(pool))
    by_key = {config_key(r): r for r in pool}
    tied = tuple(by_key[config_key(t["identity"])] for t in lead.ties)
    return Answer(lead.best, tied)


@dataclass(frozen=True)
class Judgement:
    """Tune's pick against the grid for one partition. `ratio`: the grid's figure for the pick
    over `grid_best`'s, both from `source` (None: the grid never ran it); `grid_answer`: the
    labels of the grid's answer, leader first."""

    heading: str
    pick: str
    grid_best: str
    ratio: float | None
    source: str
    grid_answer: tuple[str, ...]
    agreement: str
    margin: float

    @property
    def within(self) -> bool:
        """The pick is within the margin of the grid's best, by the grid's figures."""
        return self.ratio is not None and self.ratio >= 1 - self.margin

    @property
    def agrees(self) -> bool:
        return self.agreement in AGREEING

    def line(self) -> str:
        """One line: the pick, its ratio to the grid's best by the grid's figures, the agreement."""
        said = (
            "nothing to judge"
            if self.agreement == NO_ANSWER
            else "the grid never ran it"
            if self.ratio is None
            else f"x{self.ratio:.3f} the grid's best ({self.grid_best}) by {self.source}, "
            f"{'within' if self.within else 'NOT within'} {self.margin:.0%}"
        )
        grid = " and ".join(self.grid_answer)
        tie = f"a tie of {len(self.grid_answer)}: " if len(self.grid_answer) > 1 else ""
        return f"{self.heading}: tune's pick {self.pick}: {said}; {self.agreement} ({tie}{grid})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "within": self.within, "agrees": self.agrees}


ROUNDS = "the grid's confirmation rounds"
ROWS = "the grid's rows"


def judge(
    grid_rows: list[dict[str, Any]],
    grid_record: dict[str, Any] | None,
    pick: dict[str, Any],
    margin: float = MARGIN,
    max_tie: int = MAX_TIE,
) -> Judgement:
    """Judge `pick` (a row or identity) by one partition's `grid_rows` and confirmation record:
    the ratio in the confirmation's rounds where they re-measured the pick beside the leader
    (paired: the grid's best measurement of both), else the pick's row over the fastest row
    (a busy row too: it still measured the configuration)."""
    if not 0 <= margin < 1:
        raise ValueError(f"margin {margin!r}: must be a fraction in [0, 1)")
    if max_tie < 1:
        raise ValueError(f"max_tie {max_tie!r}: must be at least 1")
    grid = answer(grid_rows, grid_record)
    ran = [r for r in grid_rows if standing.ran(r)]
    among = varying(ran)
    want = config_key(pick)
    keys = [config_key(r) for r in grid.members]
    if want == keys[0] and not grid.tied:
        agreement = SAME
    elif len(keys) > max_tie:
        agreement = UNTOLD
    elif want in keys:
        agreement = TIED
    else:
        agreement = DIFFERENT
    rounds = _in_rounds(grid_record, want)
    ratio: float | None
    if rounds is not None:
        ratio, source = rounds[0], ROUNDS
        best = next(r for r in ran if config_key(r) == rounds[1])
    else:
        best = max(ran, key=lambda r: float(r["samples_per_s"]))
        mine = [r for r in ran if config_key(r) == want]
        # the last row of a configuration the grid measured again (a resumed grid's)
        ratio = float(mine[-1]["samples_per_s"]) / float(best["samples_per_s"]) if mine else None
        busy = [r for r in [best, *mine[-1:]] if r.get("busy") is True]
        source = ROWS + (" (busy: measured beside other load)" if busy else "")
    return Judgement(
        heading(grid.best),
        label(pick, among),
        label(best, among),
        ratio,
        source,
        tuple(label(r, among) for r in grid.members),
        agreement,
        margin,
    )


def _in_rounds(
    record: dict[str, Any] | None, want: tuple[Any, ...]
) -> tuple[float, tuple[Any, ...]] | None:
    """The pick's median samples/s over the leader's in the grid's confirmation rounds, and the
    leader's key (None where they did not re-measure the pick)."""
    if record is None or not record.get("decision"):
        return None
    keys = [config_key(c) for c in record["candidates"]]
    if want not in keys:
        return None
    medians = record["decision"]["median_samples_per_s"]
    lead = int(record["decision"]["leader"])
    return float(medians[keys.index(want)]) / float(medians[lead]), keys[lead]


def partitions(run_dir: Path) -> dict[tuple[Any, ...], tuple[list[dict[str, Any]], Any]]:
    """A speed run folder's rows per partition, each with its confirmation record (or None)."""
    found = {partition_key(c["fixed"]): c for c in confirmations.partitions(run_dir) or []}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in read_rows(run_dir):
        groups.setdefault(partition_key(r), []).append(r)
    return {k: (rows, found.get(k)) for k, rows in groups.items() if standing.pool(rows)}


def judge_runs(
    grid_dir: Path, tune_dir: Path, margin: float = MARGIN, max_tie: int = MAX_TIE
) -> list[Judgement]:
    """Tune's pick in `tune_dir` judged by the grid in `grid_dir`, per partition the tune ran
    (per partition of the grid, each NO_ANSWER, where the tune wrote no rows: it measured
    nothing); raises ValueError for a partition the grid never ran."""
    grid = partitions(grid_dir)
    if not (tune_dir / RESULTS_FILE).is_file():
        return [_unanswered(*g, margin) for g in grid.values()]
    out = []
    for key, (rows, record) in partitions(tune_dir).items():
        if key not in grid:
            raise ValueError(f"{grid_dir} has no rows of {heading(rows[0])}, which {tune_dir} ran")
        grid_rows, grid_record = grid[key]
        pick = answer(rows, record).best
        out.append(judge(grid_rows, grid_record, pick, margin, max_tie))
    return out


def _unanswered(
    grid_rows: list[dict[str, Any]], grid_record: dict[str, Any] | None, margin: float
) -> Judgement:
    """A partition tune named no answer for, beside the grid's answer."""
    grid = answer(grid_rows, grid_record)
    among = varying([r for r in grid_rows if standing.ran(r)])
    names = tuple(label(r, among) for r in grid.members)
    return Judgement(heading(grid.best), "none", names[0], None, ROWS, names, NO_ANSWER, margin)


def agreement(first: Answer, second: Answer, max_tie: int = MAX_TIE) -> str:
    """Whether two runs' answers agree: SAME (one winner), UNTOLD (a tie of more than
    `max_tie`), BOTH_TIED (each leader inside the other's answer) or DIFFERENT."""
    a, b = ([config_key(r) for r in x.members] for x in (first, second))
    if len(a) == len(b) == 1 and a == b:
        return SAME
    if max(len(a), len(b)) > max_tie:
        return UNTOLD
    return BOTH_TIED if a[0] in b and b[0] in a else DIFFERENT


def compare_runs(
    first_dir: Path, second_dir: Path, max_tie: int = MAX_TIE
) -> list[tuple[str, str]]:
    """Per partition of `first_dir`: its agreement with `second_dir`'s answer, and a line."""
    second = partitions(second_dir)
    out = []
    for key, (rows, record) in partitions(first_dir).items():
        mine = answer(rows, record)
        if key not in second:
            out.append((DIFFERENT, f"{heading(mine.best)}: {DIFFERENT}: only in {first_dir}"))
            continue
        theirs = answer(*second[key])
        said = agreement(mine, theirs, max_tie)
        names = [_named(x) for x in (mine, theirs)]
        out.append((said, f"{heading(mine.best)}: {said}: {names[0]} | {names[1]}"))
    return out


def _named(a: Answer) -> str:
    among = varying(a.members) if a.tied else []
    return label(a.best, among) + (f" (a tie of {len(a.members)})" if a.tied else "")


@dataclass(frozen=True)
class HeadToHead:
    """Tune's pick against the grid's pick re-measured interleaved (issue 42): `ratio`, the
    median over rounds of tune's samples/s over the grid's in the same round, and its 95%
    interval (`low`, `high`: the sign test's order statistics); `same`: one configuration
    (nothing to measure); `floor`: the grid-against-grid agreement beside it (the share of
    grids of one space whose picks were within the margin of each other), None where unknown."""

    rounds: int
    ratio: float
    low: float
    high: float
    same: bool
    margin: float
    floor: float | None = None

    @property
    def accepted(self) -> bool:
        """Tune's pick is the grid's, or not slower than it by more than the margin: the
        interval's upper bound of tune over grid at or above 1 - margin."""
        return self.same or self.high >= 1 - self.margin

    def line(self) -> str:
        """'tune/grid x0.991 (95% CI 0.975-1.006) over 6 interleaved rounds: accepted ...'."""
        if self.same:
            said = "the same configuration as the grid's pick: accepted"
        else:
            verdict = "accepted" if self.accepted else "NOT accepted"
            said = (
                f"tune/grid x{self.ratio:.3f} (95% CI {self.low:.3f}-{self.high:.3f}) over "
                f"{self.rounds} interleaved rounds: {verdict} at the {self.margin:.0%} margin"
            )
        if self.floor is not None:
            said += f"; grid against grid agreed {self.floor:.0%} of the time (the noise floor)"
        return said


def head_to_head(
    tune_samples: list[float],
    grid_samples: list[float],
    same: bool = False,
    margin: float = MARGIN,
    floor: float | None = None,
) -> HeadToHead:
    """Judge tune's pick against the grid's from interleaved rounds in fresh worker processes:
    `tune_samples[r]` and `grid_samples[r]`, each pick's samples/s in round r (the two share a
    round's machine, so their ratio pairs them). Needs MIN_ROUNDS rounds of finite, positive
    figures (ValueError otherwise); `same`: the two picks are one configuration."""
    t, g = np.asarray(tune_samples, dtype=float), np.asarray(grid_samples, dtype=float)
    if t.shape != g.shape or t.ndim != 1 or len(t) < MIN_ROUNDS:
        raise ValueError(
            f"need {MIN_ROUNDS} or more paired rounds of each pick, got {t.shape} and {g.shape}"
        )
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(g))) or np.any(t <= 0) or np.any(g <= 0):
        raise ValueError("samples/s must be finite and positive")
    ratios = t / g
    ci = stats.quantile_test(ratios, q=1.0, p=0.5).confidence_interval(CONFIDENCE)
    return HeadToHead(
        len(t), float(np.median(ratios)), float(ci.low), float(ci.high), same, margin, floor
    )
