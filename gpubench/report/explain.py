"""The verdicts of run folders (science.verdict over their rows), for `explain`, the end of a
sweep and the top of the report."""

from __future__ import annotations

import dataclasses
import shlex
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.config.errors import ConfigError
from gpubench.config.keys import Key
from gpubench.config.spec import AUTO, Point
from gpubench.report.runs import Run, combine, load_runs
from gpubench.run import folder, shard
from gpubench.science import plan, remeasured
from gpubench.science.devices import cpu_unmeasured
from gpubench.science.leaders import MARGIN
from gpubench.science.verdict import ModelVerdict, verdicts
from gpubench.store import (
    confirmations,
    growth_record,
    merge_record,
    noise_record,
    phases_record,
    shard_record,
    target_runs,
    tune_record,
)
from gpubench.store.growth_record import GrowthRecord, Stop
from gpubench.store.noise_record import NoiseRecord
from gpubench.store.results import read_rows
from gpubench.store.typed_json import RecordError


def cpu_energy_reason(runs: Sequence[Run]) -> str | None:
    """Why CPU package energy is missing, from the runs' env.json (None when it was readable
    or no run says)."""
    for r in runs:
        rapl = r.env.get("rapl")
        if isinstance(rapl, dict) and rapl.get("unavailable_reason"):
            return str(rapl["unavailable_reason"])
    return None


def cpu_energy_line(runs: Sequence[Run], frame: pd.DataFrame) -> str | None:
    """The one line the runs' verdict says where their CPU rows have no energy figure
    (science.devices.cpu_unmeasured), with why from env.json; None where they have one.
    `frame`: the runs' rows as run_frame() reads them."""
    return cpu_unmeasured(frame.to_dict("records"), cpu_energy_reason(runs))


def command(runs: Sequence[Run]) -> str:
    """What made the runs' rows: "tune" where every folder holds a tune.json, else "sweep"
    (the next experiment must be one that command can run)."""
    return "tune" if all((Path(r.path) / tune_record.FILE).is_file() for r in runs) else "sweep"


def _found(runs: Sequence[Run]) -> list[dict[str, Any]] | None:
    """The confirmation of the runs' leaders: a single run's confirm.json (several runs' rows
    compete together, and their leaders were never re-measured side by side); where its
    confirmation was interrupted, each partition says so with the command that finishes it."""
    if len(runs) != 1:
        return None
    found = confirmations.partitions(runs[0].path)
    if found is None and confirmation_interrupted(Path(runs[0].path)):
        finish = f"python -m gpubench sweep --resume {shlex.quote(str(runs[0].path))}"
        why = f"the confirmation was interrupted; finish it with: {finish}"
        rows = runs[0].frame.to_dict("records")
        return [p.to_dict() for p in confirmations.unconfirmed(rows, why)]
    return found


def confirmation_interrupted(run_dir: Path) -> bool:
    """Whether the sweep of `run_dir` began its confirmation (phases.json records it from its
    start) and wrote no confirm.json, and no sweep runs there now: killed (SIGKILL, a lost
    machine) or stopped (SIGTERM, Ctrl-C) within it. `sweep --resume` measures no point
    again and confirms."""
    if (run_dir / confirmations.FILE).is_file() or folder.in_use(run_dir):
        return False
    try:
        record = phases_record.read(run_dir)
    except RecordError:
        return False  # phases.json is the sweep's timings: an unreadable one decides nothing
    if record is None:
        return False
    return any(p.phase == confirmations.CONFIRMATION_PHASE for p in record.phases)


def run_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """The runs' combined rows, each configuration's samples/s the one every view quotes: the
    verdict's re-measurement where there is one (science.remeasured), else the row's."""
    return remeasured.apply(combine(runs), _found(runs))


def run_verdicts(
    runs: Sequence[Run], frame: pd.DataFrame | None = None, margin: float = MARGIN
) -> list[ModelVerdict]:
    """One verdict per partition over all of `runs` together (`frame`: their rows as
    run_frame() reads them), with a single run's confirmation of its leaders; a lead of no
    more than `margin` (a share) is a tie. On a merge of several machines the fastest names
    its machine."""
    rows = run_frame(runs) if frame is None else frame
    records = [growth_record.read(run.path) for run in runs]  # each growth.json read once
    out = verdicts(
        rows,
        _found(runs),
        margin,
        command(runs),
        unreached(runs, records),
        stops(records),
        # issue 51: the B_noise each folder's noise phase measured on real data
        [e for run in runs for e in (noise_record.read(run.path) or NoiseRecord()).entries],
        # issue 51: the runs to the target that checked each prediction (--confirm-target)
        [r for run in runs for r in target_runs.read(run.path, skip_odd=True)],
    )
    for v in out:
        v.fastest += machine_of_fastest(rows, v)
    return out


