"""What a verdict compares: the rows a user chooses between, and labels that tell them apart.

A user picks the optimizer for the model (SGD and AdamW train differently), not for its speed;
the model's options and the learning-rate rule are likewise part of the recipe. Those fields
partition the verdict: one answer per model, size, model options, optimizer and lr rule. Within
a partition batch size, precision, device, threads, speed options and parallel layout compete.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpubench.store.row import IDENTITY

# The fields that partition a verdict (the user's choices), in the order a heading names them.
FIXED = ("model", "model_size", "model_options", "optimizer", "lr_scaling")
# What competes within a partition (and a label may have to name).
COMPETING = [k for k in IDENTITY if k not in FIXED]


def norm(v: Any) -> Any:
    """One spelling per value whatever a frame made of it: None for NaN, ints for bools and
    whole floats (batch 64.0 and True read back from a CSV-like frame)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool | int) or (isinstance(v, float) and v.is_integer()):
        return int(v)
    return v


def finite(v: Any) -> bool:
    """A number that is not a bool, None or NaN/inf."""
    return v is not None and not isinstance(v, bool) and math.isfinite(float(v))


def identity(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row's (or a point's) whole identity, one spelling per value."""
    return tuple(norm(row.get(k)) for k in IDENTITY)


# The columns that name a configuration: the identity but the seed.
CONFIGURATION = [c for c in IDENTITY if c != "seed"]


def configuration(row: Mapping[str, Any], *skip: str) -> tuple[Any, ...]:
    """The configuration `row` belongs to (CONFIGURATION, less the columns in `skip`), with one
    spelling per value: rows of one configuration under several seeds measure the same speed,
    and their times to target are one configuration's."""
    return tuple(norm(row.get(c)) for c in CONFIGURATION if c not in skip)


def identity_dict(row: dict[str, Any]) -> dict[str, Any]:
    """identity() by column name."""
    return {k: norm(row.get(k)) for k in IDENTITY}


def answer(
    fastest: str, samples_per_s: float, ident: dict[str, Any], ties: list[dict[str, Any]]
) -> dict[str, Any]:
    """An answer for a script: the winner's identity (None in a tie), the leader, the ties."""
    return {
        "winner": None if ties else ident,
        "leader": {"label": fastest, "samples_per_s": samples_per_s, "identity": ident},
        "ties": ties,
    }


def same_key(row: dict[str, Any], *skip: str) -> tuple[Any, ...]:
    """A row's whole identity but the fields `skip`, one spelling per value: rows with equal
    keys differ only in those fields."""
    return tuple(norm(row.get(k)) for k in IDENTITY if k not in skip)


def series(best: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of `best`'s batch-size series: its identity but the batch size and seed."""
    key = same_key(best, "batch_size", "seed")
    return [r for r in rows if same_key(r, "batch_size", "seed") == key]


def is_on(value: Any, on: Any) -> bool:
    """Whether a row's `value` is the setting `on` (a bool read back as 0/1 from a frame too)."""
    if isinstance(on, bool):
        return value is True or value == 1 if on else value is False or value == 0
    return value == on


def partition_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The user's choices a row was measured under (FIXED)."""
    return tuple(norm(row.get(k)) for k in FIXED)


def heading(row: dict[str, Any]) -> str:
    """'mlp/small, adamw' (with the model's options and lr rule where set)."""
    text = f"{row['model']}/{row['model_size']}"
    if norm(row.get("model_options")) is not None:
        text += f" {row['model_options']}"
    text += f", {row['optimizer']}"
    if norm(row.get("lr_scaling")) not in (None, "none"):
        text += f", lr {row['lr_scaling']}"
    return text


def varying(rows: list[dict[str, Any]]) -> list[str]:
    """The competing identity fields whose values differ among `rows`."""
    return [k for k in COMPETING if len({norm(r.get(k)) for r in rows}) > 1]


# The settings beyond the defaults that a label names: (column, value, name).
SPEED_OPTIONS = (
    ("compile", "compile", "compiled"),
    ("cuda_graph", True, "CUDA graph"),
    ("channels_last", True, "channels-last"),
    ("cudnn_benchmark", True, "cudnn.benchmark"),
)


def speed_options(row: dict[str, Any], with_data: bool = True) -> list[str]:
    """The names of the speed options `row` ran with (and host data, `with_data`)."""
    options = SPEED_OPTIONS + ((("data", "host", "host data"),) if with_data else ())
    return [name for key, on, name in options if is_on(row.get(key), on)]


def label(row: dict[str, Any], among: list[str] | None = None) -> str:
    """A configuration's label: device, precision and batch always; every speed option it ran
    with and host data; and each field of `among` (the fields that vary among the rows
    compared: threads, layout, seed...) that those do not already say."""
    parts = [str(row["device"]), str(row["precision"])]
    parallel = norm(row.get("parallel"))
    among = among or []
    if parallel not in (None, "none") or "parallel" in among or "nproc" in among:
        if parallel in (None, "none"):
            parts.append("1 process")
        else:
            parts.append(f"{parallel} x{norm(row.get('nproc'))}")
            if (norm(row.get("nodes")) or 1) != 1:
                parts.append(f"on {norm(row.get('nodes'))} nodes")
            if norm(row.get("scaling")):  # NaN where a frame held one process's None
                parts.append(str(row["scaling"]))
    if "threads" in among or norm(row.get("threads")) is not None:
        threads = norm(row.get("threads")) or norm(row.get("torch_threads"))
        plural = "" if threads == 1 else "s"
        parts.append(f"{threads} thread{plural}" if threads else "threads auto")
    parts.append(f"B={int(float(row['batch_size']))}")
    accumulate = norm(row.get("accumulate")) or 1
    if accumulate != 1 or "accumulate" in among:  # issue 25: B is the effective batch
        parts.append(f"as {accumulate} x {int(float(row['batch_size'])) // accumulate}")
    parts += workers_label(row)  # issue 31
    if "seed" in among:
        parts.append(f"seed {norm(row.get('seed'))}")
    opts = speed_options(row)
    checkpoint = norm(row.get("checkpoint"))
    if checkpoint not in (None, "none") or "checkpoint" in among:
        opts.append(f"checkpoint {checkpoint or 'none'}")
    if "compile" in among and norm(row.get("compile")) != "compile":
        opts.insert(0, "eager")
    return " ".join(parts) + (f" ({', '.join(opts)})" if opts else "")


def workers_label(row: dict[str, Any]) -> list[str]:
    """A loader row's label parts: '2 workers' (and 'pinned', 'prefetch 4', 'not persistent'
    where set); [] for other data."""
    if norm(row.get("data")) != "loader":
        return []
    n = norm(row.get("loader_workers")) or 0  # None: tune or max-batch, which load in-process
    parts = [f"{n} worker{'' if n == 1 else 's'}"]
    if norm(row.get("pin_memory")) == 1:
        parts.append("pinned")
    if norm(row.get("prefetch")) not in (None, 2):
        parts.append(f"prefetch {norm(row.get('prefetch'))}")
    if n and norm(row.get("persistent_workers")) == 0:
        parts.append("not persistent")
    return parts
