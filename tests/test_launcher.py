"""Issue 53: a sweep through submitit (run.launcher), run for real with its LocalExecutor
(`--launcher local`: real job processes, no Slurm): the default suite on tiny models in three
shards, one array task each, merged into one folder with the points of one sweep, each once; a
job that dies mid-run (the test hook GPUBENCH_TEST_SHARD_EXIT) is reported with its log's path
and tail, the other shards' rows are merged, and the resume resubmits only that shard, which
finishes from its rows; a task signalled as Slurm signals one at its time limit (USR2) is
requeued by submitit and resumes. All in one launch (its job processes are the cost)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from isolation import rows

pytest.importorskip("submitit")  # the `test` extra installs it; run.shard_job imports it

from gpubench.cli import parser, sweep_args
from gpubench.cli.main import main
from gpubench.config.spec import Point
from gpubench.run import launcher, shard
from gpubench.run.context import RunOptions
from gpubench.run.shard_job import EXIT_ENV, shard_dir
from gpubench.run.sweep import plan
from gpubench.store import launch_record, pace_record

# the flags' checks: 4 points, 2 batch sizes x 2 optimizers (2 series each way round)
SWEEP = ["sweep", "--models", "mlp", "--size", "tiny", "--devices", "cpu", "--batch-sizes"]
SWEEP += ["2,4", "--precisions", "fp32", "--optimizers", "sgd,adamw", "--steps", "2"]
SWEEP += ["--no-profile", "--launcher", "local", "--shards", "2", "--time-limit", "10"]


# The default suite (quick: its models, optimizers, batch sizes and growth rule) at its tiny
# size, on the CPU (its `auto` devices on a machine without CUDA), one measured step a point,
# unprofiled, in fp32 alone: bf16, which many CPUs only emulate (the suite then leaves it out),
# would double the points' time. 18 points in 6 series.
DEFAULT = ["sweep", "--size", "tiny", "--devices", "cpu", "--steps", "1", "--no-profile"]
DEFAULT += ["--precisions", "fp32"]
LAUNCH = [*DEFAULT, "--launcher", "local", "--shards", "3", "--time-limit", "10"]


def _usr2_after_first_row(out: Path, shard: int, count: int, sent: list[int]) -> None:
    """Once shard `shard`'s folder holds a row, send its task SIGUSR2, as Slurm signals a task
    before its time limit or when preempted; the task's process id goes into `sent` (nothing
    where no row came within 600 s)."""
    results = shard_dir(out, shard, count) / "results.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline:
        record = launch_record.read(out) if out.is_dir() else None
        job = record.latest().get(shard) if record is not None else None
        if job is not None and results.is_file() and results.read_text().strip():
            (task,) = _children(int(job.job_id))  # the local controller's task: the sweep
            os.kill(task, signal.SIGUSR2)
            sent.append(task)
            return
        time.sleep(0.05)


@pytest.mark.slow  # four job processes, one requeued, each importing torch (minutes on 2 cores)
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the job's process in /proc")
def test_three_shards_of_the_default_suite_merge_into_the_points_of_one_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One launch of the default suite on tiny models in 3 shards (restricted as DEFAULT
    says: the tiny size, one measured step, no profile, fp32), each of the launcher's three
    cases in its own shard: shard 1's task is signalled USR2 mid-run and requeued by submitit,
    resuming from its rows; shard 2's job dies after its first row (GPUBENCH_TEST_SHARD_EXIT)
    and is named with its log's path and tail, and the resume resubmits it alone, finishing
    from its rows; shard 3 runs through. The merged folder then holds exactly the points a
    single sweep plans (run.sweep.plan; such a sweep grows its series past them, a shard does
    not), each once."""
    spec = sweep_args.spec_from_args(parser.build_parser().parse_args(DEFAULT))
    planned = plan(spec, tmp_path, RunOptions())
    expected = {p.key() for p in planned}
    out = tmp_path / "launch"
    monkeypatch.setenv(EXIT_ENV, "2")  # shard 2's job dies after its first row
    sent: list[int] = []
    signaller = threading.Thread(target=_usr2_after_first_row, args=(out, 1, 3, sent), daemon=True)
    signaller.start()
    assert main([*LAUNCH, "--out", str(out), "--no-report"]) == 1
    signaller.join()
    got = capsys.readouterr()
    record = launch_record.read(out)
    assert record is not None and record.launcher == "local" and record.shards == 3
    assert [j.shard for j in record.jobs] == [1, 2, 3] and record.time_limit_min == 10
    jobs = record.latest()
    # shard 1: signalled, checkpointed, requeued with the same call, which resumed its folder
    assert len(sent) == 1, "shard 1 wrote no row"
    log = (out / launcher.JOBS / f"{jobs[1].job_id}_0_log.out").read_text()
    assert "Calling checkpoint method" in log and "Requeued job" in log
    assert log.count("Loading pickle") == 2 and "shard 1/3: 1/" not in log.split("Requeued job")[1]
    # shard 2: named with its log's path and its last lines, and how to resume
    failed = jobs[2].job_id
    err = out / launcher.JOBS / f"{failed}_0_log.err"
    assert f"shard 2/3 failed (job {failed}" in got.err and str(err) in got.err
    assert f"    {EXIT_ENV}=2: shard 2 exits with status 3" in got.err  # its log's tail
    assert f"sweep --resume {out}" in got.err
    kept = (shard_dir(out, 2, 3) / "results.jsonl").read_text()
    assert len(kept.splitlines()) == 1
    # shards 1 and 3 finished and are merged, each of their points once
    first = rows(out / launcher.MERGED)
    # a launch deals whole batch-size series: shards 1 and 3 hold 4 of the 6, every batch size
    firsts = {p.key() for i in (1, 3) for p in shard.select(planned, i, 3, spec, True)}
    assert sorted(Point.of(r).key() for r in first) == sorted(firsts)
    assert f"merged 2 finished shards of 3: {len(first)} rows" in got.out
    # --no-report: the merged folder's report is left to a later collect (drawn below)
    assert "report: not drawn (--no-report)" in got.out
    assert not (out / launcher.MERGED / "report.html").exists()

    monkeypatch.delenv(EXIT_ENV)
    assert main(["sweep", "--resume", str(out), "--time-limit", "5"]) == 2  # launch.json's
    assert "--time-limit with --resume" in capsys.readouterr().err
    assert main(["sweep", "--resume", str(out), "--no-report"]) == 0
    got = capsys.readouterr()
    record = launch_record.read(out)
    assert record is not None and [j.shard for j in record.jobs] == [1, 2, 3, 2]  # shard 2 alone
    assert "submitted 1 array task of 3 shards" in got.out
    assert (shard_dir(out, 2, 3) / "results.jsonl").read_text().startswith(kept)
    # one folder with the points of one sweep, each once
    merged = rows(out / launcher.MERGED)
    keys = [Point.of(r).key() for r in merged]
    assert len(keys) == len(set(keys)) and set(keys) == expected
    assert len(expected) == 18 and {r["model"] for r in merged} == {"mlp", "cnn", "transformer"}
    sources = json.loads((out / launcher.MERGED / "merge.json").read_text())["sources"]
    assert sorted(sources) == [str(shard_dir(out, i, 3)) for i in (1, 2, 3)]
    assert f"merged 3 finished shards of 3: {len(expected)} rows" in got.out
    pace = pace_record.of_folder(out / launcher.MERGED)  # from the first submission to the end
    assert pace is not None and pace.points == len(expected)
    assert pace.since.startswith("the first submission")
    assert pace.line() in got.out and "per minute" in got.out
    assert main(["collect", str(out)]) == 0  # from another process's record: the same merge
    assert len(rows(out / launcher.MERGED)) == len(expected)
    assert (out / launcher.MERGED / "report.html").is_file()  # collect draws the merge's report


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
