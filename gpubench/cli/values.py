"""How the command line's values are read: each parser turns one flag's text into a checked
value, or raises ConfigError naming the text and what is allowed (argparse shows it in one
line)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from gpubench.config import spec as S
from gpubench.config.checks import check_bool, check_one_of, seconds_in_range, whole
from gpubench.config.errors import ConfigError


def arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """argparse turns a ValueError into 'invalid value'; keep our message instead."""

    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    wrapped.__name__ = getattr(parse, "__name__", "value")
    return wrapped


def csv(check: Callable[[str], Any], gaps: bool = True) -> Callable[[str], tuple[Any, ...]]:
    """Comma-separated values, each read by `check`; an empty list names what `check` allows.
    Without `gaps`, an empty value between commas ("4,,8": a number dropped) is refused."""

    def parse(text: str) -> tuple[Any, ...]:
        if not gaps and any(not part.strip() for part in text.split(",")):
            raise ConfigError(
                f"invalid list {text!r}: a value between commas is empty; allowed: "
                f"comma-separated values, each: {_allows(check)}"
            )
        items = tuple(check(part.strip()) for part in text.split(",") if part.strip())
        if not items:
            raise ConfigError(
                f"empty list {text!r}; allowed: comma-separated values, each: {_allows(check)}"
            )
        return items

    return arg(parse)


def _allows(check: Callable[[str], Any]) -> str:
    """What `check` allows, as its own refusal of an empty value says it."""
    try:
        check("")
    except (ConfigError, argparse.ArgumentTypeError) as e:
        _, sep, allowed = str(e).partition("; allowed: ")
        if sep:
            return allowed
    return "a value"


def choice(allowed: tuple[str, ...], what: str) -> Callable[[str], str]:
    """One of `allowed`, refused as a suite's value is (config.checks)."""
    return arg(lambda value: check_one_of(value, allowed, what))


_BOOLS = {"true": True, "false": False}


def flag(what: str) -> Callable[[str], bool]:
    """true or false, in any case."""
    return arg(lambda value: check_bool(_BOOLS.get(value.lower(), value), what))


def positive_int(text: str) -> int:
    return whole(int_value(text), "number")


def shard(text: str) -> tuple[int, int]:
    from gpubench.run.shard import parse_shard

    return parse_shard(text)


def _float(text: str) -> float:
    """`text` as a float; NaN (which every range check refuses) where it is not a number."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


def positive_float(text: str) -> float:
    """Seconds above 0, at most a year (config.checks.seconds_in_range)."""
    return seconds_in_range(_float(text), "number of seconds", text)


def percent(text: str) -> float:
    value = _float(text)
    if not 0 <= value < float("inf"):
        raise ConfigError(f"invalid percentage {text!r}; allowed: a number of 0 or more")
    return value


def int_value(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        return text


OPTION_FORM = "MODEL.KEY=VALUE, e.g. transformer.layers=4"


def model_option(text: str) -> tuple[str | None, str, Any]:
    """`--option MODEL.KEY=VALUE` as (model, key, value), the value read as in a suite's
    `[model_options]` table (a bare word is a string); the model as the command names it, dots
    included ('mypkg.nets:build.width=64'). The old `KEY=VALUE` reads as (None, key, value):
    whether a command takes it is config.model_options' to say."""
    import tomllib

    left, sep, value = text.partition("=")
    model, _, key = left.rpartition(".")
    if not sep or (_ and not model.strip()) or not key.strip().isidentifier() or not value.strip():
        raise ConfigError(f"invalid model option {text!r}; allowed: {OPTION_FORM}")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return (model.strip() or None), key.strip(), parsed


def auto_or(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def wrapped(text: str) -> Any:
        return S.AUTO if text.strip() == S.AUTO else parse(text)

    wrapped.__name__ = "batch sizes"
    return wrapped


MODEL_PREFIXES = (
    "or from a library: torchvision:NAME, timm:NAME (a torchvision built for your torch: "
    "see the README), hf:MODEL_TYPE (extra hf); or your own: package.module:function "
    "returning a Workload"
)


def budget_from_args(args: argparse.Namespace, budget: S.Budget) -> S.Budget:
    """`budget` with --steps and --max-time applied (its noise target and profiled steps kept:
    --steps changes how long a point is measured, not what counts as noisy)."""
    if args.steps is not None:
        fixed = S.Budget.fixed(args.steps, budget.warmup_steps, budget.target_rel_ci)
        budget = dataclasses.replace(fixed, profile_steps=budget.profile_steps)
    if args.max_time is not None:
        budget = dataclasses.replace(
            budget, max_time_s=args.max_time, min_time_s=min(budget.min_time_s, args.max_time)
        )
    return budget