def unreached(runs: Sequence[Run], records: Sequence[GrowthRecord | None]) -> list[plan.Unreached]:
    """The points the runs' sweeps planned and no run measured (science.plan): each run's plan
    (its suite.json) against the rows, with its growth.json's reasons (`records`, in the order
    of `runs`) where it recorded them.
    A tune's folder plans no grid (its suite.json is the space it searched); a folder without
    suite.json, or of `--batch-sizes auto` (whose batches the sweep chose as it went), has
    only what growth.json recorded."""
    out: list[plan.Unreached] = []
    # a point one folder planned and another measured is measured: the verdict has its row
    every = [r for run in runs for r in run.frame.to_dict("records")]
    for run, record in zip(runs, records, strict=True):
        if (Path(run.path) / tune_record.FILE).is_file():
            continue
        # a merge of folders is finished by resuming its sources, not the merge
        where = None if (Path(run.path) / merge_record.FILE).is_file() else str(run.path)
        recorded = record.unmeasured if record is not None else ()
        planned = _planned(run, run.frame.to_dict("records"))
        running = folder.in_use(Path(run.path))
        out += plan.unreached(planned, every, recorded, where, running)
    return out


def stops(records: Sequence[GrowthRecord | None]) -> dict[Key | str, Stop]:
    """Why each series the runs' sweeps grew stopped, by the series' key, or its label in an
    old growth.json (GrowthRecord.by_series; their growth.json `records`; a series no run grew
    is not in it: its largest batch is not a budget's doing)."""
    return {k: v for r in records if r is not None for k, v in r.by_series().items()}


def _planned(run: Run, rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The points `run`'s suite.json plans (its shard's, where it is one), each by setting
    name; [] where it has no suite or its batches were chosen as it went ("auto"). Devices
    "auto" are the CPU and, where the run's machine had one (env.json or a row), CUDA."""
    if not run.suite:
        return []
    saved = folder.with_defaults(run.suite)
    try:
        # validated as on a CPU: the plan is the run's machine's, which may have had CUDA
        spec = folder.spec_from_saved({**saved, "devices": ["cpu"]})
    except ConfigError:
        # a suite this version cannot read back (its --resume refuses it too) plans nothing
        # here; growth.json, where the run wrote one, still says what it recorded
        return []
    devices = [str(d) for d in saved["devices"]]
    if "auto" in devices:
        cuda = bool(run.env.get("gpus")) or any(str(r["device"]).startswith("cuda") for r in rows)
        devices = ["cpu", *(["cuda"] if cuda else []), *(d for d in devices if d != "auto")]
    spec = dataclasses.replace(spec, devices=tuple(dict.fromkeys(devices)))
    if spec.batch_sizes == AUTO:
        return []
    points: list[Point] = list(dict.fromkeys(spec.points()))
    part = shard_record.read(run.path)
    if part is not None:
        points = shard.select(points, part.index, part.count, spec, part.whole_series)
    return [p.to_dict() for p in points]


def machine_of_fastest(rows: pd.DataFrame, v: ModelVerdict) -> str:
    """ " on HOST (DEVICE)": the machine of `v`'s fastest row where `rows` (a merge of several
    machines) come from more than one; "" where they share one (it goes without saying)."""
    # a machine is its host: one host's CPU and GPU rows are one machine; a row written before
    # rows named their host names none
    if not {"host", "device_name"} <= set(rows.columns) or rows["host"].dropna().nunique() < 2:
        return ""
    match = rows["status"] == "ok"
    for key, value in v.identity.items():
        # a setting at None (unset) is matched by any row: pandas' None == None is False
        if key in rows.columns and value is not None and not isinstance(value, (list, dict)):
            match &= rows[key] == value
    if not match.any():
        return ""
    best = rows[match].sort_values("samples_per_s", ascending=False).iloc[0]
    return "" if pd.isna(best["host"]) else f" on {best['host']} ({best['device_name']})"


def explain_runs(
    dirs: Sequence[str | Path], margin: float = MARGIN
) -> tuple[list[ModelVerdict], list[str]]:
    """The verdicts of the run folders `dirs` at the practical difference `margin`, and the
    folders' names."""
    runs = load_runs(dirs)
    return run_verdicts(runs, margin=margin), [r.name for r in runs]


def distinct_folders(dirs: Sequence[str | Path]) -> tuple[list[str | Path], list[str]]:
    """`dirs` with each folder once, the first spelling of each kept in order (two names are one
    folder where they resolve to the same path: a trailing slash, "./T", a symlink), and one
    line per name left out, saying which it repeats: a folder's rows are counted once."""
    kept: dict[Path, str | Path] = {}
    notes: list[str] = []
    for d in dirs:
        same = kept.get(Path(d).resolve())
        if same is None:
            kept[Path(d).resolve()] = d
        else:
            notes.append(f"{str(d)!r} is the folder {str(same)!r} again: its rows are counted once")
    return list(kept.values()), notes


def nothing_concluded(dirs: Sequence[str | Path]) -> str:
    """Why the run folders `dirs` have no verdict: no row at all ("no point ran"), or rows none
    of which ended ok, by status ("no point ran ok (1 oom)"): an oom is an answer too."""
    statuses = Counter(str(r.get("status")) for d in dirs for r in read_rows(d, skip_odd=True))
    if not statuses:
        return "no point ran"
    counts = ", ".join(f"{n} {s}" for s, n in statuses.most_common())
    return f"no point ran ok ({counts})"
