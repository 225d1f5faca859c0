"""`gpubench tune`'s arguments, and the TuneRequest they make (registered by parser.py)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from gpubench.cli import flags, values
from gpubench.config import registry, user_code
from gpubench.config import spec as S
from gpubench.config.checks import MAX_SECONDS, shown
from gpubench.config.errors import ConfigError
from gpubench.config.model_options import for_model
from gpubench.config.spec import Budget
from gpubench.tune.space import MICRO_RANGE, fixed_effective_batch

DEFAULT_BUDGET = "15m"
_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*(s|m|h)?$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(text: str) -> float:
    """Seconds of a duration such as 90, 90s, 15m, 1.5h; above 0."""
    m = _DURATION.match(text.strip())
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)] if m else None
    if seconds is None or not 0 < seconds <= MAX_SECONDS:
        raise ConfigError(
            f"invalid --budget {shown(text)}; allowed: a wall-clock time above 0 and up to a "
            "year, in seconds, minutes or hours, e.g. 90s, 15m, 1.5h"
        )
    return seconds


# tune's axis flags: the sweep's (flags.AXES), their values searched.
TUNE_AXES = (
    "--batch-sizes",
    *(str(s.flag) for s in registry.SETTINGS if s.searched),
    "--accumulate",
)
# Each axis flag's dest but the batch sizes' (with one --batch-sizes value, --accumulate's
# are the micro-batches searched), and the Point field it names.
AXIS_FLAGS = {
    str(s.axis): s.name
    for s in registry.SETTINGS
    if s.flag in TUNE_AXES and s.flag != "--batch-sizes"
}


def add_parser(sub: Any) -> None:
    t = sub.add_parser(
        "tune",
        help="search the fastest configuration of one model on one device, within a time budget",
    )
    flags.add_one_model_flags(t, model_required=False, size_default=None)
    t.add_argument(
        "--budget",
        type=values.arg(duration),
        default=None,
        help=f"wall-clock time for the whole tune, e.g. 90s, 15m, 1.5h (default: {DEFAULT_BUDGET}"
        "); reaching it ends the search with the best so far",
    )
    flags.add_axis_flags(
        t,
        TUNE_AXES,
        {
            "--batch-sizes": " (default: auto)",
            "--precisions": " (default: all the device runs)",
            "--compile": " (default: both)",
            "--channels-last": " (default: both on convolutional models, else false)",
            "--cuda-graph": " (default: both on CUDA, else false)",
            "--cudnn-benchmark": " (default: both on CUDA and convolutional models, else false)",
            "--accumulate": " (with one --batch-sizes value, the effective batch; default: "
            f"every split whose micro-batch fits, down to 1/{MICRO_RANGE} of the largest)",
            "--checkpoint": " (default: both where one --batch-sizes value fixes the effective "
            "batch and the model has repeated blocks, else none)",
            "--threads": " (default on the CPU: 1, 2, 4, ... up to torch's own)",
        },
        "; one value fixes the axis, several restrict the search to them",
    )
    flags.add_measuring_flags(t, sweep=False)
    for action in t._actions:  # the last round measures as told; earlier ones a share of it
        if action.dest in ("steps", "max_time"):
            action.help = f"{action.help}, in the last round (earlier rounds: a share of it)"
    t.add_argument(
        "--target",
        metavar="METRIC=VALUE",
        help="convergence mode: batch size x learning rate by time to the target",
    )
    t.add_argument(
        "--seeds",
        type=values.arg(values.positive_int),
        default=3,
        help="with --target: the answer is re-run on this many seeds, for its spread (default: 3)",
    )
    t.add_argument("--out", type=Path, help="run folder (default: results/<timestamp>)")
    t.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="go on with the tune in DIR (its own settings; --budget gives this run's time)",
    )
    t.add_argument("--quiet", action="store_true", help="no line per measurement")
    t.add_argument(
        "--no-confirm",
        dest="confirm",
        action="store_false",
        help="skip the interleaved re-measurement of the leaders at the end",
    )
    t.set_defaults(request_defaults={dest: t.get_default(dest) for dest in _REQUEST})


def budget_s(args: argparse.Namespace) -> float:
    """--budget in seconds (the default where none was given)."""
    return float(args.budget) if args.budget is not None else duration(DEFAULT_BUDGET)


# The flags that shape a tune's request: a resumed tune keeps its folder's, so each must keep
# its default (the parser's own, handed on as `request_defaults` by add_parser).
_REQUEST: tuple[str, ...] = ("model", "size", "device", "optimizer", "batch_sizes", "data")
_REQUEST += ("seed", "options", "steps", "max_time", *AXIS_FLAGS)


def _nothing_but_the_budget(args: argparse.Namespace) -> None:
    """--resume goes on with the folder's own request: a flag that would change it is refused
    (it was ignored before) rather than dropped without a word."""
    # --model may be given again: a model named by import path runs only where it is (a folder
    # is data, config.user_code); the tune checks that it is the folder's own
    given = [
        d
        for d, default in args.request_defaults.items()
        if getattr(args, d) != default and d != "model"
    ]
    if given:
        flag = "--" + given[0].replace("_", "-").replace("options", "option")
        raise ConfigError(
            f"tune --resume {args.resume} goes on with that folder's own settings, so {flag} "
            "cannot change them; allowed with --resume: --budget, --max-memory, "
            "--point-timeout, --quiet, --no-confirm"
        )


def request_from_args(args: argparse.Namespace) -> Any:
    """The TuneRequest of `tune`'s flags (with --resume: only the budget counts, the folder's
    request the rest)."""
    from gpubench.tune.tuner import TuneRequest

    if args.resume is not None and args.out is not None and args.out != args.resume:
        raise ConfigError(
            f"--out {args.out} and --resume {args.resume} name different folders; "
            "give --resume DIR alone"
        )
    if args.model is None and args.resume is None:
        raise ConfigError("tune needs --model M (or --resume DIR)")
    if args.resume is not None:
        _nothing_but_the_budget(args)
        user_code.find_typed((args.model,))
        return TuneRequest(args.model or "", "", "", "", budget_s=budget_s(args))
    user_code.find_typed((args.model,))
    named = {field: getattr(args, f) for f, field in AXIS_FLAGS.items() if getattr(args, f)}
    sizes = None if args.batch_sizes in (None, S.AUTO) else tuple(args.batch_sizes)
    fixed_effective_batch(sizes, named.get("accumulate"))  # checked before anything is written
    return TuneRequest(
        args.model,
        args.size or "small",
        flags.resolved_device(args.device),
        args.optimizer,
        args.data,
        args.seed,
        for_model(args.model, args.options, "tune"),
        named,
        sizes,
        budget_s(args),
        values.budget_from_args(args, Budget()),
    )
