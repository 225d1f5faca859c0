"""A configuration's keys: the one place a row's or a point's identity, configuration, series and
verdict partition are computed, from the registry of settings (config.registry). `Point.key` is
`same_key` of the point; the sweep, tune, the store's records and the verdict all key by these.

A key is a tuple of setting values in the registry's order, one spelling per value (a bool or a
whole float as an int, NaN as None: config.registry.normal) and a setting a row lacks, or holds
as null, at its default: a row written before a setting existed keys as one measured at its
default, and a row read back from a frame keys as the point it was measured at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpubench.config import registry

Key = tuple[Any, ...]

# Every setting's column, in the registry's order: a row's identity columns.
IDENTITY = registry.names()
# The fields that partition a verdict (the user's choices), in the order a heading names them.
FIXED = registry.fixed()
_COMPETING = tuple(registry.competing())
# The columns that name a configuration: the identity but the seed.
CONFIGURATION = [c for c in IDENTITY if c != "seed"]
# What the points of one batch-size series differ in (the sweep's growth, growth.json).
SERIES = ("batch_size",)


def same_key(row: Mapping[str, Any], *skip: str) -> Key:
    """`row`'s (or a point's fields') whole identity but the settings `skip`: rows with equal
    keys differ only there."""
    return tuple(registry.normal(s.value(row)) for s in registry.SETTINGS if s.name not in skip)


def identity(row: Mapping[str, Any]) -> Key:
    """A row's (or a point's) whole identity."""
    return same_key(row)


def configuration(row: Mapping[str, Any], *skip: str) -> Key:
    """The configuration `row` belongs to: its identity but the seed (and the fields `skip`):
    rows of one configuration under several seeds measure the same speed, and their times to
    target are one configuration's."""
    return same_key(row, "seed", *skip)


def series_key(row: Mapping[str, Any]) -> Key:
    """The batch-size series `row` belongs to: its identity but the batch size (the seed
    kept: two seeds are two series)."""
    return same_key(row, *SERIES)


def partition_key(row: Mapping[str, Any]) -> Key:
    """The user's choices a row was measured under (FIXED), in FIXED's order."""
    return same_key(row, *_COMPETING)


def identity_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """identity() by column name."""
    return dict(zip(IDENTITY, identity(row), strict=True))
