"""Command-line parsing: turns flags into a SweepSpec, a Point or another command's arguments;
every bad value is a ConfigError naming it and what is allowed."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from gpubench.cli import values
from gpubench.cli.usage import Parser
from gpubench.config import model_options
from gpubench.config import spec as S
from gpubench.config.checks import (
    check_accumulate,
    check_batch_size,
    check_device,
    check_model,
    check_nproc,
    check_seed,
)
from gpubench.config.errors import ConfigError
from gpubench.config.model_options import encode
from gpubench.config.suite import SHIPPED, load_suite, shipped_names
from gpubench.config.validate import validate
from gpubench.models import MODEL_NAMES

SUITES_DIR = SHIPPED
DEFAULT_SUITE = "quick"


SUITES_DEFAULT = " (default: the suite's)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gpubench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    sweep = sub.add_parser("sweep", help="run a suite of training benchmarks")
    sweep.add_argument(
        "suite",
        nargs="?",
        default=None,
        help="a suite TOML file, or the name of a shipped suite: "
        f"{', '.join(shipped_names())} (default: {DEFAULT_SUITE}, or with --resume the suite "
        "the run was started with)",
    )
    sweep.add_argument(
        "--models",
        type=values.csv(check_model),
        help=f"comma-separated: {', '.join(MODEL_NAMES)}; {values.MODEL_PREFIXES}",
    )
    sweep.add_argument(
        "--size", type=values.choice(S.SIZES, "size"), help=f"the size preset: {', '.join(S.SIZES)}"
    )
    sweep.add_argument(
        "--devices",
        type=values.csv(check_device),
        help="comma-separated: auto (the CPU, plus CUDA where present), cpu, cuda, cuda:N",
    )
    sweep.add_argument(
        "--batch-sizes",
        type=values.auto_or(values.csv(lambda t: check_batch_size(values.int_value(t)))),
        help='comma-separated, or "auto": powers of two up to the largest that fits',
    )
    sweep.add_argument(
        "--precisions",
        type=values.csv(values.choice(S.PRECISIONS, "precision")),
        help=f"comma-separated: {', '.join(S.PRECISIONS)}",
    )
    sweep.add_argument(
        "--optimizers",
        type=values.csv(values.choice(S.OPTIMIZERS, "optimizer")),
        help=f"comma-separated: {', '.join(S.OPTIMIZERS)}",
    )
    sweep.add_argument(
        "--seeds",
        type=values.csv(lambda t: check_seed(values.int_value(t))),
        help="comma-separated whole numbers of 0 or more",
    )
    sweep.add_argument(
        "--data",
        type=values.choice(S.DATA_MODES, "data mode"),
        help="device (batches made once on the device) or host (copied from pinned host "
        "memory every step; CUDA)",
    )
    sweep.add_argument(
        "--compile",
        type=values.csv(values.choice(S.COMPILE_MODES, "compile mode")),
        help="eager, compile (torch.compile), or both: eager,compile",
    )
    sweep.add_argument(
        "--channels-last",
        type=values.csv(values.flag("channels_last")),
        help="false, true, or both (convolutional models only)",
    )
    sweep.add_argument(
        "--cuda-graph",
        type=values.csv(values.flag("cuda_graph")),
        help="false, true, or both: capture the whole step in a CUDA graph",
    )
    sweep.add_argument(
        "--cudnn-benchmark",
        type=values.csv(values.flag("cudnn_benchmark")),
        help="false, true, or both: let cuDNN autotune convolutions (torch.backends.cudnn."
        "benchmark; CUDA and convolutional models only)",
    )
    sweep.add_argument(
        "--threads",
        type=values.csv(values.thread_count),
        help="torch's intra-op threads per point: whole numbers of 1 or more, or auto "
        "(what torch picks); e.g. 1,2",
    )
    sweep.add_argument(
        "--parallel",
        type=values.csv(values.choice(S.PARALLEL_MODES, "parallel mode")),
        help="none, ddp, fsdp, or several: none,ddp (torch.distributed, one node)",
    )
    sweep.add_argument(
        "--nproc",
        type=values.csv(lambda t: check_nproc(values.int_value(t))),
        help="processes per node of the ddp and fsdp points, e.g. 1,2",
    )
    sweep.add_argument(
        "--scaling",
        type=values.csv(values.choice(S.SCALING_MODES, "scaling")),
        help="weak (batch per process), strong (global batch split), or both",
    )
    sweep.add_argument(  # issue 25
        "--accumulate",
        type=values.csv(lambda t: check_accumulate(values.int_value(t))),
        help="micro-batches per optimizer step, e.g. 1,2,4,8 (the batch size stays the "
        "effective batch: each micro-batch holds batch / accumulate samples)",
    )
    sweep.add_argument(
        "--checkpoint",
        type=values.csv(values.choice(S.CHECKPOINT_MODES, "checkpoint mode")),
        help="none, blocks (recompute the activations of the model's repeated blocks in "
        "backward), or both: none,blocks",
    )
    sweep.add_argument(
        "--steps",
        type=values.arg(values.positive_int),
        help="measure exactly this many steps per point (no adaptive stopping)",
    )
    sweep.add_argument(
        "--max-time",
        type=values.arg(values.positive_float),
        help="time budget in seconds for measuring one point",
    )
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
    sweep.add_argument(
        "--option",
        dest="options",
        action="append",
        default=[],
        type=values.arg(values.model_key_option),
        metavar="MODEL.KEY=VALUE",
        help="a model option, as in the suite's [model_options] table, over the suite's value "
        "for that key (repeat for more), e.g. --option transformer.layers=4",
    )
    _add_isolation_flags(sweep)
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
    for action in sweep._actions:  # the flags whose default is the suite's value
        if action.dest in (*S.AXES, "steps", "max_time", "profile"):
            action.help = (action.help or "") + SUITES_DEFAULT
    _add_max_batch_parser(sub)
    from gpubench.cli import tune_args  # issue 24

    tune_args.add_parser(sub, _add_isolation_flags)

    merge = sub.add_parser(
        "merge", help="join run folders (shards of a sweep, runs on other machines) into one"
    )
    merge.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="run folders")
    merge.add_argument("--out", type=Path, required=True, help="the new run folder")
    merge.add_argument(
        "--allow-duplicates",
        action="store_true",
        help="a point in several folders keeps its first ok row, or its first row where none "
        "is ok (default: refused)",
    )
    merge.add_argument(
        "--across-machines",
        action="store_true",
        help="set a parallel row against a one-process baseline measured on another machine "
        "(default: only against its own machine's)",
    )

    report = sub.add_parser("report", help="render the HTML report of one or more run folders")
    report.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="run folders")
    report.add_argument(
        "--out", type=Path, help="report .html file or folder (default: DIR/report.html)"
    )

    compare = sub.add_parser(
        "compare", help="compare two runs point by point; exit 1 on a regression"
    )
    compare.add_argument("base", type=Path, help="the baseline run folder")
    compare.add_argument("new", type=Path, help="the run folder to check")
    compare.add_argument(
        "--threshold",
        type=values.arg(values.percent),
        default=5.0,
        help="smallest slowdown of the median step time, in percent, that counts (default: 5)",
    )
    compare.add_argument(
        "--format",
        type=values.choice(("text", "markdown", "json"), "format"),
        default="text",
        help="text, markdown, json",
    )

    explain = sub.add_parser(
        "explain", help="print the verdict of run folders: fastest, bottleneck, next experiment"
    )
    explain.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="run folders")
    explain.add_argument(
        "--json",
        action="store_true",
        help="print the verdicts as JSON: per model and optimizer the winner's identity, the "
        "ties, how sure, the bottleneck and its evidence, the levers",
    )
    explain.add_argument(
        "--margin",
        type=values.arg(values.percent),
        metavar="PCT",
        help="the practical difference, in percent (default: 3): a smaller lead is a tie",
    )

    sub.add_parser("list", help="show the models, sizes, precisions, optimizers and suites")
    sub.add_parser("env", help="print the machine and software as JSON")
    return parser


def _add_isolation_flags(parser: argparse.ArgumentParser) -> None:
    from gpubench.run.memory_cap import parse_size
    from gpubench.run.sweep import DEFAULT_POINT_TIMEOUT_S

    parser.add_argument(
        "--max-memory",
        type=values.arg(parse_size),
        metavar="SIZE",
        help="cap each point's memory, e.g. 512M or 2G (CPU: the address space the point maps "
        "beyond what its worker holds when it starts)",
    )
    parser.add_argument(
        "--point-timeout",
        type=values.arg(values.positive_float),
        default=DEFAULT_POINT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"record a point as timeout after this long (default: {DEFAULT_POINT_TIMEOUT_S:g})",
    )


def _add_max_batch_parser(sub: Any) -> None:
    from gpubench.run.maxbatch import CEILING, PROBE_STEPS

    mb = sub.add_parser("max-batch", help="find the largest batch size that fits in memory")
    mb.add_argument(
        "--model",
        required=True,
        type=values.arg(check_model),
        help=f"one of {', '.join(MODEL_NAMES)}; {values.MODEL_PREFIXES}",
    )
    mb.add_argument(
        "--size",
        type=values.choice(S.SIZES, "size"),
        default="small",
        help=f"the size preset: {', '.join(S.SIZES)}",
    )
    mb.add_argument(
        "--device",
        type=values.arg(check_device),
        default="auto",
        help="auto (CUDA where present, else the CPU), cpu, cuda, cuda:N",
    )
    mb.add_argument(
        "--precision",
        type=values.choice(S.PRECISIONS, "precision"),
        default=S.PRECISIONS[0],
        help=", ".join(S.PRECISIONS),
    )
    mb.add_argument(
        "--optimizer",
        type=values.choice(S.OPTIMIZERS, "optimizer"),
        default="adamw",
        help=", ".join(S.OPTIMIZERS),
    )
    mb.add_argument(
        "--data",
        type=values.choice(S.DATA_MODES, "data mode"),
        default="device",
        help=", ".join(S.DATA_MODES),
    )
    mb.add_argument(
        "--seed",
        type=values.arg(lambda t: check_seed(values.int_value(t))),
        default=0,
        help="a whole number of 0 or more",
    )
    mb.add_argument(
        "--option",
        dest="options",
        action="append",
        default=[],
        type=values.arg(values.model_option),
        metavar="KEY=VALUE",
        help="a model option, as in a suite's [model_options] table (repeat for more), "
        "e.g. --option layers=2 --option seq_len=64",
    )
    _add_isolation_flags(mb)
    mb.add_argument(
        "--start", type=values.arg(values.positive_int), default=1, help="first batch size"
    )
    mb.add_argument(
        "--ceiling",
        type=values.arg(values.positive_int),
        default=CEILING,
        help="largest batch size to try",
    )
    mb.add_argument(
        "--probe-steps",
        type=values.arg(values.positive_int),
        default=PROBE_STEPS,
        help="training steps per probe, after one warm-up step",
    )
    mb.add_argument(
        "--exact",
        action="store_true",
        help="search to one sample (default: to a multiple of 8 or 2%% of the answer, whichever "
        "is coarser)",
    )
    mb.add_argument(
        "--time",
        action="store_true",
        help="also time the powers of two up to the answer, to find the throughput-optimal one",
    )
    mb.add_argument(
        "--steps", type=values.arg(values.positive_int), help="steps of the full measurements"
    )
    mb.add_argument(
        "--max-time", type=values.arg(values.positive_float), help="seconds per full measurement"
    )
    mb.add_argument("--json", action="store_true", help="print the result as JSON")
    mb.add_argument(  # issue 25
        "--target-batch",
        type=values.arg(values.positive_int),
        metavar="N",
        help="an effective batch: the fewest accumulation steps whose micro-batch fits, per "
        "--checkpoint mode, confirmed by a full measurement of N at that many steps",
    )
    mb.add_argument(
        "--checkpoint",
        type=values.csv(values.choice(S.CHECKPOINT_MODES, "checkpoint mode")),
        help="the largest micro-batch with these modes: none, blocks or none,blocks "
        "(default: none,blocks with --target-batch, else none)",
    )


def spec_from_args(args: argparse.Namespace) -> S.SweepSpec:
    """The suite file with the command line's overrides applied, validated. With --resume and
    no suite named, the suite is the one the run folder was started with."""
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

        spec = folder.spec_from_saved(folder.saved_suite(args.resume))
    else:
        spec = load_suite(args.suite or DEFAULT_SUITE)
    overrides = {
        key: getattr(args, key)
        for key in S.AXES  # every axis has a flag of the same name
        if getattr(args, key) is not None
    }
    if "batch_sizes" in overrides:  # issue 28: batch sizes given are the ones measured
        spec = dataclasses.replace(spec, grow_batch_sizes=())
    if args.profile is not None:
        spec = dataclasses.replace(spec, profile=args.profile)
    if args.options:
        models = overrides.get("models", spec.models)
        table = model_options.with_given(spec.model_options, args.options, models)
        spec = dataclasses.replace(spec, model_options=table)
    if args.data_dir is not None:
        conv = dataclasses.replace(spec.convergence, data_dir=args.data_dir)
        spec = dataclasses.replace(spec, convergence=conv)
    spec = validate(
        dataclasses.replace(spec, **overrides, budget=values.budget_from_args(args, spec.budget))
    )
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


def point_from_args(args: argparse.Namespace) -> S.Point:
    """max-batch's point (its batch size is where the search starts)."""
    if args.start > args.ceiling:
        raise ConfigError(
            f"--start {args.start} is above --ceiling {args.ceiling}; allowed: start <= ceiling"
        )
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return S.Point(
        args.model,
        args.size,
        device,
        args.precision,
        args.optimizer,
        args.start,
        args.seed,
        args.data,
        model_options=encode(dict(args.options)),
    )
