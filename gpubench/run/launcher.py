"""A sweep on a cluster through submitit (issue 53): `sweep --launcher slurm|local` submits one
array task per shard (run.shard's selection by whole batch-size series: every batch size of a series
in one job, on one machine, so the verdict's batch comparison is like with like; run.shard_job runs
it, resume on, into its own folder), and `collect` waits for the jobs, reports each failed one with
its log's path and the tail of its stderr, and merges the finished shards (run.merge) into one
folder whose verdict and report cover them all.

The launcher's folder DIR holds suite.json (the suite, as a run folder's), launch.json (the
launcher, its settings and every job: store.launch_record), jobs/ (submitit's logs and
pickles), shards/I-of-N/ (each shard's run folder), plan.json (batch_sizes = "auto": one plan
for every shard) and merged/ (what collect merged; written again by each collect). A resume
(`sweep --resume DIR`) resubmits only the shards whose planned points lack rows.

`local` is submitit's LocalExecutor: real processes on this machine, no Slurm (for tests and for
trying a launch); its jobs are waited for by the process that submitted them, or by their
process id.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import AUTO, Point, SweepSpec
from gpubench.run import shard as shards
from gpubench.store import growth_record, launch_record, merge_record, pace_record, suite_record
from gpubench.store.launch_record import Job, LaunchRecord
from gpubench.store.results import read_rows

INSTALL = 'pip install "gpubench[slurm]"'
DEFAULT_TIME_LIMIT_MIN = 60  # cli.launch_args says it too
MOST_SHARDS = 16  # the default shard count: a series each, at most this many
MERGED = "merged"
JOBS = "jobs"
TAIL_LINES = 12


def require_submitit() -> None:
    """ConfigError (one line, with the install command) where submitit is not installed."""
    import importlib.util

    if importlib.util.find_spec("submitit") is None:
        raise ConfigError(
            f"--launcher needs submitit, which is not installed here; install it with: {INSTALL}"
        )


@dataclass(frozen=True)
class Settings:
    """How a launch submits: `launcher` ("slurm" or "local"), the Slurm `partition` (None: the
    cluster's default), each task's time limit in minutes, its GPUs, the most array tasks
    running at once (None: no limit) and the shard count (None: a series each, MOST_SHARDS at
    most)."""

    launcher: str
    partition: str | None = None
    time_limit_min: int = DEFAULT_TIME_LIMIT_MIN
    gpus_per_task: int = 1
    array_parallelism: int | None = None
    shards: int | None = None


def series_count(spec: SweepSpec) -> int:
    """The point series `spec` has to share among shards (run.shard.unit with whole_series:
    a parallel point's nproc values and a series' batch sizes count once)."""
    import dataclasses

    bases = dataclasses.replace(spec, batch_sizes=(1,)).points()  # "auto" too: one per series
    return shards.series_count(bases, whole_series=True)


def start(spec: SweepSpec, launch_dir: Path, settings: Settings) -> LaunchRecord:
    """Write a new launcher folder `launch_dir` (refused where it holds a launch or a run
    already, and for a shard count above the suite's series or a task's device pool that
    run.pool.check refuses): suite.json and launch.json, with no job yet."""
    if (launch_dir / launch_record.FILE).is_file() or (launch_dir / suite_record.FILE).is_file():
        raise ConfigError(
            f"folder {str(launch_dir)!r} holds a launch or a run already; continue it with "
            f"--resume {launch_dir}, or choose another --out"
        )
    series = series_count(spec)
    count = settings.shards or min(series, MOST_SHARDS)
    if count > series:  # such shards would hold nothing: a typo
        raise ConfigError(
            f"--shards {count}: suite {spec.name!r} has {series} point series to share (a "
            f"series' batch sizes and nproc values count once); allowed: 1 to {series}"
        )
    if settings.gpus_per_task > 1:  # each task measures in a device pool: what it refuses
        from gpubench.run import pool

        try:
            pool.check(spec, [str(i) for i in range(settings.gpus_per_task)])
        except ConfigError as e:
            raise ConfigError(f"--gpus-per-task {settings.gpus_per_task} (a pool): {e}") from e
    launch_dir.mkdir(parents=True, exist_ok=True)
    suite_record.write(launch_dir, spec.to_dict())
    record = LaunchRecord(
        settings.launcher,
        count,
        settings.partition,
        settings.time_limit_min,
        settings.gpus_per_task,
        settings.array_parallelism,
    )
    record.write(launch_dir)
    return record


def pending(spec: SweepSpec, launch_dir: Path, count: int) -> list[int]:
    """The shards (1-based) to submit: those whose planned points (run.shard.select, by whole
    series) lack a row in their folder and are not recorded there as left unmeasured
    (growth.json: an emulated precision). With batch_sizes = "auto" (the plan is the shards'
    own), those with no row."""
    from gpubench.run.shard_job import has_rows, shard_dir

    out = []
    points = list(dict.fromkeys(spec.points())) if spec.batch_sizes != AUTO else []
    for i in range(1, count + 1):
        folder = shard_dir(launch_dir, i, count)
        if spec.batch_sizes == AUTO:
            if not has_rows(folder):
                out.append(i)
            continue
        done = {Point.of(r).key() for r in read_rows(folder)} if has_rows(folder) else set()
        record = growth_record.read(folder)
        left = {Point.of(u.point).key() for u in (record.unmeasured if record else ())}
        planned = {p.key() for p in shards.select(points, i, count, spec, whole_series=True)}
        if planned - done - left:
            out.append(i)
    return out


def submit(
    spec: SweepSpec, launch_dir: Path, record: LaunchRecord, measuring: Any, which: Sequence[int]
) -> tuple[LaunchRecord, list[Any]]:
    """Submit shards `which` of the launch as one array (one task each) with `record`'s
    settings, each running run.shard_job.ShardJob with `measuring`; launch.json rewritten with
    the new jobs. Returns the record and the submitit jobs, in the order of `which`."""
    import submitit

    from gpubench.run.shard_job import ShardJob

    executor = submitit.AutoExecutor(folder=launch_dir / JOBS, cluster=record.launcher)
    params: dict[str, Any] = {
        "name": "gpubench",
        "timeout_min": record.time_limit_min,
        "gpus_per_node": record.gpus_per_task,
        "tasks_per_node": 1,
        "nodes": 1,
    }
    if record.partition is not None:
        params["slurm_partition"] = record.partition
    if record.array_parallelism is not None:
        params["slurm_array_parallelism"] = record.array_parallelism
    executor.update_parameters(**params)
    job = ShardJob(spec, launch_dir.resolve(), record.shards, measuring)
    jobs = executor.map_array(job, list(which))
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    record = record.with_jobs(
        [Job(i, str(j.job_id), now) for i, j in zip(which, jobs, strict=True)]
    )
    record.write(launch_dir)
    return record, jobs


@dataclass(frozen=True)
class Failed:
    """A shard whose latest job did not finish: its job, what submitit said of it (`state`),
    its stderr log's path and that log's last lines."""

    shard: int
    job_id: str
    state: str
    log: Path
    tail: list[str]


@dataclass(frozen=True)
class Collected:
    """What collect found: the shards whose jobs finished, those that failed, and where the
    finished ones were merged (None where none finished with rows), with its rows and its
    pace (pace.json: wall time and points per minute)."""

    finished: list[int]
    failed: list[Failed]
    merged: Path | None
    rows: int
    pace: pace_record.Pace | None = None


def _job(record: LaunchRecord, launch_dir: Path, job: Job) -> Any:
    """The submitit job of `job` (read from its id in another process than the launch's)."""
    import submitit

    folder = launch_dir / JOBS
    if record.launcher == "slurm":
        return submitit.SlurmJob(folder, job.job_id)
    return submitit.LocalJob(folder, job.job_id)


def _wait_local(job: Any) -> None:
    """Wait for a local job of another process: its controller's process id, until gone."""
    pid = int(str(job.job_id))
    while not job.paths.result_pickle.exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(1.0)


def running(launch_dir: Path, record: LaunchRecord) -> list[int]:
    """The shards whose latest job has not ended yet (pending, running or requeued): a resume
    leaves them to run, never submitting a shard twice at once."""
    out = []
    for shard, job in sorted(record.latest().items()):
        handle = _job(record, launch_dir, job)
        if record.launcher == "local":
            try:
                os.kill(int(job.job_id), 0)
            except ProcessLookupError:
                continue
            if not handle.paths.result_pickle.exists():
                out.append(shard)
        elif not handle.done():
            out.append(shard)
    return out


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of the text file `path` ([] where it does not exist)."""
    if not path.is_file():
        return []
    return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]


def collect(launch_dir: Path, live: dict[int, Any] | None = None) -> Collected:
    """Wait for each shard's latest job (`live`: the submitit jobs by shard, where this process
    submitted them), then merge the shards whose job finished into launch_dir/merged (run.merge;
    a merged folder of an earlier collect is replaced). A failed job is a Failed (never
    silent); its shard's rows stay in its folder for a resume."""
    from gpubench.run import merge
    from gpubench.run.shard_job import has_rows, shard_dir

    record = launch_record.read(launch_dir)
    if record is None:
        raise ConfigError(
            f"folder {str(launch_dir)!r} holds no {launch_record.FILE}; allowed: the folder of "
            "a sweep --launcher"
        )
    finished: list[int] = []
    failed: list[Failed] = []
    for shard, job in sorted(record.latest().items()):
        handle = (live or {}).get(shard)
        if handle is None:
            handle = _job(record, launch_dir, job)
            if record.launcher == "local":
                _wait_local(handle)
        if record.launcher == "local":
            # submitit waits up to 15 s for a result file that a network filesystem may show
            # late; a local job's ended process wrote its own already, so a job that died
            # without one (killed, os._exit) is reported at once, not 15 s later
            handle._results_timeout_s = 0
        error = handle.exception()  # waits for the job
        if error is None:
            finished.append(shard)
            continue
        state = str(getattr(handle, "state", "unknown"))
        failed.append(
            Failed(shard, job.job_id, state, handle.paths.stderr, tail(handle.paths.stderr))
        )
    merging = [i for i in finished if has_rows(shard_dir(launch_dir, i, record.shards))]
    dirs = [shard_dir(launch_dir, i, record.shards) for i in merging]
    out = launch_dir / MERGED
    if not dirs:
        return Collected(finished, failed, None, 0)
    if out.exists():
        if not (out / merge_record.FILE).is_file():
            raise ConfigError(f"{str(out)!r} is no merge of this launch; move it away")
        shutil.rmtree(out)
    merged = merge.merge(dirs, out)
    pace(record, merging, dirs, out)
    pace_of = pace_record.Pace.read(out)
    return Collected(finished, failed, out, merged.rows, pace_of)


def pace(record: LaunchRecord, shards_merged: list[int], dirs: list[Path], out: Path) -> None:
    """pace.json in the merged folder `out` (of `dirs`, the folders of `shards_merged`): from
    the first submission of those shards' latest jobs to the last row written in them (their
    phases.json), and the points they hold. Nothing where no shard recorded its phases."""
    from gpubench.store import phases_record

    latest = record.latest()
    since = min(dt.datetime.fromisoformat(latest[i].submitted_at) for i in shards_merged)
    ends, points = [], 0
    for d in dirs:
        phases = phases_record.read(d)
        if phases is None:
            continue
        ends += [p.written for p in phases.points] + [p.end for p in phases.phases]
        points += len(read_rows(d))
    if not ends:
        return
    wall = max(ends) - since.timestamp()
    first = f"the first submission of its jobs ({record.launcher})"
    pace_record.Pace(wall, points, first).write(out)
