"""Compare two runs point by point: step time, throughput and peak memory, with a Mann-Whitney U
test on the raw step times so that noise within a run is not called a regression, and the
machines' drift between the runs (report.drift) so that drift is not either: a change no larger
than the drift is "within drift" (cannot tell from two stored runs), never a regression."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import mannwhitneyu

from gpubench.config.keys import identity, identity_dict
from gpubench.config.labels import label
from gpubench.report.analysis import MEMORY_COLUMNS, real
from gpubench.report.drift import Drift, between
from gpubench.store.benchjson import rows_from_benchmark_json
from gpubench.store.results import RESULTS_FILE, ResultsError, load_results
from gpubench.store.row import IDENTITY
from gpubench.store.wording import cell, missing, plural, printable

THRESHOLD_PCT = 5.0  # a change smaller than this is not a regression, however significant
ALPHA = 0.01  # significance level of the two-sided Mann-Whitney U test
MIN_SAMPLES = 5  # fewer raw step times than this on either side cannot show significance
# What tells two rows apart besides the result schema's identity: a pytest-benchmark file's full
# benchmark name (its parameters included), so that two benchmarks alike in every gpubench
# identity column are never taken for one.
EXTRA_IDENTITY = ("benchmark",)


def point_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A row's point: its identity (config.registry; a column an old row lacks, or holds null,
    at the setting's default) and its EXTRA_IDENTITY."""
    return (*identity(row), *(_identity_value(row.get(c)) for c in EXTRA_IDENTITY))


def point_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """point_key's fields by name (an EXTRA_IDENTITY column only where the row has it)."""
    return {**identity_dict(row), **{c: row[c] for c in EXTRA_IDENTITY if c in row}}


def load_input(path: str | Path) -> tuple[pd.DataFrame, int]:
    """One side of a comparison as rows: the identity columns, `status`, `step_time_s`,
    `samples_per_s`, the peak-memory columns, and raw `step_times_s` (a list of seconds, or
    None). Accepts a run folder, its RESULTS_FILE, or a pytest-benchmark JSON file (from
    --benchmark-json or --benchmark-autosave; raw times where saved with --benchmark-save-data).
    Returns the rows, one per point, and how many earlier rows of a point measured twice were
    set aside for its latest row."""
    path = Path(path)
    if path.is_file() and path.suffix == ".json":
        frame = pd.DataFrame(rows_from_benchmark_json(path))
        for col in (*IDENTITY, "status", "step_time_s", "samples_per_s"):
            if col not in frame:
                frame[col] = None
    else:
        folder = path.parent if path.is_file() and path.name == RESULTS_FILE else path
        if not folder.is_dir():
            raise ResultsError(
                f"{str(path)!r} is not a run folder, a {RESULTS_FILE} or a pytest-benchmark "
                "JSON file"
            )
        frame = load_results(folder)
    if "step_times_s" not in frame:
        frame["step_times_s"] = None
    # A point measured twice (a resumed run) counts once: its latest row (the count is told).
    key = pd.Series([point_key(r) for r in frame.to_dict("records")], index=frame.index)
    latest = ~key.duplicated(keep="last")
    return frame[latest].reset_index(drop=True), int((~latest).sum())


@dataclass(frozen=True)
class PointChange:
    """One point in both runs. Changes are percent of the base value (positive = larger)."""

    point: dict[str, Any]
    base_status: str
    new_status: str
    base_step_time_s: float | None = None
    new_step_time_s: float | None = None
    step_time_change_pct: float | None = None
    throughput_change_pct: float | None = None
    memory_column: str | None = None
    memory_change_pct: float | None = None
    base_samples: int = 0
    new_samples: int = 0
    p_value: float | None = None
    verdict: str = "unchanged"  # regression, improvement, unchanged, not significant,
    # too few samples, within drift (no larger than the machines' drift between the runs),
    # broken (ran in base, not in new), fixed

    @property
    def label(self) -> str:
        return point_label(self.point)

    @property
    def regressed(self) -> bool:
        return self.verdict in ("regression", "broken")


@dataclass
class Comparison:
    base: str
    new: str
    threshold_pct: float
    alpha: float
    points: list[PointChange] = field(default_factory=list)
    only_in_base: list[dict[str, Any]] = field(default_factory=list)
    only_in_new: list[dict[str, Any]] = field(default_factory=list)
    # earlier rows of points measured twice, set aside for each point's latest row
    replaced_in_base: int = 0
    replaced_in_new: int = 0
    # how far the machine itself moved between the runs (None: not read; see compare)
    drift: Drift | None = None

    @property
    def regressions(self) -> list[PointChange]:
        return [p for p in self.points if p.regressed]

    def exit_code(self) -> int:
        """1 when a significant regression beyond the threshold (or a broken point) exists, or
        when no point was in both runs: a gate never passes on nothing."""
        return 1 if self.regressions or not self.points else 0


