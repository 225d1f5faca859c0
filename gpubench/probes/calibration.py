"""The measured matmul peak of a device for a precision, the roof that MFU is computed against:
the best throughput of square products of growing size (fp32 at IEEE precision, tf32, fp16,
bf16). Cached per device, precision, torch version and thread count, in the process and on disk
(`$GPUBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/gpubench`, else `~/.cache/gpubench`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import torch

from gpubench.config import precision as P
from gpubench.data.files import CACHE_ENV as CACHE_ENV  # its tests set it here
from gpubench.data.files import cache_dir
from gpubench.probes.current_device import cuda_index, made_current, stream_of

T = TypeVar("T")

# Per precision: the dtype of the product and torch's float32 matmul precision.
_MATMUL = {
    "fp32": (torch.float32, "highest"),
    "tf32": (torch.float32, "high"),
    "fp16": (torch.float16, "highest"),
    "bf16": (torch.bfloat16, "highest"),
}
# Sizes tried, smallest first; past _MIN_SIZE, growth stops once one product takes longer
# than _GROW_S at the best rate so far, or would run past _BUDGET_S.
_SIZES = {"cpu": (128, 256, 512, 1024, 2048), "cuda": (1024, 2048, 4096, 8192, 16384)}
_MIN_SIZE = {"cpu": 512, "cuda": 4096}
_GROW_S = {"cpu": 0.05, "cuda": 0.005}
_ROUND_S = {"cpu": 0.03, "cuda": 0.03}  # seconds of products per timed round; best of 3 rounds
_ROUNDS = 3
# Seconds one calibration should take: a larger size is not tried when it would run past this.
_BUDGET_S = {"cpu": 1.5, "cuda": 5.0}

# What this process has calibrated or read from a cache file: (file name, *keys) -> entry.
_memo: dict[tuple[str, ...], Any] = {}


@dataclass(frozen=True)
class Peak:
    """A measured matmul peak: `tflops` (1e12 FLOP/s), at matrix size `n`."""

    tflops: float
    n: int
    dtype: str
    measured_at: str
    source: str  # "measured" in this process, or "cache" (an earlier measurement on disk)
    # the best size's timed rounds, slowest / fastest - 1 (a busy machine shows here)
    round_spread: float | None = None


def cached(file: Path, keys: tuple[str, ...], kind: type[T]) -> T | None:
    """The calibration of type `kind` found under `keys` (this process's, else in the cache
    `file`), or None (to be measured again), as also where the entry's fields are not `kind`'s:
    every gpubench version on the machine shares the cache."""
    if (file.name, *keys) not in _memo:
        entry: Any = read_cache(file)
        for key in keys:
            entry = entry.get(key) if isinstance(entry, dict) else None
        names = {f.name for f in fields(kind)}  # type: ignore[arg-type]
        if not isinstance(entry, dict) or not set(entry) <= names:
            return None
        try:
            _memo[(file.name, *keys)] = kind(**entry)
        except TypeError:  # a field this version requires is missing
            return None
    return _memo[(file.name, *keys)]


def keep(file: Path, keys: tuple[str, ...], measured: Any) -> None:
    """Keep a calibration `measured` in this process, under `keys`, and in the cache `file`
    (where its source reads "cache")."""
    _memo[(file.name, *keys)] = measured
    with _locked(file):  # read, add, write back: another process's entry is not dropped
        data = read_cache(file)
        node = data
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = asdict(measured) | {"source": "cache"}
        write_cache(file, data)


@contextlib.contextmanager
def _locked(file: Path) -> Iterator[None]:
    """`file` held for one process's read-modify-write (an exclusive flock on a sibling .lock
    file): two gpubench processes that calibrated at once each read the cache, added their
    entry and wrote the file back, the later dropping the earlier's entry (measured again by
    the next process, never wrong, but a calibration's seconds spent twice)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file.with_name(file.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released as the file closes
        yield


