"""The flags that sweep, max-batch and tune share, defined once: the same name, help and check
in each command, so a value one command refuses, every command refuses alike."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from gpubench.cli import values
from gpubench.config import registry
from gpubench.config import spec as S
from gpubench.config.checks import check_batch_size, check_device, check_model, check_seed
from gpubench.config.registry import Setting
from gpubench.models import MODEL_NAMES
from gpubench.store.wording import number


def _seed(text: str) -> int:
    return check_seed(values.int_value(text))


Axis = tuple[Callable[[str], Any], str]  # how a flag reads its text, and what it says it takes


def _text_value(text: str) -> object:
    """One value of a flag as a suite file would hold it: a whole number, true or false, or the
    word as it is ("auto", "none")."""
    low = text.lower()
    return low == "true" if low in ("true", "false") else values.int_value(text)


def _axis(s: Setting) -> Axis:
    """A setting's axis flag, read and checked as the registry says (config.registry)."""
    if s.choices:
        allowed = ", ".join(s.choices)
        return values.csv(values.choice(s.choices, s.what or s.name)), (
            s.help or f"comma-separated: {allowed}"
        )
    if s.type is bool:
        return values.csv(values.flag(s.name)), f"false, true, or both{s.help}"
    return values.csv(lambda text: s.checked(_text_value(text))), s.help


# The sweep's axis flags (several values: a point each; tune's: the values searched), in
# --help's order: the model, size, devices and batch sizes, then every setting's axis but
# --data and --seeds (add_measuring_flags: one model's commands take them too).
AXES: dict[str, Axis] = {
    "--models": (
        values.csv(check_model),
        f"comma-separated: {', '.join(MODEL_NAMES)}; {values.MODEL_PREFIXES}",
    ),
    "--size": (values.choice(S.SIZES, "size"), f"the size preset: {', '.join(S.SIZES)}"),
    "--devices": (
        values.csv(check_device),
        "comma-separated: auto (the CPU, plus CUDA where present), cpu, cuda, cuda:N",
    ),
    "--batch-sizes": (
        values.auto_or(
            values.csv(lambda text: check_batch_size(values.int_value(text)), gaps=False)
        ),
        'comma-separated, or "auto": grown from 1 until throughput flattens (docs/suites.md)',
    ),
    **{
        str(s.flag): _axis(s)
        for s in registry.axes()
        if s.axis in S.AXES
        and s.axis not in ("models", "size", "devices", "batch_sizes", "data", "seeds")
    },
}


def add_axis_flags(
    parser: argparse.ArgumentParser,
    names: tuple[str, ...],
    notes: Mapping[str, str] | None = None,
    suffix: str = "",
) -> None:
    """The axis flags `names` as AXES defines them, each help with its note from `notes`
    (a default, say) and `suffix` after it."""
    for name in names:
        parse, text = AXES[name]
        parser.add_argument(name, type=parse, help=text + (notes or {}).get(name, "") + suffix)


def add_measuring_flags(parser: argparse.ArgumentParser, *, sweep: bool) -> None:
    """--data, --seed (the sweep: --seeds, a list), --option, --steps, --max-time, --max-memory
    and --point-timeout. The sweep's --data and --seeds default to the suite's value (None
    here); a command of one model measures on the device's own batches and seed 0."""
    from gpubench.run.memory_cap import parse_size

    parser.add_argument(
        "--data",
        type=values.choice(S.DATA_MODES, "data mode"),
        default=None if sweep else "device",
        help="device (batches made once on the device), host (copied from pinned host "
        "memory every step; CUDA) or loader (a DataLoader decoding files in workers)",
    )
    if sweep:
        parser.add_argument(
            "--seeds",
            type=values.csv(_seed),
            help="comma-separated whole numbers of 0 or more",
        )
    else:
        parser.add_argument(
            "--seed", type=values.arg(_seed), default=0, help="a whole number of 0 or more"
        )
    parser.add_argument(
        "--option",
        dest="options",
        action="append",
        default=[],
        type=values.arg(values.model_option),
        metavar="MODEL.KEY=VALUE",
        help="a model option, as in a suite's [model_options] table (a sweep's: over the suite's "
        "value for that key); repeat for more, e.g. --option transformer.layers=4 (KEY=VALUE "
        "without the model is deprecated: read as the one model measured)",
    )
    parser.add_argument(
        "--steps",
        type=values.arg(values.positive_int),
        help="measure exactly this many steps per point, with no adaptive stopping",
    )
    parser.add_argument(
        "--max-time",
        type=values.arg(values.positive_float),
        help="time budget in seconds for measuring one point",
    )
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
        default=S.DEFAULT_POINT_TIMEOUT_S,
        metavar="SECONDS",
        help="record a point as timeout after this long "
        f"(default: {number(S.DEFAULT_POINT_TIMEOUT_S)})",
    )


def add_one_model_flags(
    parser: argparse.ArgumentParser, *, model_required: bool, size_default: str | None
) -> None:
    """--model, --size, --device and --optimizer of a command that measures one model on one
    device (max-batch, tune)."""
    parser.add_argument(
        "--model",
        required=model_required,
        type=values.arg(check_model),
        help=f"{', '.join(MODEL_NAMES)}; {values.MODEL_PREFIXES}",
    )
    parse, text = AXES["--size"]
    default = "" if size_default else " (default: small; with --target the convergence suite's)"
    parser.add_argument("--size", type=parse, default=size_default, help=text + default)
    parser.add_argument(
        "--device",
        type=values.arg(check_device),
        default="auto",
        help="auto (CUDA where present, else the CPU), cpu, cuda, cuda:N",
    )
    parser.add_argument(
        "--optimizer",
        type=values.choice(S.OPTIMIZERS, "optimizer"),
        default="adamw",
        help=f"the optimizer, never searched: {', '.join(S.OPTIMIZERS)}",
    )


def resolved_device(device: str) -> str:
    """--device with auto made CUDA where torch sees it, else the CPU."""
    from gpubench.harness.stepbench import resolve_device

    return device if device != "auto" else str(resolve_device(device))
