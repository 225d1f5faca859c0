"""The one shape of a context manager that observes a block: start() on entry, stop() on exit,
what it read left in its attributes for after the block."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Self


class Probe(AbstractContextManager[Any]):
    """Entering calls start() and returns the probe itself; leaving calls stop(), told whether
    the block raised (the block's exception then goes on, unless stop() raises one of its own).
    Subclasses override what they need; both do nothing here."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.stop(failed=exc_type is not None)

    def start(self) -> None:
        """Begin observing."""

    def stop(self, failed: bool = False) -> None:
        """End observing; `failed`: the block raised."""
