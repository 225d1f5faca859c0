"""Issue 53: a sweep through submitit (run.launcher), run for real with its LocalExecutor
(`--launcher local`: real job processes, no Slurm) on a tiny model: two shards, one array task
each, merged into one folder with every point once; a job that dies mid-run (the test hook
GPUBENCH_TEST_SHARD_EXIT) is reported with its log's path and tail, the other shard's rows are
merged, and the resume resubmits only that shard, which finishes from its rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from isolation import rows

from gpubench.cli.main import main
from gpubench.config.spec import Point
from gpubench.run import launcher
from gpubench.run.shard_job import EXIT_ENV, shard_dir
from gpubench.store import launch_record, pace_record

pytest.importorskip("submitit")

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
