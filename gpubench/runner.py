"""Runs one Point and classifies how it ended: every outcome becomes a result row."""

from __future__ import annotations

import gc
from typing import Any

import torch

from gpubench.measure import measure_point
from gpubench.results import make_row
from gpubench.spec import Budget, Point


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}" if text else type(exc).__name__


class InProcessRunner:
    """Measures points in this process. An out-of-memory error becomes an `oom` row and any
    other exception an `error` row with its type and message; the sweep goes on."""

    def run(self, point: Point, budget: Budget) -> dict[str, Any]:
        try:
            return measure_point(point, budget)
        except (torch.OutOfMemoryError, MemoryError) as e:
            return make_row(point, "oom", error=one_line(e))
        except Exception as e:  # the sweep records the failure as data and goes on
            return make_row(point, "error", error=one_line(e))
        finally:
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def close(self) -> None:
        pass
