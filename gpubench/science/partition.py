"""What a verdict compares: the rows a user chooses between, and labels that tell them apart.

A user picks the optimizer for the model (SGD and AdamW train differently), not for its speed;
the model's options and the learning-rate rule are likewise part of the recipe. Those fields
partition the verdict: one answer per model, size, model options, optimizer and lr rule. Within
a partition batch size, precision, device, threads, speed options and parallel layout compete.
A row's keys (its identity, configuration and partition) are config.keys'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from gpubench.config.keys import same_key
from gpubench.config.labels import heading, label, options, varying
from gpubench.config.registry import normal as norm

__all__ = ["heading", "label", "norm", "options", "varying"]

T = TypeVar("T")


def finite(v: Any) -> bool:
    """A number that is not a bool, None or NaN/inf."""
    return figure(v) is not None


def figure(v: Any) -> float | None:
    """`v` as a float where it is a finite number (not a bool); None where it is null,
    infinite or not a number."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def grouped(items: Iterable[T], by: Callable[[T], Any]) -> dict[Any, list[T]]:
    """`items` in lists by `by`'s value, the groups in the order each first appears."""
    out: dict[Any, list[T]] = {}
    for item in items:
        out.setdefault(by(item), []).append(item)
    return out


def answer(
    fastest: str, samples_per_s: float, ident: dict[str, Any], ties: list[dict[str, Any]]
) -> dict[str, Any]:
    """An answer for a script: the winner's identity (None in a tie), the leader, the ties."""
    return {
        "winner": None if ties else ident,
        "leader": {"label": fastest, "samples_per_s": samples_per_s, "identity": ident},
        "ties": ties,
    }


def device_of(row: dict[str, Any]) -> str:
    """The device `row` ran on as the verdict tells devices apart: its `device` ("cpu",
    "cuda"), and for a CUDA row a device pool measured (issue 53: its `pool_devices`) its own
    GPU's name too, "cuda (NVIDIA A100-SXM4-80GB)", so that a pool of two GPU models keeps
    them apart (the row's recorded `device_name`, bare or as report.runs words it)."""
    device = str(row["device"])
    name, pooled = row.get("device_name"), row.get("pool_devices")
    if not device.startswith("cuda") or not isinstance(pooled, str) or not isinstance(name, str):
        return device
    return name if name.startswith(f"{device} (") else f"{device} ({name})"


def series(best: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of `best`'s batch-size series: its identity but the batch size and seed, on
    its device (device_of: a pool's other GPU model is another series)."""
    key = (same_key(best, "batch_size", "seed"), device_of(best))
    return [r for r in rows if (same_key(r, "batch_size", "seed"), device_of(r)) == key]