def cpu_model() -> str | None:
    """The CPU's model name (from /proc/cpuinfo on Linux), or what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def device_key(device: torch.device) -> str:
    """What a peak depends on: the device's identity, torch's version and (CPU) thread count."""
    if device.type == "cuda":
        index = cuda_index(device)
        props = torch.cuda.get_device_properties(index)
        ident = f"cuda|{props.name}|{getattr(props, 'uuid', index)}"
    else:
        ident = f"cpu|{cpu_model()}|threads={torch.get_num_threads()}"
    return f"{ident}|torch={torch.__version__}"


def cache_file() -> Path:
    return cache_dir() / "matmul_peaks.json"


def read_cache(path: Path) -> dict[str, Any]:
    """The JSON object cached at `path`; {} where it is absent or corrupt (measured again)."""
    # The machine's cache, not a run folder's file: read here, in the probes' stage (below store/)
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
    except (FileNotFoundError, ValueError):
        return {}  # a corrupt cache is measured again, and rewritten whole
    return data if isinstance(data, dict) else {}


def write_cache(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` atomically with `data`, so a concurrent reader sees the old or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def matmul_peak(device: torch.device | str, precision: str, refresh: bool = False) -> Peak | None:
    """The device's measured matmul peak for `precision`, None where the device cannot run it.
    Measured on first use (about a second), then served from the caches unless `refresh`."""
    device = torch.device(device)
    if P.unsupported_reason(precision, device) is not None:
        return None
    keys = (device_key(device), precision)
    found = None if refresh else cached(cache_file(), keys, Peak)
    if found is not None:
        return found
    with made_current(device):
        tflops, n, spread = measure_matmul_tflops(device, precision)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    dtype = str(_MATMUL[precision][0]).removeprefix("torch.")
    peak = Peak(tflops, n, dtype, stamp, "measured", spread)
    keep(cache_file(), keys, peak)
    return peak


def measure_matmul_tflops(device: torch.device, precision: str) -> tuple[float, int, float]:
    """Best TFLOPS of n x n products (2*n^3 FLOPs each) over growing n and both operand
    layouts, the n it came at, and the spread of that best one's rounds (slowest / fastest - 1).
    Each is warmed up, then timed in rounds of back-to-back products."""
    dtype, matmul_precision = _MATMUL[precision]
    kind = device.type
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul_precision)
    best, best_n, best_spread = 0.0, 0, 0.0
    started = time.perf_counter()
    try:
        for n in _SIZES[kind]:
            if kind == "cuda" and not _fits(device, n, dtype):
                break
            product_s = 2 * n**3 / (best * 1e12) if best else 0.0  # at the best rate so far
            if n > _MIN_SIZE[kind] and product_s >= _GROW_S[kind]:
                break  # large enough: bigger products would only cost time
            # 2 layouts x (2 single products + _ROUNDS rounds of at least _ROUND_S)
            cost = 2 * (2 * product_s + _ROUNDS * max(product_s, _ROUND_S[kind]))
            if n > _MIN_SIZE[kind] and time.perf_counter() - started + cost > _BUDGET_S[kind]:
                break
            a = torch.randn(n, n, device=device).to(dtype)
            b = torch.randn(n, n, device=device).to(dtype)
            # Both layouts: a @ b, and a @ b.T as nn.Linear multiplies; some backends (bf16 on
            # CPUs without bf16 instructions) are several times faster in one of them.
            for rhs in (b, b.t()):
                _time_products(a, rhs, 1)  # warms up kernels and caches
                single = _time_products(a, rhs, 1)
                reps = max(1, math.ceil(_ROUND_S[kind] / max(single, 1e-9)))
                rounds = [_time_products(a, rhs, reps) for _ in range(_ROUNDS)]
                tflops = 2 * n**3 / (min(rounds) / reps) / 1e12
                if tflops > best:
                    best, best_n = tflops, n
                    best_spread = max(rounds) / min(rounds) - 1
            del a, b
    finally:
        torch.set_float32_matmul_precision(old)
    return best, best_n, best_spread


def _fits(device: torch.device, n: int, dtype: torch.dtype) -> bool:
    free, _ = torch.cuda.mem_get_info(device)
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 4 * n * n * max(itemsize, 4) < free // 2


def _time_products(a: torch.Tensor, b: torch.Tensor, reps: int) -> float:
    """Seconds for `reps` back-to-back products a @ b."""
    return device_seconds(a.device, lambda: torch.mm(a, b), reps)


def device_seconds(device: torch.device, work: Callable[[], object], reps: int = 1) -> float:
    """Seconds for `reps` back-to-back calls of `work` on `device` (CUDA events on the
    device's own stream, whatever device is current; the wall clock on the CPU)."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        stream = stream_of(device)
        torch.cuda.synchronize(device)
        start.record(stream)
        for _ in range(reps):
            work()
        end.record(stream)
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    for _ in range(reps):
        work()
    return time.perf_counter() - t0


def clear_memo() -> None:
    """Forget the in-process cache, of every calibration (tests; after changing the thread
    count it is keyed anyway)."""
    _memo.clear()
