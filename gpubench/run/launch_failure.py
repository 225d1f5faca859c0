"""Which rank ended a point of a torchrun launch. A killed rank (SIGKILL, the out-of-memory killer)
says nothing and its peers see only a lost connection, so each rank registers its host and pid,
and each that meets an error notes it in the store in order. Rank 0 names, as "rank R of W: ...",
first the ranks gone from its host, then those that never answered, then the notes, its own last.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from gpubench.harness.failure import is_out_of_memory, one_line
from gpubench.probes import process_tree

_PREFIX = "gpubench/failed"
_RANK = "gpubench/rank"
# How often rank 0 looks again for notes and gone peers: torchrun's agent checks its workers
# every 0.1 s (--monitor-interval's default in torch 2.13), so a death shows no sooner anyway.
POLL_S = 0.1


class Stopped(Exception):
    """SIGTERM while a point ran: torchrun stops every rank this way once one has ended."""

    def __init__(self) -> None:
        super().__init__("stopped by SIGTERM (torchrun stops the group once a rank has ended)")


@dataclass(frozen=True)
class Cause:
    """The row's status (`oom` or `error`) and reason; `stopped_only`: every rank was only
    stopped by SIGTERM (a user stopped the job; no point failed)."""

    status: str
    reason: str
    stopped_only: bool


def register(store: Any, rank: int) -> None:
    """This rank's host and pid, for rank 0 to tell whether it still runs."""
    store.set(f"{_RANK}/{rank}", json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))


def note(store: Any, index: int, rank: int, world: int, exc: BaseException) -> None:
    """This rank's error at point `index`, numbered in the order the ranks wrote theirs."""
    order = store.add(f"{_PREFIX}/{index}/count", 1)
    store.set(
        f"{_PREFIX}/{index}/{rank}",
        json.dumps(
            {
                "order": order,
                "oom": is_out_of_memory(exc),
                "stopped": isinstance(exc, Stopped),
                "reason": f"rank {rank} of {world}: {one_line(exc)}",
            }
        ),
    )


def cause(store: Any, index: int, world: int, own: BaseException, wait_s: float) -> Cause:
    """Rank 0, after its own error `own` at point `index`: what ended the point, once each rank
    has noted its error or is gone (waiting up to `wait_s`, the group timeout)."""
    deadline = time.monotonic() + wait_s
    notes: dict[int, dict[str, Any]] = {}
    gone: list[int] = []
    while True:
        for r in range(1, world):
            if r not in notes and store.check([f"{_PREFIX}/{index}/{r}"]):
                notes[r] = json.loads(store.get(f"{_PREFIX}/{index}/{r}"))
        gone = [r for r in range(1, world) if r not in notes and _gone(store, r)]
        silent = [r for r in range(1, world) if r not in notes and r not in gone]
        if not silent or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    parts = [
        f"rank {r} of {world} died without an error of its own (its process ended: a signal "
        "such as SIGKILL from a user or the out-of-memory killer)"
        for r in gone
    ]
    parts += [
        f"rank {r} of {world} said nothing within {wait_s:g} s (stuck, or on a machine that "
        "is gone)"
        for r in silent
    ]
    spoken = [n for _, n in sorted(notes.items(), key=lambda item: item[1]["order"])]
    parts += [str(n["reason"]) for n in spoken]
    parts.append(f"rank 0 of {world}: {one_line(own)}")
    first_oom = not gone and not silent and bool(spoken and spoken[0]["oom"])
    oom = first_oom or (not parts[:-1] and is_out_of_memory(own))
    stopped_only = (
        not gone and not silent and isinstance(own, Stopped) and all(n["stopped"] for n in spoken)
    )
    return Cause("oom" if oom else "error", "; then ".join(parts), stopped_only)


def _gone(store: Any, rank: int) -> bool:
    """Whether `rank`'s process has ended; only a process on this host can be seen to."""
    key = f"{_RANK}/{rank}"
    if not store.check([key]):
        return False
    where = json.loads(store.get(key))
    if where["host"] != socket.gethostname():
        return False
    if os.path.isdir("/proc"):
        fields = process_tree.stat_fields(int(where["pid"]))
        return fields is None or fields[0] in ("Z", "X")  # ended, maybe not yet reaped
    try:
        os.kill(int(where["pid"]), 0)
    except ProcessLookupError:
        return True
    return False