def point_label(p: Mapping[str, Any]) -> str:
    """A point's identity in a line (config.labels), with its benchmark's name where that is
    not the model's (so that two points never read alike)."""
    text = label(p, whole=True)
    bench = p.get("benchmark")
    return text if missing(bench) or bench == p["model"] else f"{text} benchmark={bench}"


def _pct(base: Any, new: Any) -> float | None:
    if not real(base) or not real(new) or base == 0:
        return None
    return (float(new) - float(base)) / float(base) * 100


def _samples(value: Any) -> list[float]:
    return [float(v) for v in value if real(v)] if isinstance(value, list) else []


def compare_point(
    base: dict[str, Any],
    new: dict[str, Any],
    threshold_pct: float,
    alpha: float,
    drift_factor: float | None = None,
) -> PointChange:
    """The change from `base` to `new` (two rows of the same point) and its verdict: beyond
    `threshold_pct` and significant (Mann-Whitney U p < `alpha`) it is a regression or an
    improvement, unless its median step times are no more than `drift_factor` (the machines'
    drift, a factor >= 1; None: unknown) apart, which is "within drift"."""
    point = point_fields(base)
    b_status, n_status = str(base["status"]), str(new["status"])
    if b_status != "ok" or n_status != "ok":
        verdict = "broken" if b_status == "ok" else "fixed" if n_status == "ok" else "unchanged"
        return PointChange(point, b_status, n_status, verdict=verdict)
    # the point's own memory, first measured on both sides: never NVML's device-wide use,
    # which counts every process on the card (gpubench's parent among them, issue 28)
    mem = next((c for c in MEMORY_COLUMNS if real(base.get(c)) and real(new.get(c))), None)
    xs, ys = _samples(base.get("step_times_s")), _samples(new.get("step_times_s"))
    change = _pct(base["step_time_s"], new["step_time_s"])
    p_value = None
    if len(xs) >= MIN_SAMPLES and len(ys) >= MIN_SAMPLES:
        p_value = float(mannwhitneyu(ys, xs, alternative="two-sided").pvalue)
    beyond = change is not None and abs(change) > threshold_pct
    b_time, n_time = float(base["step_time_s"]), float(new["step_time_s"])
    drifted = (
        drift_factor is not None
        and b_time > 0
        and n_time > 0
        and max(n_time / b_time, b_time / n_time) <= drift_factor
    )
    if not beyond:
        verdict = "unchanged"
    elif drifted:
        verdict = "within drift"
    elif p_value is None:
        verdict = "too few samples"
    elif p_value >= alpha:
        verdict = "not significant"
    else:
        verdict = "regression" if change is not None and change > 0 else "improvement"
    return PointChange(
        point,
        b_status,
        n_status,
        base_step_time_s=b_time,
        new_step_time_s=n_time,
        step_time_change_pct=change,
        throughput_change_pct=_pct(base.get("samples_per_s"), new.get("samples_per_s")),
        memory_column=mem,
        memory_change_pct=_pct(base.get(mem), new.get(mem)) if mem else None,
        base_samples=len(xs),
        new_samples=len(ys),
        p_value=p_value,
        verdict=verdict,
    )


def compare(
    base: str | Path,
    new: str | Path,
    threshold_pct: float = THRESHOLD_PCT,
    alpha: float = ALPHA,
) -> Comparison:
    """Match the points of `base` and `new` on their whole identity and compare each pair
    (compare_point, against the machines' drift between them: report.drift); the points of one
    side that the other lacks are listed, never dropped."""
    (b, b_replaced), (n, n_replaced) = load_input(base), load_input(new)
    drift = between(base, new)
    b_rows = {point_key(r): r for r in b.to_dict("records")}
    n_rows = {point_key(r): r for r in n.to_dict("records")}
    out = Comparison(str(base), str(new), threshold_pct, alpha, drift=drift)
    out.replaced_in_base, out.replaced_in_new = b_replaced, n_replaced
    for k, row in b_rows.items():
        if k in n_rows:
            point = compare_point(row, n_rows[k], threshold_pct, alpha, drift.factor)
            out.points.append(point)
        else:
            out.only_in_base.append(point_fields(row))
    out.only_in_new = [point_fields(r) for k, r in n_rows.items() if k not in b_rows]
    return out


