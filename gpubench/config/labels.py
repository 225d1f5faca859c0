"""The one labeler: a configuration in words, each setting worded one way, naming only what
sets it apart ('cpu bf16 B=64 (compiled)'), for the terminal, the verdict, the report, compare
and tune alike. A row, a Point's dict or a frame's record all read the same (a missing or null
value is the setting's default)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gpubench.config import registry as R
from gpubench.config.loader import TORCH_PREFETCH  # a label names only another prefetch
from gpubench.config.registry import normal

Row = Mapping[str, Any]


def model_label(model: str, size: str | None) -> str:
    """'mlp/small' for a reference model at a size preset; a user's 'package.module:function'
    as itself, since a size preset means nothing to it."""
    return model if ":" in model or not size else f"{model}/{size}"


def model_options(value: Any) -> str:
    """A model's options in words, canonical JSON {"d_model": 64} as 'd_model=64' (a nested
    value as JSON); none as 'default options'."""
    if R.null(value) or value in ("", "{}"):
        return "default options"
    try:
        opts = json.loads(str(value))
    except ValueError:
        return str(value)
    if not isinstance(opts, dict):
        return str(value)
    return ",".join(
        f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}" for k, v in opts.items()
    )


def _v(row: Row, name: str) -> Any:
    return normal(R.BY_NAME[name].value(row))


def _layout(row: Row, forced: bool) -> str | None:
    parallel = _v(row, "parallel")
    if parallel == "none":
        return "1 process" if forced else None
    text = f"{parallel} x{_v(row, 'nproc')}"
    if _v(row, "nodes") != 1:
        text += f" on {_v(row, 'nodes')} nodes"
    return text + (f" {_v(row, 'scaling')}" if _v(row, "scaling") else "")


def _threads(row: Row, forced: bool) -> str | None:
    threads = _v(row, "threads")
    if threads is None and not forced:
        return None
    threads = threads or normal(row.get("torch_threads"))
    return f"{threads} thread{'' if threads == 1 else 's'}" if threads else "threads auto"


def _accumulate(row: Row, forced: bool) -> str | None:
    k = _v(row, "accumulate")
    if k == 1 and not forced:
        return None
    batch: Any = row.get("batch_size")
    micro = normal(row.get("micro_batch_size")) if R.null(batch) else int(float(batch)) // k
    return accumulation(k, micro)


def accumulation(k: int, micro: int | None = None) -> str:
    """Accumulation in words, the one way every view says it: 'as 4 x 128' (an optimizer step
    over 4 micro-batches of 128 samples), 'as 4 micro-batches' where the micro-batch is not one
    figure (a series over batch sizes)."""
    return f"as {k} x {micro}" if micro is not None else f"as {k} micro-batch{'es' * (k != 1)}"


def way(k: int, micro: int | None, checkpoint: str) -> str:
    """A way of reaching an effective batch: its accumulation, and its checkpointing where set
    ('as 2 x 256, checkpoint blocks'), as a row's extras name them."""
    return accumulation(k, micro) + ("" if checkpoint == "none" else f", checkpoint {checkpoint}")


def _workers(row: Row, forced: bool) -> str | None:
    """A loader row's '2 workers pinned prefetch 4 not persistent' (None for other data)."""
    if _v(row, "data") != "loader":
        return None
    n = _v(row, "loader_workers") or 0  # None: tune or max-batch, which load in-process
    parts = [f"{n} worker{'' if n == 1 else 's'}"]
    if _v(row, "pin_memory") == 1:
        parts.append("pinned")
    if _v(row, "prefetch") not in (None, TORCH_PREFETCH):
        parts.append(f"prefetch {_v(row, 'prefetch')}")
    if n and _v(row, "persistent_workers") == 0:
        parts.append("not persistent")
    if _v(row, "loader") is not None:
        parts.append(f"loader {_v(row, 'loader')}")
    return " ".join(parts)


def _power(row: Row, forced: bool) -> str | None:
    watts = _v(row, "power_limit_w")
    return f"{watts} W" if watts is not None else ("power as is" if forced else None)


def _seed(row: Row, forced: bool) -> str | None:
    return f"seed {_v(row, 'seed')}" if forced else None


