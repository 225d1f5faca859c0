"""A profile's events read straight from the profiler's results (Kineto's), without torch's
FunctionEvent objects: building those (forty fields each, then their trees and backward stack
traces) was most of a profile's analysis, about a second of every default CPU sweep. What is
kept is what probes.profile attributes, computed as torch computes it (profiler_util's
FunctionEvent and EventList._populate_cpu_children): each event's name, where it ran, its
interval, its caller on the host, its own (self) host time and its kernels' device time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch.autograd import DeviceType

# The events torch's own parsing leaves out (profiler's _filter_name): utility operators, whose
# time stays their caller's own.
_LEFT_OUT = {
    "[memory]",
    "[OutOfMemory]",
    "profiler::_record_function_enter",
    "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
    "aten::is_leaf",
    "aten::output_nr",
    "aten::_version",
}
_KERNEL_DEVICES = (DeviceType.CUDA, DeviceType.PrivateUse1, DeviceType.XPU)


@dataclass(eq=False, slots=True)
class Event:
    """One profiled event; times in nanoseconds on the profiler's clock."""

    name: str
    device_type: DeviceType
    start_ns: int
    end_ns: int
    thread: int
    is_async: bool  # started and ended on different threads, or Kineto says so
    parent: Event | None = None  # the innermost host event around it (same thread)
    children: list[Event] = field(default_factory=list)  # the host events directly inside
    kernel_ns: int = 0  # the device time of the kernels it launched itself
    category: str | None = field(default=None)  # probes.profile's, once decided

    @property
    def on_host(self) -> bool:
        """A host event that nests (synchronous, on the CPU): one of the host's call tree."""
        return self.device_type == DeviceType.CPU and not self.is_async

    def self_host_ns(self) -> int:
        """Its time on the host less the host events inside it (0 for a device event)."""
        if not self.on_host:
            return 0
        return self.end_ns - self.start_ns - sum(c.end_ns - c.start_ns for c in self.children)

    def self_device_ns(self) -> int:
        """The device time of its own kernels (0 for an asynchronous or device event)."""
        return self.kernel_ns if self.on_host else 0


def read(results: Any) -> list[Event]:
    """The events of a finished profile's Kineto results (torch.profiler.profile's
    `.profiler.kineto_results`), in order of start (then longest first), each host event linked
    to its caller and credited with its kernels, as torch's FunctionEvents would be."""
    events: list[Event] = []
    frontend: dict[int, list[Event]] = {}  # correlation id -> the operators that carry it
    linked: list[tuple[int, Event]] = []  # kernels and runtime calls, by their operator's id
    for k in results.events():
        name = k.name()
        if name in _LEFT_OUT or getattr(k, "is_hidden_event", lambda: False)():
            continue
        thread = k.start_thread_id()
        is_async = bool(k.is_async()) or thread != k.end_thread_id()
        e = Event(name, k.device_type(), k.start_ns(), k.end_ns(), thread, is_async)
        events.append(e)
        correlation = k.linked_correlation_id()
        if correlation > 0:
            linked.append((correlation, e))
        else:
            frontend.setdefault(k.correlation_id(), []).append(e)
    for correlation, e in linked:
        for op in frontend.get(correlation, ()):
            if not op.on_host:
                continue
            if e.device_type in _KERNEL_DEVICES:
                op.kernel_ns += e.end_ns - e.start_ns
            elif e.device_type == DeviceType.CPU:
                e.thread = op.thread  # a runtime call (a launch) nests under its operator
    events.sort(key=lambda e: (e.start_ns, -e.end_ns))
    _link_callers(events)
    return _without_repeats(events)


def _link_callers(events: list[Event]) -> None:
    """Each host event's caller: the innermost host event of its thread whose interval holds
    its own (partial overlaps are no nesting)."""
    stack: list[Event] = []
    thread: int | None = None
    for e in sorted(
        (e for e in events if e.on_host), key=lambda e: (e.thread, e.start_ns, -e.end_ns)
    ):
        if e.thread != thread:
            stack, thread = [], e.thread
        while stack:
            caller = stack[-1]
            if e.start_ns >= caller.end_ns or e.end_ns > caller.end_ns:
                stack.pop()
                continue
            caller.children.append(e)
            e.parent = caller
            break
        stack.append(e)


def _without_repeats(events: list[Event]) -> list[Event]:
    """`events` less each that is the only event inside a caller of its own name (an operator
    redispatching to itself), its callees and kernels passed to that caller, as torch's
    EventList._remove_dup_nodes does: the caller's self time then includes the repeat's."""
    while True:
        repeats: set[int] = set()
        for e in events:
            caller = e.parent
            if caller is not None and caller.name == e.name and len(caller.children) == 1:
                caller.children = e.children
                caller.kernel_ns = e.kernel_ns
                for callee in e.children:
                    callee.parent = caller
                repeats.add(id(e))
        if not repeats:
            return events
        events = [e for e in events if id(e) not in repeats]
