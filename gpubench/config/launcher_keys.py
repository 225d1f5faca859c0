"""A suite's `[launcher]` table (issue 53): the settings of `sweep --launcher` kept in the suite
file, each the default of its flag (the flag, where given, wins):

```toml
[launcher]
kind = "slurm"             # or "local"; set: `sweep SUITE` launches without --launcher
partition = "gpu"          # slurm only (Slurm's default partition where not set)
time_limit_min = 120       # --time-limit
gpus_per_task = 1          # --gpus-per-task (0: a CPU partition)
array_parallelism = 4      # --array-parallelism
shards = 8                 # --shards
```

The table is no part of how a point is measured: suite.json does not record it (a launch's
launch.json records the settings it submitted with), so a resume never compares it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from gpubench.config.checks import shown, whole
from gpubench.config.errors import ConfigError

LAUNCHERS = ("slurm", "local")
TABLE = "launcher"


@dataclass(frozen=True)
class LauncherKeys:
    """The `[launcher]` table's settings; None where the suite does not set one."""

    kind: str | None = None
    partition: str | None = None
    time_limit_min: int | None = None
    gpus_per_task: int | None = None
    array_parallelism: int | None = None
    shards: int | None = None


# each whole-number key and the least it may be
_WHOLE = {"time_limit_min": 1, "gpus_per_task": 0, "array_parallelism": 1, "shards": 1}


def parse_table(value: object) -> LauncherKeys:
    """`value` (the TOML table) as LauncherKeys; a ConfigError of one line naming the key, the
    bad value and what is allowed, for a key that is none of these or a value out of range."""
    if not isinstance(value, dict):
        raise ConfigError(f"[{TABLE}] must be a table, got {shown(value)}")
    names = [f.name for f in fields(LauncherKeys)]
    out: dict[str, Any] = {}
    for key, v in value.items():
        where = f"{TABLE}.{key}"
        if key not in names:
            raise ConfigError(f"unknown key {where!r}; allowed: {', '.join(names)}")
        if key == "kind":
            if v not in LAUNCHERS:
                raise ConfigError(f"invalid {where} {shown(v)}; allowed: {', '.join(LAUNCHERS)}")
            out[key] = v
        elif key == "partition":
            if not isinstance(v, str) or not v.strip():
                raise ConfigError(f"invalid {where} {shown(v)}; allowed: a partition's name")
            out[key] = v
        else:
            out[key] = whole(v, where, least=_WHOLE[key])
    keys = LauncherKeys(**out)
    if keys.partition is not None and keys.kind == "local":
        raise ConfigError(
            f'{TABLE}.partition with {TABLE}.kind = "local": a partition is Slurm\'s; '
            f'allowed: kind = "slurm", or no partition'
        )
    return keys
