"""Where a training step's time goes: a few steps under torch.profiler, after the measured
windows (never inside them), summed by category of work.

On a GPU the categories come from kernel time (each kernel counted under the operator that
launched it), the device's busy time is the union of its kernels' intervals, and the host's
dispatch time is the CPU time spent inside operators (issuing kernels). On the CPU operators
run on the host: the categories come from each operator's own (self) CPU time, the busy time is
their sum, and dispatch cannot be told apart from the work (null).

Whatever the step's wall time holds beyond the busy time is the device waiting on the host:
Python, the autograd engine, launches. A step whose device is idle for much of it is
launch/host-bound (science.bottleneck). The profiler slows the steps it watches (many times
over for a sub-millisecond step), so the busy time is set against the unprofiled median step,
never against the profiled step's wall time, which is recorded only.

The events are read from the profiler's results by probes.profile_events, as torch's own
FunctionEvents would describe them but several times faster to build.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

from gpubench.probes.current_device import synchronize
from gpubench.probes.profile_events import Event, read

# The categories of work, in the order charts stack them. `other` holds allocation, views and
# scalar reads: operators that are neither arithmetic nor copies.
CATEGORIES = (
    "matmul",
    "conv",
    "attention",
    "norm",
    "elementwise",
    "loss_reduction",
    "optimizer",
    "copy",
    "collective",
    "other",
)
# Categories whose kernels move far more bytes than they compute on: when they hold most of a
# busy step, the step is memory-bound whatever its overall intensity says (science.bottleneck).
MEMORY_CATEGORIES = ("norm", "elementwise", "loss_reduction", "optimizer", "copy")

_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot"}
_MATMUL |= {"_addmm_activation", "addbmm"}
_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "std", "var", "logsumexp", "argmax"}
_COPIES = {"copy_", "_to_copy", "to", "clone", "contiguous", "_copy_from", "copy", "tocopy"}
_COPIES |= {"memcpy", "memset"}
_ALLOC_OR_VIEW = {"empty", "empty_strided", "empty_like", "resize_", "item", "_local_scalar_dense"}
# Operators that return a view of their input (or the input itself): they move no bytes, whoever
# calls them, so they are `other` even inside a copy or a product. Some (`_unsafe_view`,
# `_reshape_alias`, `alias`) are not flagged as views in their schema. `reshape`, `flatten` and
# `contiguous` copy only through a child operator (`clone`), which is a copy by its own name.
_VIEWS = {"view", "_unsafe_view", "_reshape_alias", "alias", "as_strided", "expand", "expand_as"}
_VIEWS |= {"t", "transpose", "permute", "reshape", "view_as", "unsqueeze", "squeeze", "select"}
_VIEWS |= {"slice", "narrow", "detach", "flatten", "unflatten", "split", "split_with_sizes"}
_VIEWS |= {"chunk", "unbind", "broadcast_tensors", "numpy_t", "lift_fresh", "unfold", "diagonal"}
_ELEMENTWISE_HINT = re.compile(
    r"(add|sub|mul|div|relu|gelu|silu|tanh|sigmoid|threshold|dropout|"
    r"pow|sqrt|exp|log|neg|clamp|where|fill|zero|lerp|addc|pool|"
    r"masked|embedding|cat|stack|ones|zeros|rsqrt|softmax)"
)
# Real collectives only: c10d's operators (c10d::broadcast_, c10d::allreduce_), NCCL and Gloo
# kernels and the profiler's record_param_comms; not aten::broadcast_tensors, a view.
_COLLECTIVE = re.compile(
    r"nccl|gloo|c10d|record_param_comms|all_?reduce|all_?gather|all_?to_?all|reduce_?scatter"
)
# Time in collectives (the `collective` category) is the wall time during which any
# communication event was in flight: gloo names its work "gloo:all_reduce" and so on; NCCL's
# kernels are "ncclDevKernel_..." (older releases: "ncclKernel_...").
_IN_FLIGHT = ("gloo:", "nccl")
COLLECTIVE_METHOD = "profiler: union of communication events per step (in flight, overlap included)"


def _base(name: str) -> str:
    """An event's operator or autograd-node name, lower case: 'aten::addmm' -> 'addmm',
    'autograd::engine::evaluate_function: AddmmBackward0' -> 'addmm'."""
    name = name.rsplit(":", 1)[-1].strip() if "evaluate_function" in name else name
    name = name.removeprefix("aten::").removeprefix("torch::autograd::")
    return re.sub(r"backward\d*$", "", name.lower())


def category_of(name: str) -> str | None:
    """The category an event's name alone says, or None (to be decided by its callers)."""
    low, base = name.lower(), _base(name)
    if low.startswith("optimizer.") or "_foreach_" in low or "_fused_" in low or "_amp_" in low:
        return "optimizer"
    if _COLLECTIVE.search(low):
        return "collective"
    if low.startswith("aten::") and base in _VIEWS:
        return "other"
    if "attention" in base or "sdpa" in base:
        return "attention"
    if "conv" in base:
        return "conv"
    if base in _MATMUL:
        return "matmul"
    if "norm" in base:
        return "norm"
    if "loss" in base or "log_softmax" in base or base in _REDUCTIONS:
        return "loss_reduction"
    if base in _COPIES or low.startswith("memcpy") or low.startswith("memset"):
        return "copy"
    if base in _ALLOC_OR_VIEW:
        return "other"
    if low.startswith("aten::") and _ELEMENTWISE_HINT.search(base):
        return "elementwise"
    return None


