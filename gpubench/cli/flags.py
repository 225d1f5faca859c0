"""The flags that sweep, max-batch and tune share, defined once: the same name, help and check
in each command, so a value one command refuses, every command refuses alike."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from gpubench.cli import values
from gpubench.config import spec as S
from gpubench.config.checks import (
    check_accumulate,
    check_batch_size,
    check_device,
    check_model,
    check_nproc,
    check_power_limit,
    check_seed,
)
from gpubench.config.loader import check_pin, check_prefetch, check_workers
from gpubench.models import MODEL_NAMES


def _seed(text: str) -> int:
    return check_seed(values.int_value(text))


def _power_limit(text: str) -> int | None:  # issue 32
    return check_power_limit(text if text == "none" else values.int_value(text))


def _pin(text: str) -> bool | None:
    """--pin-memory's value: true, false or auto (None)."""
    low = text.lower()
    return check_pin(low == "true" if low in ("true", "false") else low)


Axis = tuple[Callable[[str], Any], str]  # how a flag reads its text, and what it says it takes


def _choices(what: str, allowed: tuple[str, ...], text: str = "") -> Axis:
    return values.csv(
        values.choice(allowed, what)
    ), text or f"comma-separated: {', '.join(allowed)}"


def _switch(name: str, text: str) -> Axis:
    return values.csv(values.flag(name)), f"false, true, or both{text}"


def _whole(check: Callable[[object], int]) -> Callable[[str], tuple[Any, ...]]:
    return values.csv(lambda text: check(values.int_value(text)))


# The sweep's axis flags (several values: a point each; tune's: the values searched), in
# --help's order.
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
        values.auto_or(_whole(check_batch_size)),
        'comma-separated, or "auto": powers of two up to the largest that fits',
    ),
    "--precisions": _choices("precision", S.PRECISIONS),
    "--optimizers": _choices("optimizer", S.OPTIMIZERS),
    "--compile": _choices(
        "compile mode", S.COMPILE_MODES, "eager, compile (torch.compile), or both: eager,compile"
    ),
    "--channels-last": _switch("channels_last", " (convolutional models only)"),
    "--cuda-graph": _switch("cuda_graph", ": capture the whole step in a CUDA graph"),
    "--cudnn-benchmark": _switch(
        "cudnn_benchmark",
        ": let cuDNN autotune convolutions (torch.backends.cudnn.benchmark; CUDA and "
        "convolutional models only)",
    ),
    "--threads": (
        values.csv(values.thread_count),
        "torch's intra-op threads per point: whole numbers of 1 or more, or auto (what torch "
        "picks); e.g. 1,2",
    ),
    "--parallel": _choices(
        "parallel mode",
        S.PARALLEL_MODES,
        "none, ddp, fsdp, or several: none,ddp (torch.distributed, one node)",
    ),
    "--nproc": (_whole(check_nproc), "processes per node of the ddp and fsdp points, e.g. 1,2"),
    "--scaling": _choices(
        "scaling", S.SCALING_MODES, "weak (batch per process), strong (global batch split), or both"
    ),
    "--accumulate": (  # issue 25
        _whole(check_accumulate),
        "micro-batches per optimizer step, e.g. 1,2,4,8 (the batch size stays the effective "
        "batch: each micro-batch holds batch / accumulate samples)",
    ),
    "--checkpoint": _choices(
        "checkpoint mode",
        S.CHECKPOINT_MODES,
        "none, blocks (recompute the activations of the model's repeated blocks in backward), "
        "or both: none,blocks",
    ),
    "--power-limit": (  # issue 32
        values.csv(_power_limit),
        "GPU power limits in watts, set through NVML for each point and restored after, e.g. "
        "300,500,700 (needs root and a driver that allows it; refused with the reason where "
        "not, and on the CPU)",
    ),
    # issue 31: the DataLoader's axes (--data loader)
    "--loader-workers": (
        values.csv(lambda text: check_workers(values.int_value(text))),
        "DataLoader worker processes per point, e.g. 0,2,4,8, or auto (half the cores, at "
        "most 4); --data loader",
    ),
    "--pin-memory": (
        values.csv(_pin),
        "false, true, both, or auto (on for CUDA): the loader's batches in pinned host memory",
    ),
    "--prefetch": (
        values.csv(lambda text: check_prefetch(values.int_value(text))),
        "batches each loader worker loads ahead, e.g. 2,4, or auto (PyTorch's 2)",
    ),
    "--persistent-workers": _switch(
        "persistent_workers", ": keep the loader's workers between epochs"
    ),
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
    from gpubench.run.sweep import DEFAULT_POINT_TIMEOUT_S

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
        default=DEFAULT_POINT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"record a point as timeout after this long (default: {DEFAULT_POINT_TIMEOUT_S:g})",
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
    parser.add_argument(
        "--size",
        type=values.choice(S.SIZES, "size"),
        default=size_default,
        help=f"the size preset: {', '.join(S.SIZES)}"
        + ("" if size_default else " (default: small; with --target the convergence suite's)"),
    )
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
