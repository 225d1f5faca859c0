"""Expands a SweepSpec into points, skips done ones, drives the runner, writes the run folder."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.config.convergence import Convergence
from gpubench.config.errors import ConfigError
from gpubench.config.keys import SERIES, series_key
from gpubench.config.spec import AUTO, Budget, Point, SweepSpec
from gpubench.config.validate import validate
from gpubench.run import (
    batch_growth,
    batch_plan,
    cost,
    cpu_watts,
    forkserver,
    maxbatch,
    noise_sweep,
    phases,
    pool,
    preflight,
    ranks,
    target_confirm,
)
from gpubench.run import shard as shards
from gpubench.run.context import DEFAULT_POINT_TIMEOUT_S, RunContext, RunOptions
from gpubench.run.unmeasured import emulated, note_oom, ran_out, skipped_oom
from gpubench.science import batch_analysis, convergence, scaling
from gpubench.store import confirmations, growth_record
from gpubench.store.growth_record import Unmeasured
from gpubench.store.results import load_results, read_rows
from gpubench.store.wording import number, seconds

# The points that share a memory boundary differ only in these (a batch-size series only in the
# batch: config.keys.SERIES).
OnRow = Callable[[dict[str, Any], int, int], None]
OnStart = Callable[[int, int], None]  # (points in the sweep, points already measured)


def default_run_dir(root: str | Path = "results") -> Path:
    """results/<UTC timestamp>, with a suffix if that folder already exists."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    path = Path(root) / stamp
    n = 1
    while path.exists():
        n += 1
        path = Path(root) / f"{stamp}-{n}"
    return path


