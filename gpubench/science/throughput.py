"""The throughput-optimal batch: where samples/s saturates, shared by the speed report and the
batch-size analysis of convergence runs."""

from __future__ import annotations

import math
from collections.abc import Sequence

# A batch within this fraction of the best samples/s counts as saturating throughput.
SATURATION = 0.05


def throughput_optimal_batch(
    batch_sizes: Sequence[float], samples_per_s: Sequence[float], within: float = SATURATION
) -> int | None:
    """The smallest batch whose samples/s is within `within` (a fraction) of the best one's."""
    pairs = [
        (int(b), float(t))
        for b, t in zip(batch_sizes, samples_per_s, strict=True)
        if t is not None and math.isfinite(float(t)) and t > 0
    ]
    if not pairs:
        return None
    best = max(t for _, t in pairs)
    return min(b for b, t in pairs if t >= (1 - within) * best)
