"""`gpubench sweep`'s arguments, and the SweepSpec they make (the named suite with the flags'
overrides applied, validated)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from gpubench.cli import flags, launch_args, values
from gpubench.config import model_options, prices, user_code
from gpubench.config import spec as S
from gpubench.config.checks import check_noise_budget, check_watts
from gpubench.config.errors import ConfigError
from gpubench.config.suite import load_suite, shipped_names
from gpubench.config.validate import validate

DEFAULT_SUITE = "quick"
SUITES_DEFAULT = " (default: the suite's)"


def add_parser(sub: Any) -> None:
    sweep = sub.add_parser("sweep", help="run a suite of training benchmarks")
    sweep.add_argument(
        "suite",
        nargs="?",
        default=None,
        help="a suite TOML file, or the name of a shipped suite: "
        f"{', '.join(shipped_names())} (default: {DEFAULT_SUITE}, or with --resume the suite "
        "the run was started with)",
    )
    flags.add_axis_flags(sweep, tuple(flags.AXES))  # every axis (--data, --seeds: below)
    sweep.add_argument("--out", type=Path, help="run folder (default: results/<timestamp>)")
    sweep.add_argument(
        "--data-dir", help="folder of a file-based data set for convergence runs (cifar10)"
    )
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.add_argument(
        "--no-profile",
        dest="profile",
        action="store_false",
        default=None,
        help="skip the few profiled steps per point that attribute its time (and its bottleneck)",
    )
    sweep.add_argument(
        "--no-confirm",
        dest="confirm",
        action="store_false",
        help="skip re-measuring each verdict's leaders interleaved at the end (about 15%% of "
        "the sweep's time); the verdict then goes by the rows' intervals",
    )
    sweep.add_argument(  # issue 49: CI and tests that read only the rows
        "--no-report",
        dest="report",
        action="store_false",
        help="draw no report (report.html, plots/) at the end: the rows, tables and verdict "
        "are the same; draw it later with: gpubench report DIR",
    )
    sweep.add_argument(  # issue 51
        "--noise-budget",
        type=values.arg(check_noise_budget),
        metavar="S",
        help="seconds in all of the noise phase after the points: each reference model and "
        "optimizer trains toward its target on its real data set for the gradient noise scale "
        "of that path, from which the verdict predicts the batch fastest to a trained model; "
        "more seconds take a slow model further along the path (0: none; default: the "
        "suite's noise_budget_s)",
    )
    sweep.add_argument(  # issue 51, item 5
        "--confirm-target",
        action="store_true",
        help="after the confirmation, check each predicted fastest to target by training: the "
        "predicted batch, the throughput-fastest batch and the one between train to the "
        "model's target on its real data, 3 seeds each (the convergence suite's settings), and "
        "the verdict says predicted against measured (minutes: each run trains up to the "
        "convergence suite's time limit)",
    )
    flags.add_measuring_flags(sweep, sweep=True)
    sweep.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="run only the points of the suite that have no row yet in run folder DIR",
    )
    sweep.add_argument(
        "--extend",
        action="store_true",
        help="with --resume: allow a suite with new axis values, and measure the new points",
    )
    sweep.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: measure again the points that ended error or timeout",
    )
    sweep.add_argument(
        "--shard",
        type=values.arg(values.shard),
        metavar="I/N",
        help="run only the I-th of N shares of the points (balanced by their budgets), e.g. 1/2",
    )
    sweep.add_argument(
        "--plan",
        type=Path,
        metavar="FILE",
        help='batch_sizes = "auto": read the searches from FILE, searching and adding there '
        "those it lacks, so every shard given FILE measures the same batch sizes",
    )
    sweep.add_argument(  # issue 53
        "--gpus",
        type=values.arg(_gpus),
        metavar="all|I,J,...",
        help="measure independent points at once, one worker per CUDA device (all, or indices "
        "such as 0,1,3), each seeing only its own; the verdict's re-measurement runs after, "
        "with the pool drained (default: one point at a time)",
    )
    launch_args.add_flags(sweep)  # issue 53: a cluster through submitit
    # issue 32: what the devices' time costs, and the epoch a cost per epoch is of
    sweep.add_argument(
        "--price",
        metavar="DEVICE=USD_PER_HOUR",
        help="dollars per hour of each device, comma-separated (e.g. cpu=0.10,cuda=2.50): each "
        "row gets its dollars per million samples, per epoch and to target; the verdict names "
        "the cheapest (default: the suite's [prices])",
    )
    sweep.add_argument(
        "--epoch",
        metavar="NAME|SAMPLES",
        help="the epoch a row's usd_per_epoch is of: imagenet, cifar10, mnist, or a number of "
        "samples (default: the suite's [prices] epoch)",
    )
    # issue 49: the CPU's energy where RAPL cannot measure it, from the power the user states
    sweep.add_argument(
        "--cpu-watts",
        type=values.arg(check_watts),
        metavar="W",
        help="the CPU's power in watts, e.g. 65: a CPU row that RAPL did not measure gets its "
        "energy as W x its measured time, said as stated (default: the suite's cpu_watts; "
        "none: such rows have no CPU energy)",
    )
    for action in sweep._actions:  # the flags whose default is the suite's value
        if action.dest in (*S.AXES, "steps", "max_time", "profile"):
            action.help = (action.help or "") + SUITES_DEFAULT


def _gpus(text: str) -> Any:
    from gpubench.run import pool  # only where --gpus is given

    return pool.parse(text)


def pool_devices(args: argparse.Namespace) -> tuple[str, ...]:
    """--gpus's devices on this machine (run.pool.resolve: refused without CUDA); () where not
    given."""
    if args.gpus is None:
        return ()
    from gpubench.run import pool

    return pool.resolve(args.gpus)


def spec_from_args(args: argparse.Namespace) -> S.SweepSpec:
    """The suite with the command line's overrides applied, validated (with --resume and no
    suite named: the one the run folder was started with)."""
    if args.extend and args.resume is None:
        raise ConfigError("--extend needs --resume DIR (the run folder to extend)")
    if args.retry_failed and args.resume is None:
        raise ConfigError("--retry-failed needs --resume DIR (the run folder to retry in)")
    if args.resume is not None and args.out is not None and args.out != args.resume:
        raise ConfigError(
            f"--out {args.out} and --resume {args.resume} name different folders; "
            "give --resume DIR alone"
        )
    if args.suite is None and args.resume is not None:
        from gpubench.run import folder
        from gpubench.store import suite_record

        spec = folder.spec_from_saved(folder.saved_suite(args.resume))
        # a folder is data: code it names by import path runs only where given again now
        where = str(args.resume / suite_record.FILE)
        user_code.check_given(spec.models, args.models or (), where, "--models")
        user_code.check_given(
            (spec.loader,), (), where, "in your suite file: sweep SUITE --resume DIR; loader ="
        )
    else:
        spec = load_suite(args.suite or DEFAULT_SUITE)
    # every axis has a flag of the same name
    overrides = {key: getattr(args, key) for key in S.AXES if getattr(args, key) is not None}
    if "batch_sizes" in overrides:  # issue 28: batch sizes given are the ones measured
        spec = dataclasses.replace(spec, grow_batch_sizes=())
    if "precisions" in overrides:  # and precisions given, emulated or not
        spec = dataclasses.replace(spec, skip_emulated=False)
    if args.options:
        models = overrides.get("models", spec.models)
        table = model_options.with_given(spec.model_options, args.options, tuple(models))
        spec = dataclasses.replace(spec, model_options=table)
    if args.price is not None:  # issue 32
        spec = dataclasses.replace(spec, prices=prices.from_flag(args.price, spec.prices))
    if args.epoch is not None:
        spec = dataclasses.replace(spec, prices=prices.with_epoch(args.epoch, spec.prices))
    # the suite's own value where a flag is not given (--cpu-watts: issue 49; --noise-budget: 51)
    given = {
        "profile": args.profile,
        "cpu_watts": args.cpu_watts,
        "noise_budget_s": args.noise_budget,
    }
    spec = dataclasses.replace(spec, **{k: v for k, v in given.items() if v is not None})
    if args.data_dir is not None:
        conv = dataclasses.replace(spec.convergence, data_dir=args.data_dir)
        spec = dataclasses.replace(spec, convergence=conv)
    if "models" in overrides:  # the suite's targets for the models the flag leaves out go
        spec = dataclasses.replace(
            spec, convergence=spec.convergence.for_models(tuple(overrides["models"]))
        )
    spec = validate(
        dataclasses.replace(spec, **overrides, budget=values.budget_from_args(args, spec.budget))
    )
    user_code.find_typed((*spec.models, spec.loader))
    searches_alone = args.shard is not None and args.plan is None and args.resume is None
    if spec.batch_sizes == S.AUTO and searches_alone:  # issue 23: such shards' plans disagree
        raise ConfigError(
            '--shard with batch_sizes = "auto" needs --plan FILE; allowed: the same '
            "--plan FILE for every shard (the first searches into it, the others read it)"
        )
    return spec


def overridden_flags(args: argparse.Namespace) -> list[str]:
    """The sweep's flags that change its suite's axes or budget, as typed (e.g. --models)."""
    given = [key for key in (*S.AXES, "steps", "max_time") if getattr(args, key) is not None]
    return ["--" + key.replace("_", "-") for key in given] + (["--option"] if args.options else [])