def run_sweep(
    spec: SweepSpec,
    out: str | Path | None = None,
    on_row: OnRow | None = None,
    *,
    resume: bool = False,
    extend: bool = False,
    max_memory: int | None = None,
    point_timeout_s: float | None = DEFAULT_POINT_TIMEOUT_S,
    should_stop: Callable[[], bool] | None = None,
    on_start: OnStart | None = None,
    retry_failed: bool = False,
    shard: tuple[int, int] | None = None,
    confirm: bool = True,
    plan_file: Path | None = None,
    prepare: Sequence[str] = (),
    gpus: Sequence[str] = (),
    whole_series: bool = False,
    confirm_target: bool = False,
    on_target_run: target_confirm.OnRun | None = None,
) -> pd.DataFrame:
    """Measure every point of `spec` into run folder `out` (default results/<timestamp>) and
    return all its rows. Each row is on disk (fsynced) before the next point starts.

    Each point, speed or convergence, runs in a worker process (see run.worker) under
    `max_memory` bytes and `point_timeout_s` seconds. Once a batch size runs out of memory,
    larger ones of the same model, device, precision and optimizer are recorded as `oom`
    without being tried. With `resume`, `out` is a folder this suite was started in, and only
    its missing points run (`extend` allows new axis values), on the machine it was started on
    (see folder.check_same_machine); with `retry_failed` too, the points that ended `error` or
    `timeout` lose their rows and run again. `should_stop` is asked before each point.
    `shard` (i, n) runs only the i-th of n shares of the points (see run.shard), dealt point
    by point (`--shard`) or, with `whole_series`, by whole batch-size series (a launch's).
    With `confirm`, a speed sweep that ran to its end re-measures each verdict's leaders
    interleaved (run.confirm) into confirm.json, then measures the reference probes again
    (env.json's end_probes); a shard does not (its leaders are not all there).
    `plan_file`: batch_sizes = "auto" read from (or searched into) that file, one plan for
    every shard given it (see `plan`). Before anything is written, each model takes
    one training step (run.preflight): a model that fails it raises preflight.ModelCheckFailed,
    a ConfigError. The worker that took those steps measures the points, and confirms.
    `prepare`: modules the caller needs after the sweep (the report's), imported meanwhile
    (run.forkserver.imported_meanwhile), done before the calibration starts.
    `gpus`: measure the points in a device pool of these devices (run.pool), the confirmation
    after it has drained.
    `confirm_target`: after the confirmation, each verdict's predicted fastest to target is
    trained to its target (run.target_confirm) into target_runs.jsonl; `on_target_run` is told
    of each run as it ends.
    """
    options = RunOptions(
        max_memory, point_timeout_s, resume, extend, retry_failed, confirm, shard, plan_file
    )
    options = dataclasses.replace(options, gpus=tuple(gpus), confirm_target=confirm_target)
    validate(spec)
    run_dir = Path(out) if out is not None else default_run_dir()
    with RunContext(run_dir, options) as run:
        if resume:  # the folder's lock, suite and machine checked before anything is built
            run.open(spec)
        with run.log.phase("model checks"), forkserver.imported_meanwhile(prepare):
            # The fork server imports torch and the harness (seconds of one core) from the
            # moment the command line starts (a no-op here then), beside the parent's imports.
            forkserver.start()
            # Built in the worker, which has imported what building needs (torch._dynamo).
            preflight.check_builds(spec, run.runner)  # a typo is exit 2
            if spec.mode == "convergence":
                convergence.prepare(spec)  # load the data sets: a data problem is found first
                _check_time_limit(spec.convergence, point_timeout_s)
            # issue 23: a bad count writes nothing
            shards.check_before_writing(shard, spec, whole_series)
            if gpus:
                pool.check(spec, gpus)  # issue 53
            # One training step per model, in a worker: a model that cannot train is exit 2,
            # not a folder of `error` rows (issue 22). A resumed sweep checks too: the code may
            # have changed.
            preflight.check_models(spec, max_memory, point_timeout_s, run.runner)
        if not resume:
            run.open(spec)
        run.write_suite(spec)
        run.log.attach(run_dir)  # where the time goes (phases.json; scripts/sweep_phases.py)
        threads = [t for t in spec.threads if t is not None]
        run.capture_env(spec.resolved_devices(), spec.precisions, threads)
        done = read_rows(run_dir) if run.store.path.is_file() else []
        try:
            with run.log.phase("plan"):
                points = plan(spec, run_dir, options)
            part = shards.saved(run.dir, shard, whole_series)  # issue 17
            if part is not None:
                shard = (part.index, part.count)
                points = shards.select(points, *shard, spec, part.whole_series)
            with run.log.phase("points"):
                if gpus:  # issue 53: one worker per device; drained before the confirmation
                    run.runner.close()  # the model checks' worker: its device joins the pool
                    pool.measure(run, spec, points, done, gpus, on_row, should_stop, on_start)
                else:
                    sharded = shard is not None
                    _measure(run, spec, points, done, on_row, should_stop, on_start, sharded)
        finally:
            run.write_csv()
        stopped = should_stop is not None and should_stop()
        if shard is None and not stopped and noise_sweep.due(run_dir, spec):
            # issue 51: B_noise on real data, in the sweep's worker before the confirmation
            # closes it (run.noise_sweep); not again where a resumed folder has noise.json
            with run.log.phase(noise_sweep.PHASE):
                noise_sweep.run(run_dir, spec, run.runner)
        if confirm and spec.mode == "speed" and shard is None and not stopped:
            # in fresh workers of its own (run.confirm): intervals between processes
            run.confirm(spec)
            # issue 42: a series whose rows read it flat but whose largest batch the
            # confirmation found the fastest grows once more, and its verdict is confirmed again
            rows = read_rows(run_dir)
            grown = batch_growth.overturned(spec, rows, confirmations.partitions(run_dir) or [])
            if grown:
                with run.log.phase("growth after the confirmation"):
                    _measure(run, spec, grown, rows, on_row, should_stop, None, budgeted=False)
                run.write_csv()
                run.confirm(spec, only=grown)
            # issue 52: the reference probes again, beside the start's (compare's drift)
            run.reprobe_env(spec.resolved_devices(), spec.precisions)
        if confirm_target and not stopped:
            # issue 51: the predictions checked by training, once the leaders are final
            why = target_confirm.not_due(run_dir, spec, shard is not None)
            if why is not None:
                warnings.warn(f"--confirm-target: nothing trained: {why}", stacklevel=2)
            else:
                with run.log.phase(target_confirm.PHASE):
                    target_confirm.run(run_dir, spec, run.runner, should_stop, on_target_run)
        if spec.mode == "convergence":
            with run.log.phase("analysis"):
                batch_analysis.write_analysis(run_dir)
    return load_results(run_dir)


