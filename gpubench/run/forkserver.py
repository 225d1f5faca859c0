"""Where worker processes come from: a fork server that has imported torch and gpubench's
harness once. Light on purpose (no torch, no pandas): the command line starts the server here
before its own heavy imports, so that the two sets of imports run side by side."""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from gpubench.probes import process_tree

# What the server imports once for every worker it forks. torch.optim imports torch._dynamo at
# its first use: seconds a fresh worker should not pay. The reference models and data sets are
# imported where first used (the command line does not need torch): here, before any point's
# memory cap, since a module imported under the cap maps its libraries inside it.
PRELOAD = (
    "gpubench.harness.point",
    "gpubench.science.convergence",
    "gpubench.run.worker",
    "gpubench.models.mlp",
    "gpubench.models.cnn",
    "gpubench.models.transformer",
    "gpubench.data.digits",
    "gpubench.data.text",
    "torch._dynamo",
)


def context() -> Any:  # typeshed has no common type of the spawn and forkserver contexts
    """Where worker processes come from: a fork server that has imported PRELOAD once (a fresh
    worker then starts in tens of milliseconds instead of seconds, and never inherits a CUDA
    context or OpenMP threads), or plain spawn where there is no fork server (Windows).
    A user's model module must be importable in the worker: sys.path and PYTHONPATH as they
    were when the server started carry over. Its workers, and whatever they start, know
    this process's tree as gpubench's own (probes.process_tree.claim_root): their busy check
    counts none of it as other load."""
    process_tree.claim_root()  # before the fork server starts: it passes its environment on
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def start() -> None:
    """Start the fork server now, without waiting for it: its imports (torch, torch._dynamo,
    gpubench's harness: seconds of one core) then run beside whatever the caller does before
    its first worker, rather than before that worker. A no-op where it runs already or where
    workers are spawned (no fork server)."""
    ctx = context()
    with main_module_hidden():
        ensure_running(ctx)


def stop() -> None:
    """End the fork server at once where this process started one: called as a command's
    process ends. A server still importing PRELOAD notices its parent's exit only when its
    imports are done (seconds), and meanwhile holds the command's stdout and stderr open, so a
    caller reading them to their end (a script, CI) waited for imports nobody would use."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)  # the stdlib's one server
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):  # it ended already
            os.kill(pid, signal.SIGKILL)


def spawn(
    ctx: Any, target: Callable[..., Any], args: tuple[Any, ...], name: str, duplex: bool = True
) -> tuple[BaseProcess, Connection, Connection]:
    """`target(*args, its end of a pipe, a lifeline)` started as daemon process `name` of `ctx`
    (context's), from the fork server, started first where it is not running yet. Returns the
    process, this end of the pipe (the reading end where not `duplex`) and the lifeline's
    writing end, never written: its closing, at this process's exit too, ends the process."""
    parent, child = ctx.Pipe(duplex=duplex)
    lifeline_r, lifeline_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(*args, child, lifeline_r), name=name, daemon=True)
    with main_module_hidden():
        ensure_running(ctx)
        proc.start()
    child.close()  # so that the process's death reads as end-of-file here
    lifeline_r.close()
    return proc, parent, lifeline_w


def ensure_running(ctx: Any) -> None:
    """Start the fork server (if that is where workers come from) with SIGINT ignored, which it
    inherits: a Ctrl-C meant for the sweep must not kill it halfway through its imports."""
    if ctx.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """The worker's code lives in gpubench, never in the caller's script: keep multiprocessing
    from re-running that script (and any sweep at its top level) in every new worker."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@contextlib.contextmanager
def imported_meanwhile(modules: Sequence[str]) -> Iterator[None]:
    """Import `modules` in a thread of this process while the block runs, and wait for them
    when it ends: a block that waits on the fork server and its first worker (their imports,
    seconds) leaves a core idle that the imports the caller needs later (the report's
    matplotlib) can use, and nothing of theirs runs beside what follows the block (a
    calibration, a point). An import's error is raised when the block ends, unless it raised."""
    failed: list[BaseException] = []

    def load() -> None:
        try:
            for name in modules:
                importlib.import_module(name)
        except BaseException as e:  # raised in the caller's thread, below
            failed.append(e)

    thread = threading.Thread(target=load, name="gpubench-imports", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failed:
        raise failed[0]