def _identity_value(value: Any) -> str:
    """An identity value as text; 16.0 (a column pandas made float) is the same point as 16,
    and a missing value (None, or NaN where pandas made one) is one value."""
    if missing(value):
        return "None"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _pct_cell(change: float | None) -> str:
    return "" if change is None else f"{change:+.1f}%"


def _cells(p: PointChange) -> list[str]:
    status = p.base_status if p.base_status == p.new_status else f"{p.base_status}→{p.new_status}"
    return [
        p.label,
        status,
        cell(p.base_step_time_s, ".3f", 1e3),
        cell(p.new_step_time_s, ".3f", 1e3),
        *map(_pct_cell, (p.step_time_change_pct, p.throughput_change_pct, p.memory_change_pct)),
        "" if p.p_value is None else f"{p.p_value:.2g}",
        p.verdict,
    ]


HEADERS = ["point", "status", "base ms", "new ms", "time", "throughput", "memory", "p", "verdict"]


def summary(c: Comparison) -> str:
    n = len(c.regressions)
    head = plural(n, "regression") if n else "no regression"
    if not c.points:
        head = "FAILED: no point is in both runs, nothing was compared"
    text = (
        f"{head} among {plural(len(c.points), 'matched point')} (threshold "
        f"{c.threshold_pct:g}% on the median step time, Mann-Whitney U p < {c.alpha:g}); "
        f"{len(c.only_in_base)} only in base, {len(c.only_in_new)} only in new"
    )
    for side, n in (("base", c.replaced_in_base), ("new", c.replaced_in_new)):
        if n:
            text += f"; {plural(n, 'earlier row')} of points measured twice in {side} set "
            text += "aside for the latest"
    if c.drift is not None:
        text += f"\n{c.drift.describe()}"
        drifted = sum(p.verdict == "within drift" for p in c.points)
        if drifted:
            text += (
                f"\n{plural(drifted, 'change')} within the machines' drift of "
                f"{c.drift.pct:.0f}%: cannot tell from two stored runs; measure both versions "
                "interleaved in one job"
            )
    return text


def unmatched_lines(c: Comparison) -> list[str]:
    """One line per point that only one side has."""
    return [f"only in base: {point_label(p)}" for p in c.only_in_base] + [
        f"only in new:  {point_label(p)}" for p in c.only_in_new
    ]


def format_comparison(c: Comparison, fmt: str) -> str:
    """The comparison as `text` (aligned columns), `markdown` (a pull-request comment) or `json`;
    what the files named (a model, a folder) without control characters (wording.printable)."""
    return printable(_formatted(c, fmt), lines=True)


def _formatted(c: Comparison, fmt: str) -> str:
    if fmt == "json":
        obj = {
            "base": c.base,
            "new": c.new,
            "threshold_pct": c.threshold_pct,
            "alpha": c.alpha,
            "regressions": len(c.regressions),
            "drift": None
            if c.drift is None
            else {**asdict(c.drift), "factor": c.drift.factor, "pct": c.drift.pct},
            "points": [{**asdict(p), "label": p.label} for p in c.points],
            "only_in_base": c.only_in_base,
            "only_in_new": c.only_in_new,
            "replaced_in_base": c.replaced_in_base,
            "replaced_in_new": c.replaced_in_new,
        }
        return json.dumps(obj, indent=2, default=str)
    rows = [_cells(p) for p in c.points]
    if fmt == "markdown":
        lines = [
            f"### gpubench: `{c.new}` against `{c.base}`",
            "",
            *(f"**{line}**" if i == 0 else line for i, line in enumerate(summary(c).split("\n"))),
            "",
            "| " + " | ".join(HEADERS) + " |",
            "|" + "|".join("---" if i < 2 or i == 8 else "---:" for i in range(len(HEADERS))) + "|",
        ]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in rows]
        unmatched = unmatched_lines(c)
        lines += ["", *(f"- {u}" for u in unmatched)] if unmatched else []
        return "\n".join(lines)
    assert fmt == "text", fmt
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(HEADERS)]
    line = lambda cells: "  ".join(  # noqa: E731
        cell.ljust(w) if i in (0, 1, 8) else cell.rjust(w)
        for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
    ).rstrip()
    return "\n".join(
        [f"base: {c.base}", f"new:  {c.new}", line(HEADERS)]
        + [line(r) for r in rows]
        + unmatched_lines(c)
        + [summary(c)]
    )
