"""`gpubench compare --ab BASE_REF`'s arguments: the A/B gate's margin and rounds, and what it
measures: points (a suite and the sweep's axis flags; by default DEFAULT_POINTS, three points),
or pytest-benchmark tests (--pytest PATH...)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from gpubench.cli import flags, values
from gpubench.config import spec as S
from gpubench.config.errors import ConfigError
from gpubench.store.wording import number

# The points measured where no --suite and no axis flag says otherwise (12 rounds of them took
# 2 to 2.6 minutes a gate on the quiet 2-core CPU, 2026-12-02): each reference model
# once, at its CPU-sized preset, in fp32 with adamw at batch 64, on every device here, with one
# intra-op thread: on a shared CPU two threads stall on each other whenever another process
# takes a core (mlp/tiny B=64 on the busy 2-core CPU: 355-10,665 samples/s with its 2 threads,
# 21,600-48,700 with 1, 2026-12-02).
DEFAULT_POINTS: dict[str, Any] = {
    "models": ("mlp", "cnn", "transformer"),
    "size": "small",
    "devices": ("auto",),
    "batch_sizes": (64,),
    "precisions": ("fp32",),
    "optimizers": ("adamw",),
    "threads": (1,),
}
DEFAULT_ROUNDS = 12
DEFAULT_MARGIN_PCT = 5.0
MIN_ROUNDS = 6  # the fewest whose median ratio has a 95% interval (science.regression)
_AB_ONLY = ("suite", "margin", "rounds", "out", "pytest")


def _rounds(text: str) -> int:
    n = values.int_value(text)
    if not isinstance(n, int) or isinstance(n, bool) or n < MIN_ROUNDS:
        raise ConfigError(
            f"invalid --rounds {text!r}; allowed: a whole number of {MIN_ROUNDS} or more "
            "(the fewest whose median ratio has a 95% interval)"
        )
    return n


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 100:
        raise ConfigError(
            f"invalid --margin {text!r}; allowed: a percentage above 0 and below 100, e.g. 5"
        )
    return value


def add_flags(compare: argparse.ArgumentParser) -> None:
    """compare's --ab flags: the base, the margin, the rounds, the folder, and the points."""
    default = ", ".join(
        f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, tuple) else v}"
        for k, v in DEFAULT_POINTS.items()
    )
    ab = compare.add_argument_group(
        "A/B gate (--ab)",
        f"the points measured: a suite and the sweep's axis flags over it (default: {default}: "
        "3 points, 12 rounds: about 2.5 minutes on a quiet 2-core CPU)",
    )
    ab.add_argument(
        "--ab",
        metavar="BASE_REF",
        help="measure the working tree's code against this commit's (a branch, tag or commit "
        "of the checkout here), alternately in one job; exit 1 where a point is slower by more "
        "than --margin at 95%% confidence",
    )
    ab.add_argument(
        "--margin",
        type=values.arg(_margin),
        metavar="PCT",
        help="the slowdown that fails the gate, in percent "
        f"(default: {number(DEFAULT_MARGIN_PCT)})",
    )
    ab.add_argument(
        "--rounds",
        type=values.arg(_rounds),
        metavar="N",
        help=f"rounds, each a fresh process of each version (default: {DEFAULT_ROUNDS}; "
        f"{MIN_ROUNDS} at the least)",
    )
    ab.add_argument(
        "--out",
        type=Path,
        help="folder for ab.json, the gate's record (default: results/<timestamp>)",
    )
    ab.add_argument(
        "--pytest",
        nargs="+",
        metavar="PATH",
        help="measure these pytest-benchmark tests instead of points (test files, folders or "
        "node IDs of the checkout: the gpubench fixture's or plain benchmark ones), each version's "
        "own copy in a fresh pytest process per round; needs pytest-benchmark",
    )
    ab.add_argument(
        "--suite",
        help="a suite TOML file or a shipped suite's name whose points are measured (its axes; "
        "flags below override them)",
    )
    flags.add_axis_flags(ab, tuple(flags.AXES))


def check_usage(args: argparse.Namespace) -> None:
    """ConfigError naming the flag where compare's two uses are mixed: --ab with run folders,
    the gate's flags without --ab, or folders missing without it."""
    if args.ab is not None:
        if args.base is not None:
            raise ConfigError(
                f"compare --ab {args.ab!r} takes no run folder (got {str(args.base)!r}); "
                "allowed: compare BASE NEW (two run folders), or compare --ab BASE_REF"
            )
        if args.threshold is not None:
            raise ConfigError("--threshold is for two run folders; compare --ab takes --margin")
        if args.format == "markdown":
            raise ConfigError("invalid --format 'markdown' with --ab; allowed: text, json")
        if args.pytest is not None:
            given = [k for k in ("suite", *S.AXES) if getattr(args, k, None) is not None]
            if given:
                flag = "--" + given[0].replace("_", "-")
                raise ConfigError(
                    f"{flag} chooses points; compare --ab --pytest measures the benchmark tests "
                    "named; allowed: one or the other"
                )
        return
    given = [k for k in (*_AB_ONLY, *S.AXES) if getattr(args, k, None) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(f"{flag} is for compare --ab BASE_REF; allowed there only")
    if args.base is None or args.new is None:
        raise ConfigError(
            "compare needs two run folders, BASE NEW, or --ab BASE_REF (this tree's code "
            "against that commit's)"
        )


def points_from_args(args: argparse.Namespace) -> list[S.Point]:
    """The points the gate measures: --suite's (default: DEFAULT_POINTS) with the axis flags
    over it, validated; ConfigError where they are not a speed sweep's listed points."""
    from gpubench.config.suite import load_suite
    from gpubench.config.validate import validate

    if args.suite is not None:
        spec = load_suite(args.suite)
    else:
        spec = dataclasses.replace(load_suite("quick"), **DEFAULT_POINTS)
    overrides = {k: getattr(args, k) for k in S.AXES if getattr(args, k, None) is not None}
    spec = validate(dataclasses.replace(spec, **overrides))
    if spec.mode != "speed":
        raise ConfigError(
            f"compare --ab measures speed; the suite {args.suite!r} is a {spec.mode} one"
        )
    if spec.batch_sizes == S.AUTO:
        raise ConfigError(
            'compare --ab needs batch sizes listed, not "auto"; allowed: --batch-sizes 16,64'
        )
    points = spec.points()
    parallel = [p for p in points if p.parallel != "none"]
    if parallel:
        raise ConfigError(
            f"compare --ab measures one process per point; {parallel[0].label()} is parallel"
        )
    return points