def _measure(
    run: RunContext,
    spec: SweepSpec,
    points: list[Point],
    done_rows: list[dict[str, Any]],
    on_row: OnRow | None,
    should_stop: Callable[[], bool] | None,
    on_start: OnStart | None,
    sharded: bool = False,
    budgeted: bool = True,
) -> None:
    """Measure the points of `points` that `done_rows` lacks, in order, in `run`'s worker,
    appending each row to its store (and each point's timings to its log); `budgeted`: a point
    of `points` its series' time budget cannot hold is not started (False: the batches grown
    after the confirmation, one each). A series that grows
    (run.batch_growth) gets its next batch size right after its last one, the sweep's count
    of points growing with it."""
    done = {Point.of(r).key(): r for r in done_rows}
    left_out = emulated(spec, [p for p in points if p.key() not in done])
    points = [p for p in points if p not in left_out]
    oom_at = ran_out(done_rows)
    # issue 28: each growing series' rows so far, and its points still to come in the plan
    series_rows: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in done_rows:
        series_rows.setdefault(Point.of(r).key(drop=SERIES), []).append(r)
    to_come = Counter(p.key(drop=SERIES) for p in points)
    listed: dict[tuple[Any, ...], int] = {}  # each series' largest batch size in the plan
    for p in points:
        key = p.key(drop=SERIES)
        listed[key] = max(listed.get(key, 0), p.batch_size)
    planned = {p.key() for p in points}
    grown_before = [  # rows of grown points measured before this sweep was resumed
        r
        for r in done_rows
        if Point.of(r).key() not in planned and Point.of(r).key(drop=SERIES) in listed
    ]
    # issue 42: why each grown series stopped; and the listed points a series' budget could
    # not hold, or whose precision the device emulates. What growth.json holds already is kept
    # but for the points measured now (the batches grown after the confirmation, a resume).
    before = growth_record.read(run.store.dir)
    decisions = {series_key(s.series): s for s in (before.stops if before is not None else ())}
    labelled = before.series if before is not None else {}  # a growth.json before issue 49
    now = planned | {p.key() for p in left_out}
    unmeasured = [
        u
        for u in (before.unmeasured if before is not None else ())
        if Point.of(u.point).key() not in now
    ]
    unmeasured += [Unmeasured(p.to_dict(), "emulated", why) for p, why in left_out.items()]

    def write_growth(stopped: Sequence[Point] = ()) -> None:
        why = "the sweep was stopped before it"
        gone = [Unmeasured(p.to_dict(), "stopped", why) for p in stopped]
        batch_growth.record(decisions.values(), [*unmeasured, *gone], labelled).write(run.store.dir)

    if unmeasured:
        write_growth()
    total = len(points) + len(grown_before)
    finished = sum(1 for p in points if p.key() in done) + len(grown_before)
    if on_start is not None:
        on_start(total, finished)
    task = spec.convergence if spec.mode == "convergence" else spec.budget
    if not spec.profile and isinstance(task, Budget):
        task = dataclasses.replace(task, profile_steps=0)
    queue = deque(points)
    while queue:
        point = queue.popleft()
        key = point.key(drop=SERIES)
        grows = batch_growth.grows(spec, point, sharded)
        row = done.get(point.key())
        if row is None and should_stop is not None and should_stop():
            # issue 42: what was planned and not reached is said, not left to be guessed
            write_growth([point, *(p for p in queue if p.key() not in done)])
            break
        # only a point still to measure is weighed against its series' budget
        weigh = grows and row is None and budgeted
        why = batch_growth.over_budget(spec, point, series_rows.get(key, [])) if weigh else None
        if why is not None:
            # issue 42: a listed batch its series' budget cannot hold is not started, and said
            unmeasured.append(Unmeasured(point.to_dict(), "over budget", why))
            total -= 1
            write_growth()
        elif row is None:
            started, workers = time.time(), len(run.runner.startup_s)
            row = _row(point, task, run, oom_at, done_rows)
            ended = time.time()
            if row["status"] == "oom":
                note_oom(oom_at, point)
            row.update(cost.columns(row, spec.prices))  # issue 32: --price
            row.update(cpu_watts.columns(row, spec.cpu_watts))  # issue 49: --cpu-watts
            run.store.append(row)
            finished += 1
            if on_row is not None:
                on_row(row, finished, total)
            worker_s = sum(run.runner.startup_s[workers:])
            run.log.point(phases.point_name(point), started, ended, time.time(), worker_s)
            series_rows.setdefault(key, []).append(row)
        to_come[key] -= 1
        if to_come[key] or not grows:
            continue
        grown = batch_growth.next_batch(spec, point, series_rows.get(key, []))
        decisions[key] = batch_growth.stop(point, grown)
        write_growth()
        if grown.batch is not None:
            nxt = dataclasses.replace(point, batch_size=grown.batch)
            queue.appendleft(nxt)
            to_come[key] += 1
            if nxt.key() not in done:
                total += 1  # a batch the plan did not hold


