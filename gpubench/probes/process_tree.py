"""gpubench's own processes and the CPU time they used, so that a busy-machine check counts none of
it as "other load".

The tree's root is the process that started the sweep, named to its descendants by ROOT_ENV
(`claim_root`, before any child starts); under torchrun, the rank's parent (the node's agent).
Everything under it is ours: fork server, workers, ranks, NVML sampler, compile and DataLoader
workers. Linux only (`/proc`); elsewhere the tree is this process and its reaped children.

CPU time includes reaped children (`cutime`, `cstime`), so a process that ends inside a window
still counts: its time moves to its parent's. A process orphaned out of the tree leaves with it.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "GPUBENCH_ROOT_PID"
_PROC = Path("/proc")
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state first), None where the process
    is gone or there is no /proc."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may itself hold spaces or parentheses
    return text[text.rindex(")") + 2 :].split()


def parent_pid(pid: int) -> int | None:
    """The parent of process `pid`, None where it is gone (or there is no /proc)."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[1])


def _is_ancestor_or_self(pid: int) -> bool:
    current: int | None = os.getpid()
    while current is not None and current > 0:
        if current == pid:
            return True
        current = parent_pid(current)
    return False


def under_torchrun() -> bool:
    """Whether this process is a worker that torchrun (the elastic agent) started: a rank."""
    return "TORCHELASTIC_RUN_ID" in os.environ and "LOCAL_RANK" in os.environ


def root_pid() -> int:
    """The root of gpubench's process tree: ROOT_ENV where it names this process or an ancestor
    (a stale value is ignored); else, in a torchrun rank, its parent (the node's agent); else
    this process."""
    value = os.environ.get(ROOT_ENV, "")
    if value.isdigit() and _is_ancestor_or_self(int(value)):
        return int(value)
    if under_torchrun():
        return os.getppid()
    return os.getpid()


def claim_root() -> None:
    """Name this process's root (root_pid) to every child started from now on (call it before
    the fork server starts: its children inherit its environment)."""
    os.environ[ROOT_ENV] = str(root_pid())


def _children(pid: int) -> list[int] | None:
    """The children of `pid` (of all its threads), [] where it is gone, None where the kernel
    does not list children (no /proc/<pid>/task/<tid>/children)."""
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return []
    out: list[int] = []
    for task in tasks:
        try:
            out.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            if not (task / "stat").exists():
                continue  # the thread ended between the listing and the read
            return None  # the kernel has no children lists (CONFIG_PROC_CHILDREN off)
    return out


def _children_by_scan() -> dict[int, list[int]]:
    """Every process's children, from one scan of /proc."""
    by_parent: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            ppid = parent_pid(int(entry.name))
            if ppid is not None:
                by_parent.setdefault(ppid, []).append(int(entry.name))
    return by_parent


def tree(root: int | None = None) -> list[int]:
    """`root` (default root_pid()) and every process descending from it, root first; [this
    process] where there is no /proc."""
    root = root_pid() if root is None else root
    if not _PROC.is_dir():
        return [os.getpid()]
    scanned: dict[int, list[int]] | None = None
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        kids = _children(pid) if scanned is None else scanned.get(pid, [])
        if kids is None:
            scanned = _children_by_scan()
            kids = scanned.get(pid, [])
        todo.extend(kids)
    return out


def cpu_s(pid: int, reaped: bool = True) -> float | None:
    """CPU seconds process `pid` used (all its threads), with `reaped` its reaped children's
    too; None where it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the command name
    return sum(int(v) for v in fields[11 : 15 if reaped else 13]) * _TICK_S


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds gpubench's process tree has used, reaped children included (its difference
    over a window is the tree's time in it); without /proc, this process's and its children's."""
    if not _PROC.is_dir():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    return sum(cpu_s(pid) or 0.0 for pid in tree(root))
