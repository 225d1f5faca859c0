"""What one array task of a launched sweep runs (issue 53; run.launcher submits it): its shard
of the sweep (run.shard's selection by whole batch-size series) into its own shard folder, with
resume on, so that a job requeued after a preemption or its time limit (submitit's Checkpointable:
the checkpoint is the same call again) measures only the points that have no row yet.

Imported only where submitit is installed (the `slurm` extra): in the launching process and in
each job's, which unpickles ShardJob from here.

Test hook: GPUBENCH_TEST_SHARD_EXIT=I (read here alone) makes shard I's job process exit with
status 3 right after its first row is written, as a job killed mid-run would."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit

from gpubench.config.spec import AUTO, SweepSpec
from gpubench.store.results import RESULTS_FILE

EXIT_ENV = "GPUBENCH_TEST_SHARD_EXIT"
PLAN_FILE = "plan.json"


def shard_dir(launch_dir: Path, index: int, count: int) -> Path:
    """The run folder of shard `index` of `count` in the launcher's folder `launch_dir`."""
    return launch_dir / "shards" / f"{index}-of-{count}"


def has_rows(run_dir: Path) -> bool:
    """Whether `run_dir` holds a results file with at least one byte (a sweep to resume)."""
    results = run_dir / RESULTS_FILE
    return results.is_file() and results.stat().st_size > 0


@dataclass(frozen=True)
class Measuring:
    """What every shard's sweep is given: the point's memory cap (bytes, None: none), its time
    limit (seconds, None: none), and the devices of a task's device pool (run.pool; () where a
    task has one GPU or none)."""

    max_memory: int | None
    point_timeout_s: float | None
    gpus: tuple[str, ...] = ()


class ShardJob(submitit.helpers.Checkpointable):
    """The callable each array task runs with its shard index: picklable (the spec and settings
    only), and Checkpointable, so that a requeued task calls it again and it resumes."""

    def __init__(self, spec: SweepSpec, launch_dir: Path, count: int, measuring: Measuring):
        self.spec, self.launch_dir, self.count, self.measuring = spec, launch_dir, count, measuring

    def __call__(self, index: int) -> dict[str, Any]:
        """Run shard `index` (1-based) of the sweep into its shard folder, resuming the rows
        already there; the shard's rows and its `error` rows, counted. A point's failure is a
        row; anything else raised fails the job (collect reports it with its log)."""
        from gpubench.run import forkserver

        # The job's workers come from a fork server that imports torch and the harness
        # (seconds of one core): started before this process's own imports of the sweep
        # (torch, pandas, scipy), the two run side by side, as on the command line (cli.main),
        # instead of one after the other (run_sweep would start it only now).
        forkserver.start()
        from gpubench.run.sweep import run_sweep
        from gpubench.store.results import read_rows

        out = shard_dir(self.launch_dir, index, self.count)
        out.mkdir(parents=True, exist_ok=True)
        plan = self.launch_dir / PLAN_FILE if self.spec.batch_sizes == AUTO else None
        exit_at = os.environ.get(EXIT_ENV) == str(index)

        def on_row(row: dict[str, Any], done: int, total: int) -> None:
            print(f"shard {index}/{self.count}: {done}/{total} {row.get('status')}", flush=True)
            if exit_at:  # the test hook: killed mid-run, its first row written
                print(f"{EXIT_ENV}={index}: shard {index} exits with status 3", file=sys.stderr)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(3)

        run_sweep(
            self.spec,
            out,
            max_memory=self.measuring.max_memory,
            point_timeout_s=self.measuring.point_timeout_s,
            resume=has_rows(out),
            confirm=False,  # a shard holds no verdict's leaders together (run.shard)
            shard=(index, self.count),
            whole_series=True,  # a series measured in one job, on one machine (run.shard)
            plan_file=plan,
            on_row=on_row,
            gpus=self.measuring.gpus,
        )
        rows = read_rows(out)
        return {"rows": len(rows), "errors": sum(r.get("status") == "error" for r in rows)}
