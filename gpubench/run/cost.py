"""A row's cost columns from the sweep's prices (issue 32): what its device's time costs per
million samples, per epoch and to the target. Added by the sweep's parent to each row it stores,
so a row says what it cost at the prices it was run with."""

from __future__ import annotations

from typing import Any

from gpubench.config.prices import Prices
from gpubench.science.partition import finite
from gpubench.science.standing import positive

S_PER_HOUR = 3600.0


def devices_held(row: dict[str, Any]) -> int:
    """How many devices the row's point held: a parallel point's world, else one."""
    world = row.get("world_size")
    if row.get("parallel") not in (None, "none") and isinstance(world, int | float) and world > 0:
        return int(world)
    return 1


def columns(row: dict[str, Any], prices: Prices) -> dict[str, Any]:
    """The cost columns of `row` ({} where its device has no price): dollars per hour of the
    devices it held, per million samples and per epoch at its samples_per_s, and to target at
    its time_to_target_s; each None where its figure is."""
    usd = prices.of(str(row.get("device")))
    if usd is None:
        return {}
    per_s = usd * devices_held(row) / S_PER_HOUR
    rate = positive(row.get("samples_per_s"))
    reached = row.get("time_to_target_s")
    return dict(
        usd_per_hour=per_s * S_PER_HOUR,
        usd_per_million_samples=None if rate is None else per_s * 1e6 / rate,
        epoch_samples=prices.epoch_samples,
        usd_per_epoch=None
        if rate is None or prices.epoch_samples is None
        else per_s * prices.epoch_samples / rate,
        usd_to_target=float(row["time_to_target_s"]) * per_s if finite(reached) else None,
    )