def _row(
    point: Point,
    task: Budget | Convergence,
    run: RunContext,
    oom_at: dict[tuple[Any, ...], int],
    done_rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """`point`'s row: `oom` unmeasured where a smaller batch of its memory group ran out of
    memory, a torchrun launch for a parallel point, else a measurement in `run`'s worker."""
    skipped = skipped_oom(oom_at, point)
    if skipped is not None:
        return skipped
    if point.parallel != "none":  # issue 17: a rank per process, launched here
        assert isinstance(task, Budget)
        timeout, cap = run.options.point_timeout_s, run.options.max_memory
        row = ranks.run_parallel_point(point, task, timeout, max_memory=cap)
        scaling.fill_efficiency([row], done_rows)
        done_rows.append(row)
        return row
    return run.measure(point, task).row


def _check_time_limit(conv: Convergence, point_timeout_s: float | None) -> None:
    """A convergence point trains for up to its time limit, in a worker that is killed after
    `point_timeout_s`: a limit that cannot fit is a configuration error, not a timeout row."""
    limit = conv.time_limit_s()
    if point_timeout_s is not None and limit is not None and limit >= point_timeout_s:
        raise ConfigError(
            f"convergence.max_time_s {number(limit)} does not fit in --point-timeout "
            f"{seconds(point_timeout_s)}; allowed: a training time below the point timeout"
        )


def plan(spec: SweepSpec, run_dir: Path, options: RunOptions) -> list[Point]:
    """The sweep's points in order. For batch_sizes = "auto", each point but for its batch size
    (its whole identity: speed options, seed and layout too) gets the powers of two up to the
    largest batch that fits one of its ranks, in its own batch_size (run.batch_plan: per rank
    under weak scaling, global under strong; a rank's training state as its layout holds it),
    found by the memory-model search (maxbatch, in fresh processes) and kept in
    run_dir/maxbatch.json so a resumed sweep plans the same points without probing again.
    With options.plan_file, the searches are read from that file (and those it lacks searched and
    added to it, under its lock), so every shard given the same file plans the same points.

    A sweep of single-process speed points (not sharded) searches no memory limit: each series
    starts at run.batch_growth.AUTO_START and grows while the growth rule says so.

    A search that stopped on an error or a timeout found no memory limit: its points go up to
    the batch size that failed, which runs as a point of its own (its row says what happened),
    and a resumed sweep searches again."""
    if spec.batch_sizes != AUTO:
        return list(dict.fromkeys(spec.points()))  # an axis value given twice is one point
    bases = list(dataclasses.replace(spec, batch_sizes=(1,)).points())
    # issue 42: a single-process speed series starts small and grows by the growth rule
    # (science.growth) to where throughput flattens or memory ends, not to the memory limit
    grown = {b for b in bases if batch_growth.grows(spec, b, options.shard is not None)}
    searched = [b for b in bases if b not in grown]
    layouts = [batch_plan.rank_layout(base) for base in searched]
    cap, timeout = options.max_memory, options.point_timeout_s

    def search(layout: batch_plan.RankLayout) -> dict[str, Any]:
        device = layout.probe.device
        limit = cap if cap is not None else maxbatch.default_cap(device)
        saving = None if layout.same_as_probe else layout.saved_bytes
        return maxbatch.find(layout.probe, limit, timeout, rank_saving=saving).to_dict()

    searches = batch_plan.resolve(layouts, run_dir, options.plan_file, search) if layouts else {}
    points: list[Point] = []
    for base in bases:
        if base in grown:
            points.append(
                dataclasses.replace(base, batch_size=batch_growth.AUTO_START * base.accumulate)
            )
            continue
        layout = batch_plan.rank_layout(base)
        entry = searches[layout.key()]
        sizes = batch_plan.batch_sizes(base, int(entry["largest_batch"]))
        last = entry["probes"][-1] if entry.get("probes") else {}
        if entry.get("stopped") and last.get("phase") != "skipped":  # not started: no point
            failed = batch_plan.point_batch(base, int(last["batch_size"]))
            sizes = sorted({*(b for b in sizes if b < failed), failed})
        points.extend(dataclasses.replace(base, batch_size=b) for b in sizes)
    return list(dict.fromkeys(points))
