"""`gpubench sweep --launcher slurm|local` (submit one array task per shard, then wait and
collect), its resume (`sweep --resume DIR` on a launcher's folder: the unfinished shards
again), and `gpubench collect DIR` (wait, report each failed job with its log, merge the
finished shards and show their verdict): issue 53, run.launcher's face."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.store import launch_record
from gpubench.store.wording import plural


def is_launch(folder: Path | None) -> bool:
    """Whether `folder` is a launcher's (it holds launch.json)."""
    return folder is not None and (folder / launch_record.FILE).is_file()


def collect_command(launch_dir: Path) -> str:
    return f"python -m gpubench collect {shlex.quote(str(launch_dir))}"


def sweep(args: argparse.Namespace) -> int:
    """Submit the sweep's shards (a new launch into --out, default results/<timestamp>; or,
    with --resume DIR, the shards of DIR whose planned points lack rows and whose job has
    ended), then wait for them and collect (exit status as `collect`'s)."""
    from gpubench.cli import console, launch_args, sweep_args
    from gpubench.cli.commands import reserved_run_dir
    from gpubench.run import launcher
    from gpubench.run.shard_job import Measuring

    # the suite's [launcher] table, beneath the flags
    keys = launch_args.suite_keys(args, sweep_args.DEFAULT_SUITE)
    if args.resume is None:
        launch_args.check(args, keys)
    launcher.require_submitit()
    if args.resume is not None:  # a launch resumes with the settings of its launch.json
        given = [d for d in (*launch_args.ONLY_LAUNCH, "launcher") if getattr(args, d) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise ConfigError(
                f"{flag} with --resume {args.resume}: a launch resumes with the settings its "
                f"{launch_record.FILE} holds; allowed: sweep --resume {args.resume} alone"
            )
    spec = sweep_args.spec_from_args(args)
    if args.resume is not None:
        launch_dir = args.resume
        record = launch_record.read(launch_dir)
        assert record is not None  # is_launch(args.resume) brought us here
        busy = launcher.running(launch_dir, record)
        which = [i for i in launcher.pending(spec, launch_dir, record.shards) if i not in busy]
        if busy:
            shards = ", ".join(f"{i}/{record.shards}" for i in busy)
            console.say(f"gpubench: note: shards {shards} are still running; not resubmitted")
    else:
        launch_dir = args.out if args.out is not None else reserved_run_dir()
        try:
            record = launcher.start(spec, launch_dir, launch_args.settings(args, keys))
        except ConfigError:
            if args.out is None:
                launch_dir.rmdir()  # reserved just now, and nothing written: not left behind
            raise
        which = list(range(1, record.shards + 1))
    pool = tuple(str(i) for i in range(record.gpus_per_task)) if record.gpus_per_task > 1 else ()
    measuring = Measuring(args.max_memory, args.point_timeout, pool)
    live: dict[int, Any] = {}
    if which:
        record, jobs = launcher.submit(spec, launch_dir, record, measuring, which)
        live = dict(zip(which, jobs, strict=True))
        ids = ", ".join(str(j.job_id) for j in jobs)
        print(
            f"submitted {plural(len(jobs), 'array task')} of {record.shards} shards to "
            f"{record.launcher} (jobs {ids}); their logs: {launch_dir / launcher.JOBS}"
        )
    else:
        print(f"every shard of {launch_dir} has its rows or is running: nothing submitted")
    print(f"waiting for the jobs; Ctrl-C stops waiting, then: {collect_command(launch_dir)}")
    return _collected(launch_dir, live, args.report)


def collect(args: argparse.Namespace) -> int:
    """`gpubench collect DIR`: wait for DIR's jobs and merge their shards (see _collected)."""
    from gpubench.run import launcher

    launcher.require_submitit()
    return _collected(args.dir, {}, args.report)


def _collected(launch_dir: Path, live: dict[int, Any], report: bool = True) -> int:
    """Wait for `launch_dir`'s jobs, say each failed one with its log's path and last lines,
    merge the finished shards, render their report (where `report`: not with --no-report) and
    print their verdict. Exit status 0
    where every job finished, 1 where one failed or none finished with rows."""
    from gpubench.cli import commands, console
    from gpubench.run import launcher

    got = launcher.collect(launch_dir, live)
    record = launch_record.read(launch_dir)
    count = record.shards if record is not None else 0
    for f in got.failed:
        console.say(
            f"gpubench: error: shard {f.shard}/{count} failed (job {f.job_id}, {f.state}); its "
            f"log: {f.log}" + ("; its last lines:" if f.tail else " (empty)")
        )
        for line in f.tail:
            console.say(f"    {line}")
    if got.failed:
        console.say(
            "gpubench: the failed shards' rows are kept in their folders; resubmit them with: "
            f"python -m gpubench sweep --resume {shlex.quote(str(launch_dir))}"
        )
    if got.merged is None:
        console.say("gpubench: no shard finished with rows: nothing merged")
        return 1
    print(
        f"merged {plural(len(got.finished), 'finished shard')} of {count}: "
        f"{plural(got.rows, 'row')} -> {got.merged}"
    )
    if got.pace is not None:  # issue 53: the launch's speedup, seen
        print(got.pace.line())
    stopped = commands.render_report(got.merged, report)
    if stopped is not None:
        return stopped
    commands.print_verdict([got.merged])
    return 1 if got.failed else 0
