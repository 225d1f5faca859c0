"""Issue 53: a sweep through submitit (run.launcher), run for real with its LocalExecutor
(`--launcher local`: real job processes, no Slurm) on a tiny model: two shards, one array task
each, merged into one folder with every point once; a job that dies mid-run (the test hook
GPUBENCH_TEST_SHARD_EXIT) is reported with its log's path and tail, the other shard's rows are
merged, and the resume resubmits only that shard, which finishes from its rows; a task
signalled as Slurm signals one at its time limit (USR2) is requeued by submitit and resumes."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from isolation import rows

pytest.importorskip("submitit")  # the `test` extra installs it; run.shard_job imports it

from gpubench.cli import parser, sweep_args
from gpubench.cli.main import main
from gpubench.config.spec import Point
from gpubench.run import launcher
from gpubench.run.shard_job import EXIT_ENV, Measuring, shard_dir
from gpubench.store import launch_record, pace_record

# 4 points: 2 batch sizes x 2 optimizers (2 series each way round), 2 steps each
SWEEP = ["sweep", "--models", "mlp", "--size", "tiny", "--devices", "cpu", "--batch-sizes"]
SWEEP += ["2,4", "--precisions", "fp32", "--optimizers", "sgd,adamw", "--steps", "2"]
SWEEP += ["--no-profile", "--launcher", "local", "--shards", "2", "--time-limit", "10"]


@pytest.mark.slow  # three job processes, each importing torch (a minute or two on 2 busy cores)
def test_a_failed_job_is_named_with_its_log_and_the_resume_finishes_its_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "launch"
    monkeypatch.setenv(EXIT_ENV, "2")  # shard 2's job dies after its first row
    assert main([*SWEEP, "--out", str(out)]) == 1
    got = capsys.readouterr()
    record = launch_record.read(out)
    assert record is not None and record.launcher == "local" and record.shards == 2
    assert [j.shard for j in record.jobs] == [1, 2] and record.time_limit_min == 10
    failed = record.latest()[2].job_id
    log = out / launcher.JOBS / f"{failed}_0_log.err"
    assert f"shard 2/2 failed (job {failed}" in got.err and str(log) in got.err
    assert f"    {EXIT_ENV}=2: shard 2 exits with status 3" in got.err  # its log's tail
    assert f"sweep --resume {out}" in got.err
    # shard 1 finished and is merged; shard 2's first row stays in its own folder
    first = rows(out / launcher.MERGED)
    assert len(first) == 2 and "merged 1 finished shard of 2: 2 rows" in got.out
    kept = (shard_dir(out, 2, 2) / "results.jsonl").read_text()
    assert len(kept.splitlines()) == 1

    monkeypatch.delenv(EXIT_ENV)
    assert main(["sweep", "--resume", str(out), "--time-limit", "5"]) == 2  # launch.json's
    assert "--time-limit with --resume" in capsys.readouterr().err
    assert main(["sweep", "--resume", str(out)]) == 0
    got = capsys.readouterr()
    record = launch_record.read(out)
    assert record is not None and [j.shard for j in record.jobs] == [1, 2, 2]  # shard 2 alone
    assert "submitted 1 array task of 2 shards" in got.out
    assert (shard_dir(out, 2, 2) / "results.jsonl").read_text().startswith(kept)
    merged = rows(out / launcher.MERGED)
    keys = [Point.of(r).key() for r in merged]
    assert len(merged) == 4 and len(set(keys)) == 4  # every point once
    assert {(r["batch_size"], r["optimizer"]) for r in merged} == {
        (b, o) for b in (2, 4) for o in ("sgd", "adamw")
    }
    sources = json.loads((out / launcher.MERGED / "merge.json").read_text())["sources"]
    assert sorted(sources) == [str(shard_dir(out, i, 2)) for i in (1, 2)]
    assert "merged 2 finished shards of 2: 4 rows" in got.out
    pace = pace_record.of_folder(out / launcher.MERGED)  # from the first submission to the end
    assert pace is not None and pace.points == 4 and pace.since.startswith("the first submission")
    assert pace.line() in got.out and "per minute" in got.out
    assert main(["collect", str(out)]) == 0  # from another process's record: the same merge
    assert len(rows(out / launcher.MERGED)) == 4


def test_launcher_flags_are_checked_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "launch"
    cases = [
        (["--partition", "gpu"], "--partition needs --launcher slurm|local"),
        (["--launcher", "local", "--gpus", "all"], "--launcher shares the points itself"),
        (["--launcher", "local", "--partition", "gpu"], "--partition needs --launcher slurm"),
        (["--launcher", "pbs"], "allowed: slurm, local"),
        (["--launcher", "local", "--gpus-per-task", "-1"], "invalid GPU count"),
        (["--launcher", "local", "--shards", "3"], "--shards 3: suite 'quick' has 2 point series"),
        (
            ["--launcher", "local", "--gpus-per-task", "2", "--nproc", "4", "--parallel", "ddp"],
            "--gpus-per-task 2 (a pool): nproc 4 needs more devices",
        ),
    ]
    for extra, message in cases:
        assert main([*SWEEP[:-6], *extra, "--out", str(out)]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
    assert not out.exists()
    monkeypatch.setitem(sys.modules, "submitit", None)  # as where it is not installed
    assert main([*SWEEP, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "gpubench: error: --launcher needs submitit, which is not installed here; install it "
        'with: pip install "gpubench[slurm]"'
    ]
    assert not out.exists()


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow  # a job process importing torch twice (about 40 s on 2 busy cores)
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the job's process in /proc")
def test_a_task_signalled_at_its_time_limit_is_requeued_and_resumes_from_its_rows(
    tmp_path: Path,
) -> None:
    """Slurm signals a task (USR2) before its time limit or when preempted: submitit calls
    ShardJob.checkpoint, requeues the same call, and the shard resumes from its rows."""
    spec = sweep_args.spec_from_args(parser.build_parser().parse_args(SWEEP[:-6]))
    out = tmp_path / "launch"
    record = launcher.start(spec, out, launcher.Settings("local", shards=1, time_limit_min=10))
    record, (job,) = launcher.submit(spec, out, record, Measuring(None, 300.0), [1])
    results = shard_dir(out, 1, 1) / "results.jsonl"
    deadline = time.time() + 300
    while not (results.is_file() and results.read_text().strip()):  # its first row
        assert time.time() < deadline and job.state == "RUNNING", job.state
        time.sleep(0.2)
    (task,) = _children(int(job.job_id))  # the local controller's task: the sweep
    os.kill(task, signal.SIGUSR2)
    got = launcher.collect(out, {1: job})
    assert got.finished == [1] and not got.failed and got.rows == 4
    log = (out / launcher.JOBS / f"{job.job_id}_0_log.out").read_text()
    assert "Calling checkpoint method" in log and "Requeued job" in log
    # the requeued call resumed: every point once, the rows before the signal kept
    shard = rows(shard_dir(out, 1, 1))
    assert len(shard) == 4 and len({Point.of(r).key() for r in shard}) == 4
    assert log.count("Loading pickle") == 2 and "1/4" not in log.split("Requeued job")[1]
