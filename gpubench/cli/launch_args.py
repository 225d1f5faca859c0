"""`gpubench sweep`'s launcher flags (issue 53: --launcher slurm|local and what a submission
needs) and the run.launcher.Settings they make; `gpubench collect`'s parser."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpubench.cli import values
from gpubench.config.checks import whole
from gpubench.config.errors import ConfigError

LAUNCHERS = ("slurm", "local")
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


def check(args: argparse.Namespace) -> None:
    """Refuse launcher flags without --launcher (a resume of a launch takes none), and
    --launcher with the flags of a sweep measured here (ConfigError, one line)."""
    given = [d for d in ONLY_LAUNCH if getattr(args, d) is not None]
    if args.launcher is None and given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(f"{flag} needs --launcher slurm|local; allowed: a sweep --launcher")
    if args.launcher is None:
        return
    for dest in ("shard", "gpus", "plan"):
        if getattr(args, dest) is not None:
            raise ConfigError(
                f"--launcher shares the points itself and --{dest} is one machine's; allowed: "
                "--launcher without --shard, --gpus or --plan (--gpus-per-task gives a task a "
                "device pool)"
            )
    if args.partition is not None and args.launcher != "slurm":
        raise ConfigError("--partition needs --launcher slurm; allowed: --launcher slurm")


def settings(args: argparse.Namespace) -> Any:
    """The run.launcher.Settings of the flags (defaults where not given)."""
    from gpubench.run import launcher

    return launcher.Settings(
        args.launcher,
        args.partition,
        args.time_limit if args.time_limit is not None else launcher.DEFAULT_TIME_LIMIT_MIN,
        args.gpus_per_task if args.gpus_per_task is not None else 1,
        args.array_parallelism,
        args.shards,
    )


def add_collect(sub: Any) -> None:
    """`gpubench collect DIR`."""
    collect = sub.add_parser(
        "collect",
        help="wait for a sweep --launcher's jobs, report each failed one with its log, and "
        "merge the finished shards into DIR/merged",
    )
    collect.add_argument("dir", type=Path, metavar="DIR", help="the folder of a sweep --launcher")
