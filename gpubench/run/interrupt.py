"""Ctrl-C for a long sweep: the first asks it to stop after the point in flight is recorded;
the second stops at once (KeyboardInterrupt), losing only that point. SIGTERM (a scheduler's
or `kill`'s) stops at once too, as Terminated, so the sweep still says how to resume."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from gpubench.probes.probe import Probe


class Terminated(KeyboardInterrupt):
    """SIGTERM within a GracefulStop block: stop at once, like a second Ctrl-C (exit 143)."""


class GracefulStop(Probe):
    """Within the block, the first SIGINT sets `requested` and calls `on_first`; the second
    raises KeyboardInterrupt; SIGTERM raises Terminated. Outside the main thread (where Python
    cannot install signal handlers) it does nothing, and Ctrl-C keeps its usual meaning."""

    def __init__(self, on_first: Callable[[], None] | None = None) -> None:
        self.requested = False
        self._on_first = on_first
        self._previous: Any = None
        self._previous_term: Any = None
        self._installed = False

    def start(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._previous_term = signal.signal(signal.SIGTERM, _terminate)
            self._installed = True

    def stop(self, failed: bool = False) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            signal.signal(signal.SIGTERM, self._previous_term)
            self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self._on_first is not None:
            self._on_first()


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextlib.contextmanager
def terminated_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated (as Ctrl-C raises KeyboardInterrupt), so that
    what the block started (a report's chart workers) is ended and the command says what
    stopped; the handler before it comes back after. Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
