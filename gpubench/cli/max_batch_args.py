"""`gpubench max-batch`'s arguments, and the Point they make (its batch size is where the
search starts)."""

from __future__ import annotations

import argparse
from typing import Any

from gpubench.cli import flags, values
from gpubench.config import loader as loader_axes
from gpubench.config import spec as S
from gpubench.config import user_code
from gpubench.config.errors import ConfigError
from gpubench.config.model_options import encode, for_model


def add_parser(sub: Any) -> None:
    from gpubench.run.maxbatch import CEILING, PROBE_STEPS

    mb = sub.add_parser("max-batch", help="find the largest batch size that fits in memory")
    flags.add_one_model_flags(mb, model_required=True, size_default="small")
    mb.add_argument(
        "--precision",
        type=values.choice(S.PRECISIONS, "precision"),
        default=S.PRECISIONS[0],
        help=", ".join(S.PRECISIONS),
    )
    flags.add_measuring_flags(mb, sweep=False)
    for name, default, text in (
        ("--start", 1, "first batch size"),
        ("--ceiling", CEILING, "largest batch size to try"),
        ("--probe-steps", PROBE_STEPS, "training steps per probe, after one warm-up step"),
    ):
        mb.add_argument(name, type=values.arg(values.positive_int), default=default, help=text)
    mb.add_argument(
        "--exact",
        action="store_true",
        help="search to one sample (default: to a multiple of 8 or 2%% of the answer, whichever "
        "is coarser)",
    )
    mb.add_argument(
        "--time",
        action="store_true",
        help="also time batches up to the answer by the growth rule (from 1 until throughput "
        "flattens), to find the throughput-optimal one",
    )
    mb.add_argument("--json", action="store_true", help="print the result as JSON")
    mb.add_argument(  # issue 25
        "--target-batch",
        type=values.arg(values.positive_int),
        metavar="N",
        help="an effective batch: the fewest accumulation steps whose micro-batch fits, per "
        "--checkpoint mode, confirmed by a full measurement of N at that many steps",
    )
    flags.add_axis_flags(
        mb,
        ("--checkpoint",),
        {
            "--checkpoint": "; the largest micro-batch with each (default: none,blocks with "
            "--target-batch, else none)"
        },
    )


def point_from_args(args: argparse.Namespace) -> S.Point:
    """max-batch's point (its batch size is where the search starts)."""
    options = for_model(args.model, args.options, "max-batch")
    if args.start > args.ceiling:
        raise ConfigError(
            f"--start {args.start} is above --ceiling {args.ceiling}; allowed: start <= ceiling"
        )
    user_code.find_typed((args.model,))  # a module:function typed here, from this folder too
    device = flags.resolved_device(args.device)
    return S.Point(
        args.model,
        args.size,
        device,
        args.precision,
        args.optimizer,
        args.start,
        args.seed,
        args.data,
        model_options=encode(options),
        **loader_axes.default_fields(device, args.data),
    )