# The settings a label names among its main words, in the order it names them, each with how
# it words a row's value (None: not named), `forced` where the value varies among the rows
# compared. The layout's and loader's parts are named by their first setting.
Say = Callable[[Row, bool], str | None]
MAIN: dict[str, Say] = {
    "device": lambda r, f: None if R.null(r.get("device")) else str(r["device"]),
    "precision": lambda r, f: None if R.null(r.get("precision")) else str(r["precision"]),
    "parallel": _layout,
    "threads": _threads,
    "batch_size": lambda r, f: f"B={int(float(r['batch_size']))}",
    "accumulate": _accumulate,
    "power_limit_w": _power,
    "loader_workers": _workers,
    "seed": _seed,
}
# Settings worded by another's words above.
GROUPED = {"nproc": "parallel", "scaling": "parallel", "nodes": "parallel"}
GROUPED |= {k: "loader_workers" for k in ("pin_memory", "prefetch", "persistent_workers")}
GROUPED |= {"loader": "loader_workers"}


def options(row: Row, among: Iterable[str] = (), skip: Iterable[str] = ()) -> list[str]:
    """The words of the speed options `row` ran with ('compiled', 'CUDA graph', 'host data';
    but those of the settings in `skip`), 'eager' where compiling varies among the rows
    compared, and its checkpointing where set (or varying)."""
    among, skip = set(among), set(skip)
    words = [s.word for s in R.speed_options() if s.word and s.name not in skip and s.worded(row)]
    if "compile" in among and _v(row, "compile") != "compile":
        words.insert(0, "eager")
    checkpoint = _v(row, "checkpoint")
    if checkpoint != "none" or "checkpoint" in among:
        words.append(f"checkpoint {checkpoint}")
    return words


def label(row: Row, among: Iterable[str] = (), whole: bool = False, batch: bool = True) -> str:
    """A configuration's label: device, precision and batch always; each setting not at its
    default; and each field of `among` (the settings that vary among the rows compared) that
    those do not already say. `whole` names the user's choices too (model and size, optimizer,
    model options, lr rule): a point's label in a log; without `batch`, a series' label."""
    among = set(among)
    forced = among | {GROUPED[a] for a in among if a in GROUPED}
    says = {n: say for n, say in MAIN.items() if batch or n != "batch_size"}
    parts = [t for n, say in says.items() if (t := say(row, n in forced)) is not None]
    if whole:
        parts[2:2] = [str(row["optimizer"])]  # after device and precision, as a log reads
        parts.insert(0, model_label(str(row["model"]), _v(row, "model_size")))
        if _v(row, "model_options") is not None:
            parts.append(model_options(row["model_options"]))
        if _v(row, "lr_scaling") not in (None, "none"):
            parts.append(f"lr {row['lr_scaling']}")
    words = options(row, among)
    return " ".join(parts) + (f" ({', '.join(words)})" if words else "")


def settings(config: Row) -> str:
    """Some settings of a configuration (a tune combo or trial: the axes it searched, with or
    without the batch) in a label's words, each of them named even at its default ('fp16 2
    threads (eager)'); '(one setting)' where none is worded."""
    return label(config, among=config, batch="batch_size" in config) or "(one setting)"


def extras(row: Row) -> list[str]:
    """What a label says beyond the device, precision and batch: the layout, threads, micro-
    batches, power limit, loader and speed options that are not at their defaults."""
    core = ("device", "precision", "batch_size", "seed")
    parts = [t for n, say in MAIN.items() if n not in core and (t := say(row, False))]
    return parts + options(row)


def heading(row: Row) -> str:
    """A verdict's heading, the user's choices: 'mlp/small, adamw' (with the model's options
    and lr rule where set)."""
    text = model_label(str(row["model"]), _v(row, "model_size"))
    if _v(row, "model_options") is not None:
        text += f" {model_options(row['model_options'])}"
    text += f", {row['optimizer']}"
    if _v(row, "lr_scaling") not in (None, "none"):
        text += f", lr {row['lr_scaling']}"
    return text


def varying(rows: Sequence[Row], settings: Iterable[str] | None = None) -> list[str]:
    """The settings (by default the competing ones) whose values differ among `rows`."""
    names = R.competing() if settings is None else list(settings)
    return [n for n in names if len({normal(R.BY_NAME[n].value(r)) for r in rows}) > 1]


def cell(name: str, value: Any) -> str:
    """A setting's value as a table cell: booleans on/off, a null as the setting says it
    ('auto' threads, 'default' model options, else 'none'), whole floats as whole numbers."""
    import numpy as np  # a frame's booleans are numpy's (imported with pandas by then)

    if R.null(value):
        return R.BY_NAME[name].unset if name in R.BY_NAME else "none"
    if isinstance(value, bool | np.bool_):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
