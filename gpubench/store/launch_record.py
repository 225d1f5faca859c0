"""A launcher's folder's launch.json (issue 53): how `sweep --launcher slurm|local` ran the
sweep (the launcher, its settings, the shard count) and every job it submitted, with its writer
and reader (run.launcher), so that `collect` waits for the jobs of another process and a resume
resubmits only the shards that need it.

```
{"launcher": "slurm" | "local", "shards": int, "partition": str | null,
 "time_limit_min": int, "gpus_per_task": int, "array_parallelism": int | null,
 "jobs": [{"shard": int, "job_id": str, "submitted_at": str}, ...]}
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpubench.store.typed_json import Record

FILE = "launch.json"
LAUNCHERS = ("slurm", "local")


@dataclass(frozen=True)
class Job:
    """One submission: array task of shard `shard` (1-based) as job `job_id` ("4242_0" on
    Slurm, a process id for the local launcher), submitted at `submitted_at` (ISO time)."""

    shard: int
    job_id: str
    submitted_at: str


@dataclass(frozen=True)
class LaunchRecord(Record):
    """The whole of launch.json: the settings a launch was made with and its jobs, in the
    order submitted (a shard's latest job is its last)."""

    FILE = FILE
    WHAT = "a launch record"

    launcher: str
    shards: int
    partition: str | None
    time_limit_min: int
    gpus_per_task: int
    array_parallelism: int | None
    jobs: tuple[Job, ...] = ()

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"launcher {self.launcher!r} is none of {', '.join(LAUNCHERS)}")
        if self.shards < 1:
            raise ValueError(f"shards {self.shards} is not a count >= 1")

    def latest(self) -> dict[int, Job]:
        """Each shard's latest job, by shard (shards never submitted are absent)."""
        return {j.shard: j for j in self.jobs}

    def with_jobs(self, jobs: list[Job]) -> LaunchRecord:
        """This record with `jobs` submitted after its own."""
        return dataclasses.replace(self, jobs=(*self.jobs, *jobs))


read = LaunchRecord.read
