"""`gpubench sweep`'s launcher flags (issue 53: --launcher slurm|local and what a submission
needs) and the run.launcher.Settings they make, each flag over its key in the suite's
`[launcher]` table (config.launcher_keys); `gpubench collect`'s parser."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpubench.cli import values
from gpubench.config.checks import whole
from gpubench.config.errors import ConfigError
from gpubench.config.launcher_keys import LAUNCHERS, LauncherKeys

DEFAULT_TIME_LIMIT_MIN = 60  # run.launcher's (not imported: the parser stays light)
# the flags that only a launch takes, by their dest
ONLY_LAUNCH = ("partition", "time_limit", "gpus_per_task", "array_parallelism", "shards")


def _count(text: str) -> int:
    """A whole number >= 0 (a task may have no GPU)."""
    return whole(values.int_value(text), "GPU count", least=0)


def add_flags(sweep: Any) -> None:
    """The launcher flags on the sweep's parser."""
    sweep.add_argument(
        "--launcher",
        type=values.choice(LAUNCHERS, "launcher"),
        help="submit the sweep as one array task per shard through submitit and wait for them: "
        "slurm, or local (real processes here, no Slurm: for trying it); needs "
        'pip install "gpubench[slurm]" (default: measure here)',
    )
    sweep.add_argument("--partition", help="with --launcher slurm: the Slurm partition")
    sweep.add_argument(
        "--time-limit",
        type=values.arg(values.positive_int),
        metavar="MIN",
        help="with --launcher: each task's time limit in minutes; a task that reaches it is "
        f"requeued and resumes from its rows (default: {DEFAULT_TIME_LIMIT_MIN})",
    )
    sweep.add_argument(
        "--gpus-per-task",
        type=values.arg(_count),
        metavar="N",
        help="with --launcher: GPUs per array task; above 1 a task measures its shard in a "
        "device pool (as --gpus all) (default: 1)",
    )
    sweep.add_argument(
        "--array-parallelism",
        type=values.arg(values.positive_int),
        metavar="N",
        help="with --launcher slurm: the most array tasks running at once (default: no limit)",
    )
    sweep.add_argument(
        "--shards",
        type=values.arg(values.positive_int),
        metavar="N",
        help="with --launcher: the number of shards, one array task each (default: one per "
        "point series, 16 at most)",
    )


def suite_keys(args: argparse.Namespace, default_suite: str) -> LauncherKeys:
    """The `[launcher]` table of the suite a new sweep names (`default_suite` where it names
    none); none for a resume (a launch resumes with its launch.json, a run folder is measured
    here)."""
    if args.resume is not None:
        return LauncherKeys()
    from gpubench.config.suite import load_launcher

    return load_launcher(args.suite or default_suite)


def kind(args: argparse.Namespace, keys: LauncherKeys) -> str | None:
    """The launcher of the sweep: --launcher, else the suite's `launcher.kind` (None: measure
    here)."""
    return args.launcher if args.launcher is not None else keys.kind


def check(args: argparse.Namespace, keys: LauncherKeys) -> None:
    """Refuse launcher flags without a launcher (--launcher or the suite's `launcher.kind`; a
    resume of a launch takes none), and a launch with the flags of a sweep measured here
    (ConfigError, one line)."""
    launcher = kind(args, keys)
    given = [d for d in ONLY_LAUNCH if getattr(args, d) is not None]
    if launcher is None and given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(f"{flag} needs --launcher slurm|local; allowed: a sweep --launcher")
    if launcher is None:
        return
    named = (
        "--launcher" if args.launcher is not None else f'the suite\'s launcher.kind "{launcher}"'
    )
    for dest in ("shard", "gpus", "plan"):
        if getattr(args, dest) is not None:
            raise ConfigError(
                f"{named} shares the points itself and --{dest} is one machine's; allowed: "
                "--launcher without --shard, --gpus or --plan (--gpus-per-task gives a task a "
                "device pool)"
            )
    if args.partition is not None and launcher != "slurm":
        raise ConfigError("--partition needs --launcher slurm; allowed: --launcher slurm")


def settings(args: argparse.Namespace, keys: LauncherKeys) -> Any:
    """The run.launcher.Settings of the flags, each over the suite's `[launcher]` key (`keys`),
    the default where neither is given; the table's partition is Slurm's alone (a local launch
    leaves it)."""
    from gpubench.run import launcher

    def first(flag: Any, key: Any, default: Any) -> Any:
        return flag if flag is not None else key if key is not None else default

    launched = kind(args, keys)
    assert launched is not None, "settings of a sweep measured here"
    partition = first(args.partition, keys.partition if launched == "slurm" else None, None)
    return launcher.Settings(
        launched,
        partition,
        first(args.time_limit, keys.time_limit_min, launcher.DEFAULT_TIME_LIMIT_MIN),
        first(args.gpus_per_task, keys.gpus_per_task, 1),
        first(args.array_parallelism, keys.array_parallelism, None),
        first(args.shards, keys.shards, None),
    )


def add_collect(sub: Any) -> None:
    """`gpubench collect DIR`."""
    collect = sub.add_parser(
        "collect",
        help="wait for a sweep --launcher's jobs, report each failed one with its log, and "
        "merge the finished shards into DIR/merged",
    )
    collect.add_argument("dir", type=Path, metavar="DIR", help="the folder of a sweep --launcher")
    collect.add_argument(
        "--no-report",
        dest="report",
        action="store_false",
        help="draw no report of the merged folder (its rows and verdict are the same)",
    )
