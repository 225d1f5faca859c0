"""Command-line parsing: turns flags into a SweepSpec (or another command's arguments)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gpubench import spec as S

SUITES_DIR = Path(__file__).parent / "suites"
DEFAULT_SUITE = "quick"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise S.ConfigError(message)


def _arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """argparse turns a ValueError into 'invalid value'; keep our message instead."""

    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except S.ConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    wrapped.__name__ = getattr(parse, "__name__", "value")
    return wrapped


def _csv(check: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    def parse(text: str) -> tuple[Any, ...]:
        items = tuple(check(part.strip()) for part in text.split(",") if part.strip())
        if not items:
            raise S.ConfigError(f"empty list {text!r}; give comma-separated values")
        return items

    return _arg(parse)


def _choice(allowed: tuple[str, ...], what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in allowed:
            raise S.ConfigError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
        return value

    return _arg(check)


def _bool(what: str) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        if value.lower() not in ("true", "false"):
            raise S.ConfigError(f"invalid {what} {value!r}; allowed: true, false")
        return value.lower() == "true"

    return _arg(check)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise S.ConfigError(
            f"invalid number {text!r}; allowed: a whole number of 1 or more"
        ) from None
    if value < 1:
        raise S.ConfigError(f"invalid number {value!r}; allowed: a whole number of 1 or more")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise S.ConfigError(f"invalid number of seconds {text!r}; allowed: a number above 0")
    return value


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise S.ConfigError(f"invalid percentage {text!r}; allowed: a number of 0 or more")
    return value


def _int_value(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpubench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sweep = sub.add_parser("sweep", help="run a suite of training benchmarks")
    sweep.add_argument(
        "suite",
        nargs="?",
        default=DEFAULT_SUITE,
        help="a suite TOML file, or the name of a shipped suite (default: quick)",
    )
    sweep.add_argument("--models", type=_csv(S.check_model))
    sweep.add_argument("--size", type=_choice(S.SIZES, "size"))
    sweep.add_argument("--devices", type=_csv(S.check_device))
    sweep.add_argument("--batch-sizes", type=_csv(lambda t: S.check_batch_size(_int_value(t))))
    sweep.add_argument("--precisions", type=_csv(_choice(S.PRECISIONS, "precision")))
    sweep.add_argument("--optimizers", type=_csv(_choice(S.OPTIMIZERS, "optimizer")))
    sweep.add_argument("--seeds", type=_csv(lambda t: S.check_seed(_int_value(t))))
    sweep.add_argument("--data", type=_choice(S.DATA_MODES, "data mode"))
    sweep.add_argument(
        "--compile",
        type=_csv(_choice(S.COMPILE_MODES, "compile mode")),
        help="eager, compile (torch.compile), or both: eager,compile",
    )
    sweep.add_argument(
        "--channels-last",
        type=_csv(_bool("channels_last")),
        help="false, true, or both (convolutional models only)",
    )
    sweep.add_argument(
        "--cuda-graph",
        type=_csv(_bool("cuda_graph")),
        help="false, true, or both: capture the whole step in a CUDA graph",
    )
    sweep.add_argument(
        "--steps",
        type=_arg(_positive_int),
        help="measure exactly this many steps per point (no adaptive stopping)",
    )
    sweep.add_argument(
        "--max-time",
        type=_arg(_positive_float),
        help="time budget in seconds for measuring one point",
    )
    sweep.add_argument("--out", type=Path, help="run folder (default: results/<timestamp>)")
    sweep.add_argument(
        "--data-dir", help="folder of a file-based data set for convergence runs (cifar10)"
    )
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")

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
        type=_arg(_percent),
        default=5.0,
        help="smallest slowdown of the median step time, in percent, that counts (default 5)",
    )
    compare.add_argument(
        "--format", type=_choice(("text", "markdown", "json"), "format"), default="text"
    )

    sub.add_parser("list", help="show the models, sizes, precisions, optimizers and suites")
    sub.add_parser("env", help="print the machine and software as JSON")
    return parser


def resolve_suite(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise S.ConfigError(f"suite file {name_or_path!r} does not exist")
        return path
    shipped = SUITES_DIR / f"{name_or_path}.toml"
    if not shipped.is_file():
        names = sorted(p.stem for p in SUITES_DIR.glob("*.toml"))
        raise S.ConfigError(
            f"unknown suite {name_or_path!r}; allowed: a .toml file or one of {', '.join(names)}"
        )
    return shipped


def spec_from_args(args: argparse.Namespace) -> S.SweepSpec:
    """The suite file with the command line's overrides applied, validated."""
    spec = S.load_suite(resolve_suite(args.suite))
    overrides = {
        key: getattr(args, key)
        for key in (
            "models",
            "size",
            "devices",
            "batch_sizes",
            "precisions",
            "optimizers",
            "seeds",
            "data",
            "compile",
            "channels_last",
            "cuda_graph",
        )
        if getattr(args, key) is not None
    }
    budget = spec.budget
    if args.steps is not None:
        budget = S.Budget.fixed(args.steps, budget.warmup_steps)
    if args.max_time is not None:
        budget = dataclasses.replace(
            budget, max_time_s=args.max_time, min_time_s=min(budget.min_time_s, args.max_time)
        )
    if args.data_dir is not None:
        conv = dataclasses.replace(spec.convergence, data_dir=args.data_dir)
        spec = dataclasses.replace(spec, convergence=conv)
    return S.validate(dataclasses.replace(spec, **overrides, budget=budget))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return _dispatch(args)
    except S.ConfigError as e:
        print(f"gpubench: error: {e}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    from gpubench import console

    if args.command == "sweep":
        return console.sweep(spec_from_args(args), args.out, quiet=args.quiet)
    if args.command == "report":
        return console.report(args.dirs, args.out)
    if args.command == "compare":
        return console.compare(args.base, args.new, args.threshold, args.format)
    if args.command == "list":
        return console.list_all(SUITES_DIR)
    if args.command == "env":
        return console.show_env()
    raise AssertionError(args.command)
