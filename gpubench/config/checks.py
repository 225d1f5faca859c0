"""Validation of single values, shared by the suite parser, the CLI and the spec's validation.
Each check returns the value or raises ConfigError naming it and what is allowed."""

from __future__ import annotations

import math
import re
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.models import MODEL_NAMES

_USER_MODEL = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# issue 16: a library's model by name, e.g. hf:gpt2, timm:vit_small_patch16_224.augreg_in21k
_ECOSYSTEM = re.compile(r"^(torchvision|timm|hf):[A-Za-z0-9_][\w.\-]*$")
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
# threads = "auto" (stored as None): the intra-op thread count torch picks for the worker.
THREADS_AUTO = "auto"


def check_one_of(value: object, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
    return value


def check_model(name: object) -> str:
    """A model name's form (whether it builds is config.model_options.check_buildable's job)."""
    if isinstance(name, str) and (
        name in MODEL_NAMES or _ECOSYSTEM.match(name) or _USER_MODEL.match(name)
    ):
        return name
    raise ConfigError(
        f"unknown model {name!r}; allowed: {', '.join(MODEL_NAMES)}, torchvision:NAME, "
        "timm:NAME, hf:MODEL_TYPE, or 'package.module:function' returning a Workload"
    )


def check_device(name: object) -> str:
    if not isinstance(name, str) or not _DEVICE.match(name):
        raise ConfigError(f"unknown device {name!r}; allowed: auto, cpu, cuda, cuda:N")
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(
                f"device {name!r} asked for, but this machine has no CUDA device; "
                "allowed here: auto, cpu"
            )
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            here = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
            raise ConfigError(
                f"device {name!r} does not exist; allowed here: auto, cpu, cuda, {', '.join(here)}"
            )
    return name


def check_bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"invalid {what} {value!r}; allowed: true, false")
    return value


# The largest whole number a setting may take: the largest a results table (JSON read into
# floats) keeps exactly, so a seed or a count reads back as itself; torch's seeds go far
# beyond it (2**64 - 1), even as seed * 1000 + n for a synthetic batch.
MAX_WHOLE = 2**53 - 1
# The longest a duration may be: a year. Beyond it a timeout is no limit, and a wait of
# 1e300 s overflows the clocks it is handed to.
MAX_SECONDS = 366 * 24 * 3600.0


def shown(value: object) -> str:
    """`value` as a message quotes it: repr, a long one cut to its head and its length (a
    number of 400 digits is named, not printed whole)."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 4000 else "<int>"
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} characters)"


def whole(value: object, what: str, least: int = 1, note: str = "") -> int:
    """`value` where it is a whole number (not a bool) of `least` to MAX_WHOLE; a ConfigError
    naming it as `what` otherwise (`note` says what it counts)."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_WHOLE:
        raise ConfigError(
            f"invalid {what} {shown(value)}; allowed: a whole number of {least} or more{note}"
            + (f", up to {MAX_WHOLE:,} (2**53 - 1)" if isinstance(value, int) and value > 0 else "")
        )
    return value


def seconds_in_range(value: float, what: str, text: object) -> float:
    """`value` seconds where above 0 and at most MAX_SECONDS (a year); a ConfigError naming
    `text` (as given) as `what` otherwise."""
    if not 0 < value <= MAX_SECONDS:
        raise ConfigError(
            f"invalid {what} {shown(text)}; allowed: a number of seconds above 0, up to a year "
            f"({MAX_SECONDS:,.0f} s)"
        )
    return value


def check_batch_size(value: object) -> int:
    return whole(value, "batch size")


def check_nproc(value: object) -> int:
    return whole(value, "nproc")


def check_accumulate(value: object) -> int:
    return whole(value, "accumulate", note=" (micro-batches per optimizer step)")


def split_reason(batch_size: int, accumulate: int) -> str | None:
    """Why the effective batch `batch_size` cannot train as `accumulate` equal micro-batches
    (unequal ones would weigh samples unequally in the accumulated gradient: each micro-batch's
    mean loss is scaled by 1/accumulate), or None where it splits."""
    split = (
        f"batch size {batch_size} does not split into accumulate {accumulate} equal micro-batches"
    )
    return split if batch_size % accumulate else None


def check_divides(batch_size: int, accumulate: int) -> None:
    """ConfigError where `batch_size` does not split into `accumulate` equal micro-batches."""
    if reason := split_reason(batch_size, accumulate):
        raise ConfigError(f"{reason}; allowed: a batch size that is a multiple of {accumulate}")


def check_seed(value: object) -> int:
    return whole(value, "seed", least=0)


def nonempty(values: tuple[Any, ...], key: str) -> tuple[Any, ...]:
    if not values:
        raise ConfigError(f"{key} is empty; give at least one value")
    return values


def check_threads(value: object) -> int | None:
    """A thread count: a whole number of 1 or more, or "auto" (None: what torch picks)."""
    if value is None or value == THREADS_AUTO:
        return None
    return whole(value, "thread count", note=f', or "{THREADS_AUTO}" (what torch picks)')


def check_power_limit(value: object) -> int | None:
    """A GPU power limit: a whole number of watts of 1 or more, or "none" (None: the card's
    limit as it is). Whether the GPU allows it is known only there (harness.power_limit)."""
    if value is None or value == "none":
        return None
    return whole(value, "power limit in watts", note=', or "none" (the card\'s as it is)')


def check_watts(value: object) -> float:
    """A power the user states for the CPU (`--cpu-watts`, a suite's `cpu_watts`): a finite
    number of watts above 0."""
    try:
        watts = math.nan if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        watts = math.nan
    if not (math.isfinite(watts) and watts > 0):
        raise ConfigError(
            f"invalid power {value!r}; allowed: a finite number of watts above 0, e.g. 65"
        )
    return watts


def check_noise_budget(value: object) -> float:
    """The seconds in all of a speed sweep's noise phase (issue 51: `--noise-budget`, a suite's
    `noise_budget_s`): a finite number of seconds, 0 or more (0: no phase)."""
    try:
        budget = math.nan if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        budget = math.nan
    if not (math.isfinite(budget) and budget >= 0):
        raise ConfigError(
            f"invalid noise budget {value!r}; allowed: a finite number of seconds, 0 or more "
            "(0: no noise phase), e.g. 10"
        )
    return budget