@dataclass(frozen=True)
class StepProfile:
    """Per step, in seconds: the profiled step's wall time, the device's busy time, the host's
    dispatch time (None on the CPU), and busy time by category (summing to `busy_s` up to the
    kernels' overlap). `top_ops` names the operators that took longest, with their seconds."""

    steps: int
    device: str
    step_time_s: float
    busy_s: float
    dispatch_s: float | None
    category_s: dict[str, float]
    top_ops: list[tuple[str, float]] = field(default_factory=list)

    def top_category(self) -> tuple[str, float]:
        """The category with the most time, and its share of the busy time."""
        name = max(self.category_s, key=lambda c: self.category_s[c])
        total = sum(self.category_s.values())
        return name, (self.category_s[name] / total if total > 0 else 0.0)


def profile_steps(step: Callable[[], object], device: torch.device, steps: int) -> StepProfile:
    """Run `step` `steps` times under torch.profiler and attribute their time. On a GPU one
    more step runs first under the profiler, unrecorded, so CUPTI's start-up is not in the
    steps; on the CPU the step is warm already (it has just been measured)."""
    assert steps >= 1
    activities = [ProfilerActivity.CPU]
    warmup = 0
    plan = None
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        warmup = 1
        plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1)
    synchronize(device)
    with _without_kineto_notices(), profile(activities=activities, schedule=plan) as prof:
        for _ in range(warmup):
            step()
            prof.step()
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        synchronize(device)
        wall = time.perf_counter() - t0
        prof.step()
    return attribute(read(prof.profiler.kineto_results), device.type, steps, wall)


# torch 2.10 and 2.11 warn at every profile, with a schedule of cycles or none, that "Profiler
# clears events at the end of each cycle" (pytorch#180387, fixed after 2.11): a profile here is
# one cycle, so the notice says nothing about it, and it was the one Python warning on the
# terminal of every sweep on the H100 (torch 2.11), CPU points included.
_CYCLE_NOTICE = r"Warning: Profiler clears events at the end of each cycle"


@contextlib.contextmanager
def _without_kineto_notices() -> Iterator[None]:
    """Keep Kineto's "USDT: ... profiler_start/profiler_stop" lines (written to file
    descriptor 2 by torch 2.13's C++ at every start and stop, with no setting that silences
    them) off the user's terminal: stderr is held in a file over the block and every other
    line is written back, in order, when it ends. Torch's cycle notice (_CYCLE_NOTICE) is not
    shown either; every other warning is."""
    sys.stderr.flush()
    saved = os.dup(2)
    with warnings.catch_warnings(), tempfile.TemporaryFile(mode="w+b") as held:
        warnings.filterwarnings("ignore", message=_CYCLE_NOTICE, category=UserWarning)
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(True) if not line.startswith(b"USDT:")]
            if kept:
                os.write(2, b"".join(kept))


def attribute(events: list[Event], kind: str, steps: int, wall_s: float) -> StepProfile:
    """Sum profiler events (profile_events.read's) into a StepProfile (per step). `kind` is
    'cuda' or 'cpu'."""
    categories = dict.fromkeys(CATEGORIES, 0.0)
    by_op: dict[str, float] = {}
    dispatch = 0.0
    for e in events:
        if e.device_type != DeviceType.CPU or not e.name.startswith("aten::"):
            continue
        host = e.self_host_ns() / 1e9
        own = e.self_device_ns() / 1e9 if kind == "cuda" else host
        dispatch += host
        if own <= 0:
            continue
        cat = _category(e)
        categories[cat] += own
        by_op[e.name] = by_op.get(e.name, 0.0) + own
    # Collectives (gloo's work items, NCCL's kernels) are not aten operators: their time is
    # the wall time during which any was in flight (a parallel point's; 0 for one process).
    spans = [(e.start_ns, e.end_ns) for e in events if is_collective(e.name)]
    categories["collective"] += union_length(spans) / 1e9
    # the union of the kernels' intervals; on the CPU, or where none came back, the summed time
    kernels = [(e.start_ns, e.end_ns) for e in events if e.device_type == DeviceType.CUDA]
    busy = union_length(kernels) / 1e9 if kind == "cuda" and kernels else sum(categories.values())
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:8]
    return StepProfile(
        steps=steps,
        device=kind,
        step_time_s=wall_s / steps,
        busy_s=busy / steps,
        dispatch_s=dispatch / steps if kind == "cuda" else None,
        category_s={c: s / steps for c, s in categories.items()},
        top_ops=[(name, s / steps) for name, s in top],
    )


def _category(e: Event) -> str:
    """The event's category: optimizer when it runs inside an optimizer step, else its own
    name's, else its nearest caller's, else `other` (kept on the event once decided)."""
    if e.category is not None:
        return e.category
    chain: list[Event] = []
    node: Event | None = e
    while node is not None:
        chain.append(node)
        node = node.parent
    cat: str | None = None
    if e.name.startswith("aten::") and _base(e.name) in _VIEWS:
        cat = "other"  # a view moves nothing, whoever calls it
    elif any(n.name.startswith("Optimizer.step") for n in chain):
        cat = "optimizer"
    else:
        cat = next((c for n in chain if (c := category_of(n.name)) not in (None, "other")), None)
    cat = cat or category_of(e.name) or "other"
    e.category = cat
    return cat


def is_collective(name: str) -> bool:
    """Whether an event is communication (gloo's work items on the CPU, NCCL's kernels)."""
    return any(m in name.lower() for m in _IN_FLIGHT)


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by `intervals` (start, end), each point counted once."""
    total = 0.0
    end = float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total
