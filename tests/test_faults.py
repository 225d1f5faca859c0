"""Issue 43: every fault a clear line and nothing measured lost. The results file's reader and a
resume's repair agree on what a row is; a valid row is never cut; what is not a row is moved
aside, never deleted; a file a resume would append after a rejected line is refused in one line.
Mostly synthetic rows (store.row.make_row) and the repair itself; a few tiny sweeps where a
fault must be met by the command itself (a full disk mid-sweep, a factory that hangs or dies
while built, Ctrl-C and SIGTERM sent to a real process)."""

from __future__ import annotations

import errno
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixture import speed_row

from gpubench.cli.main import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.run.context import RunContext, RunOptions
from gpubench.store import env
from gpubench.store.results import ResultsError, read_rows


def _rows(n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    points = [Point("mlp", "tiny", "cpu", "fp32", "sgd", 2**i) for i in range(n)]
    return [speed_row(p, 1e-3, 1e-4, rng, n=5) for p in points]


def _line(row: dict[str, Any]) -> bytes:
    return (json.dumps(row, allow_nan=False) + "\n").encode()


def _folder(path: Path, data: bytes) -> Path:
    """A run folder of this machine (its env.json) whose results.jsonl holds `data`."""
    path.mkdir(parents=True, exist_ok=True)
    here = {"cpu": env.cpu_info(), "torch": env.torch_info(), "gpus": env.gpu_info()}
    from gpubench.probes import nvml

    here["nvml"] = nvml.system_info()
    (path / "env.json").write_text(json.dumps({**here, "hostname": "test-host"}))
    (path / "results.jsonl").write_bytes(data)
    return path


def _resume(run_dir: Path) -> None:
    """What `sweep --resume` does to the folder before its first point."""
    with RunContext(run_dir, RunOptions(resume=True)) as run:
        run.open()


def test_a_valid_last_row_without_its_newline_is_kept_by_a_resume(tmp_path: Path) -> None:
    rows = _rows(2)
    run = _folder(tmp_path / "run", b"".join(map(_line, rows)).rstrip(b"\n"))
    assert len(read_rows(run)) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about: both rows are whole
        _resume(run)
    assert (run / "results.jsonl").read_bytes() == b"".join(map(_line, rows))
    assert read_rows(run) == rows
    assert not list(run.glob("*.rejected"))


@pytest.mark.parametrize("tail", [b"null\n", b"[1, 2]\n", b'{"status": "ok"}\n', b'{"mod'])
def test_a_last_line_that_is_not_a_row_is_moved_aside_not_appended_after(
    tmp_path: Path, tail: bytes
) -> None:
    rows = _rows(2)
    run = _folder(tmp_path / "run", b"".join(map(_line, rows)) + tail)
    with pytest.warns(UserWarning, match="not a row") as seen:
        assert read_rows(run) == rows  # the reader skips it ...
    assert len(seen) == 1
    with pytest.warns(UserWarning, match=r"moved its last line.*results\.jsonl\.rejected"):
        _resume(run)  # ... and the repair moves it aside: the two agree
    assert (run / "results.jsonl").read_bytes() == b"".join(map(_line, rows))
    assert (run / "results.jsonl.rejected").read_bytes().rstrip(b"\n") == tail.rstrip(b"\n")
    # what a resume appends next is read back: no line the reader rejects lies before it
    with open(run / "results.jsonl", "ab") as f:
        f.write(_line(_rows(3)[2]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_rows(run)) == 3


def test_a_corrupt_middle_line_refuses_a_resume_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(2)
    run = _folder(tmp_path / "run", _line(rows[0]) + b"{garbage\n" + _line(rows[1]))
    before = (run / "results.jsonl").read_bytes()
    with pytest.raises(ResultsError, match=r"line 2: corrupt row"):
        _resume(run)
    assert (run / "results.jsonl").read_bytes() == before
    (run / "suite.json").write_text(json.dumps({"name": "quick", "models": ["mlp"]}))
    capsys.readouterr()
    assert main(["sweep", "--resume", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "line 2: corrupt row" in err, err
    assert (run / "results.jsonl").read_bytes() == before


@pytest.mark.parametrize("command", ["explain", "report", "compare"])
def test_a_row_without_its_identity_is_one_line_in_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    rows = _rows(1)
    bad = b'{"status": "ok", "step_time_s": 0.1}\n'
    run = _folder(tmp_path / "run", bad + _line(rows[0]))
    args = [str(run), str(run)] if command == "compare" else [str(run)]
    assert main([command, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "line 1: corrupt row (a JSON object without model, model_size" in err


# The tails a crash, a full disk or a stray editor could leave after the last whole row.
_GARBAGE = st.one_of(
    st.sampled_from([b"null", b"[]", b"1", b'"x"', b"{}", b'{"status":"ok"}', b"\x00\xff", b" "]),
    st.binary(max_size=40),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 3),
    cut=st.floats(0, 1),
    garbage=st.lists(_GARBAGE, max_size=2),
    newline=st.booleans(),
)
def test_no_truncation_or_garbage_loses_a_valid_row_or_raises_more_than_a_line(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    cut: float,
    garbage: list[bytes],
    newline: bool,
) -> None:
    from gpubench.report.explain import explain_runs
    from gpubench.run.merge import merge

    rows = _rows(n)
    whole = b"".join(map(_line, rows))
    data = whole[: round(cut * len(whole))]
    if garbage and (not data or data.endswith(b"\n")):
        data += b"\n".join(garbage) + (b"\n" if newline else b"")
    # the rows whose every byte (but perhaps their newline) is in the file
    kept = [
        r for i, r in enumerate(rows) if len(b"".join(map(_line, rows[: i + 1]))) - 1 <= len(data)
    ]
    root = tmp_path_factory.mktemp("faults")
    run = _folder(root / "run", data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            assert read_rows(run) == kept
        except ResultsError as e:  # a line not a row before the last: one line, and refused
            assert "\n" not in str(e)
            with pytest.raises(ResultsError):
                _resume(run)
            assert (run / "results.jsonl").read_bytes() == data
            return
        for verdict in explain_runs([run])[0]:
            assert verdict.model.startswith("mlp")
        if kept:
            merged = merge([run], root / "merged")
            assert read_rows(root / "merged") == kept and merged.rows == len(kept)
        else:
            with pytest.raises(ConfigError, match="nothing to merge"):
                merge([run], root / "merged")
        _resume(run)
        _resume(run)  # a second repair finds nothing to do
    after = (run / "results.jsonl").read_bytes()
    aside = run / "results.jsonl.rejected"
    moved = aside.read_bytes() if aside.is_file() else b""
    assert after in (data[: len(after)], data + b"\n")  # rows only cut from the end, never lost
    assert data[len(after) :].rstrip(b"\n") == moved.rstrip(b"\n")  # and nothing deleted
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_rows(run) == kept


def test_compare_fails_when_the_new_run_has_no_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _folder(tmp_path / "base", b"".join(map(_line, _rows(2))))
    new = _folder(tmp_path / "new", b"")
    assert main(["compare", str(base), str(new)]) == 1
    assert "FAILED: no point is in both runs" in capsys.readouterr().out


def test_two_sweeps_in_one_second_without_out_get_two_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpubench.cli import commands

    monkeypatch.chdir(tmp_path)
    first, second = commands.reserved_run_dir(), commands.reserved_run_dir()
    assert first != second and first.is_dir() and second.is_dir()


def test_a_negative_memory_cap_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(["sweep", "quick", "--max-memory", "-5G"])
    except SystemExit as e:  # argparse's own exit, before
        status = int(str(e.code))
    err = capsys.readouterr().err.strip()
    assert status == 2 and "'-5G'" in err and "expected one argument" not in err, err


def test_a_list_with_an_empty_batch_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(["sweep", "quick", "--batch-sizes", "4,,8", "--out", "/nonexistent/x"])
    except SystemExit as e:
        status = int(str(e.code))
    err = capsys.readouterr().err.strip()
    assert status == 2 and "'4,,8'" in err and "empty" in err, err


def test_a_sweep_whose_only_row_is_oom_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpubench.store.row import make_row

    oom = make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", 8), "oom", error="out of memory")
    run = _folder(tmp_path / "run", _line(oom))
    assert main(["explain", str(run)]) == 0
    assert "no point ran ok (1 oom): nothing to conclude" in capsys.readouterr().out


def test_a_resume_refused_for_other_steps_names_the_setting(tmp_path: Path) -> None:
    import dataclasses

    from gpubench.config.spec import SweepSpec
    from gpubench.run import folder

    spec = SweepSpec(name="x", models=("mlp",))
    tmp_path.joinpath("suite.json").write_text(json.dumps(folder.as_saved(spec)))
    other = dataclasses.replace(spec, budget=dataclasses.replace(spec.budget, min_steps=1))
    with pytest.raises(ConfigError, match=r"budget\.min_steps: 10 there, 1 here") as e:
        folder.check_resumable(tmp_path, other, extend=False)
    assert "'warmup_steps'" not in str(e.value)  # not two whole budget tables


def test_explain_on_two_machines_names_the_fastest_rows_machine(tmp_path: Path) -> None:
    from gpubench.report.explain import explain_runs

    rows = _rows(2)
    for row, host in zip(rows, ("box-a", "box-b"), strict=True):
        row["host"], row["device_name"] = host, f"CPU of {host}"
    run = _folder(tmp_path / "run", b"".join(map(_line, rows)))
    fastest = max(rows, key=lambda r: r["samples_per_s"])
    (verdict,) = explain_runs([run])[0]
    assert (
        f"on {fastest['host']} (" in verdict.fastest
        and f"CPU of {fastest['host']}" in verdict.fastest
    )
    assert f"on {fastest['host']}" in verdict.lines()[0]


def test_a_fresh_run_writes_its_own_env_json(tmp_path: Path) -> None:
    run = _folder(tmp_path / "run", b"")
    (run / "results.jsonl").unlink()
    old = {"hostname": "old-host", "cpu": {"model": "Old CPU"}, "busy": "busy then"}
    (run / "env.json").write_text(json.dumps(old))
    with RunContext(run, RunOptions()) as ctx:
        ctx.open()
        ctx.capture_env(["cpu"], ["fp32"], recalibrate=False)
    written = json.loads((run / "env.json").read_text())
    assert written["hostname"] == env.hostname() and written["cpu"]["model"] != "Old CPU"


def test_a_folder_that_cannot_be_written_is_refused_before_the_first_point(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    (run / "results.jsonl").mkdir(parents=True)  # not a file: nothing can be appended to it
    refused = pytest.raises(
        ConfigError, match=r"cannot write into the run folder: .*results\.jsonl"
    )
    with refused, RunContext(run, RunOptions()) as ctx:
        ctx.open()


def test_a_row_that_cannot_be_written_is_kept_and_its_path_named(tmp_path: Path) -> None:
    from gpubench.store.results import ResultStore, RowNotWritten

    store = ResultStore(tmp_path)
    store.path.mkdir()
    row = _rows(1)[0]
    with pytest.raises(RowNotWritten) as e:
        store.append(row)
    assert e.value.filename == str(store.path)
    kept = e.value.keep()
    assert kept is not None and json.loads(kept.read_text().splitlines()[-1]) == row
    kept.unlink()


class _FillingFile(io.FileIO):
    """A file on a disk with room for half of the next write: it takes that half, then says
    there is no space left, as a full disk does."""

    taken = False

    def write(self, data: Any) -> int:
        if self.taken:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.taken = True
        return super().write(bytes(data)[: len(data) // 2])


def test_a_full_disk_mid_sweep_is_one_line_and_loses_no_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins
    import tempfile

    from gpubench.store import phases_record, results

    out = tmp_path / "run"
    full: list[bool] = []  # the disk fills once results.jsonl has its first row

    def disk_filling(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if str(file) == str(out / "results.jsonl") and mode.startswith("a"):
            if full:
                return _FillingFile(file, mode)
            full.append(True)
        return builtins.open(file, mode, *args, **kwargs)

    def phases_written(record: phases_record.PhasesRecord, run_dir: Path) -> Path:
        if full:  # the writes after the row's fail too (phases.json's, when the sweep ends)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_phases(record, run_dir)

    write_phases = phases_record.PhasesRecord.write
    monkeypatch.setattr(results, "open", disk_filling, raising=False)
    monkeypatch.setattr(phases_record.PhasesRecord, "write", phases_written)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the unwritten row is kept
    args = ["--models", "mlp", "--size", "tiny", "--devices", "cpu", "--batch-sizes", "1,2,3"]
    args += ["--precisions", "fp32", "--optimizers", "sgd", "--steps", "1", "--no-profile"]
    args += ["--no-confirm", "--quiet"]
    assert main(["sweep", *args, "--out", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    error = [line for line in err if line.startswith("gpubench: error:")]
    assert len(error) == 1 and "Traceback" not in "\n".join(err), err
    assert str(out / "results.jsonl") in error[0] and "No space left on device" in error[0]
    assert error[0].endswith(f"resume with: python -m gpubench sweep --resume {out}")
    kept = tmp_path / f"gpubench-unwritten-{os.getpid()}.jsonl"
    assert f"kept in {kept}" in error[0]
    # the row written before stands, and no half of the next one is left after it
    assert (out / "results.jsonl").read_bytes().count(b"\n") == 1
    assert [r["batch_size"] for r in read_rows(out)] == [1]
    assert [json.loads(line)["batch_size"] for line in kept.read_text().splitlines()] == [2]
    # once there is room: the kept row appended as the line says, the resume measures the rest
    monkeypatch.undo()
    with open(out / "results.jsonl", "a") as f:
        f.write(kept.read_text())
    assert main(["sweep", "--resume", str(out), "--quiet", "--no-confirm"]) == 0
    assert [r["batch_size"] for r in read_rows(out)] == [1, 2, 3]


def test_a_resume_removes_what_a_full_disk_left_half_written(tmp_path: Path) -> None:
    run = _folder(tmp_path / "run", _line(_rows(1)[0]))
    left = ("env.json.x1", "results.csv.x2", "results.jsonl.x3", "write-check.4242")
    for name in left:
        (run / f".gpubench-{name}.tmp").write_text("{")
    (run / "analysis.tmp").write_text("a user's")  # not gpubench's: not touched
    _resume(run)
    assert [p.name for p in run.glob("*.tmp")] == ["analysis.tmp"]
    assert not list(run.glob(".gpubench-*"))
    assert len(read_rows(run)) == 1


def test_an_os_error_is_one_line_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _folder(tmp_path / "run", _line(_rows(1)[0]))
    afile = tmp_path / "afile"
    afile.write_text("")
    capsys.readouterr()
    assert main(["report", str(run), "--out", str(afile / "x.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(afile) in err, err
    assert "Not a directory" in err or "File exists" in err, err  # mkdir says the latter
    assert main(["merge", str(run), "--out", str(afile)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(afile) in err, err


def test_sigterm_ends_a_sweep_with_one_line_and_the_resume_command(tmp_path: Path) -> None:
    import signal

    from isolation import rows
    from test_resume import SLOW, _start, _wait_for

    suite = tmp_path / "slow.toml"
    suite.write_text(SLOW)
    out, marker = tmp_path / "run", tmp_path / "slow-started"
    env_vars = {"GPUBENCH_TEST_SLOW_MARKER": str(marker), "GPUBENCH_TEST_SLOW_S": "120"}
    args = ["--steps", "1", "--no-profile"]
    proc = _start("sweep", str(suite), "--out", str(out), *args, env=env_vars)
    _wait_for(proc, marker.exists)  # the mlp points are done; slow B=1 is in flight
    os.kill(proc.pid, signal.SIGTERM)  # as a scheduler does: the sweep's process alone
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .endswith(f"resume with: python -m gpubench sweep {suite} --resume {out}")
    )  # the suite file given again: it names code by import path (fault_workloads:slow)
    assert [r["batch_size"] for r in rows(out)] == [1, 2] and (out / "results.csv").is_file()


def test_ctrl_c_while_a_command_imports_is_one_line(tmp_path: Path) -> None:
    import signal

    from test_resume import _start, _wait_for

    run = _folder(tmp_path / "run", b"".join(map(_line, _rows(2))))
    proc = _start("report", str(run), "--out", str(tmp_path / "r.html"))

    def importing_torch() -> bool:  # the command's imports are under way (seconds of them)
        return "libtorch" in Path(f"/proc/{proc.pid}/maps").read_text()

    _wait_for(proc, importing_torch)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "gpubench: stopped (Ctrl-C)", stderr


def test_ctrl_c_while_the_report_draws_its_charts_is_one_line(tmp_path: Path) -> None:
    import signal

    from test_resume import _start, _wait_for

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the charts are drawn in parallel only with two cores or more")
    run = _folder(tmp_path / "run", b"".join(map(_line, _rows(2))))
    proc = _start("report", str(run), "--out", str(tmp_path / "r.html"), new_session=True)

    def drawing() -> bool:  # the chart workers are forked: two children or more
        tasks = Path(f"/proc/{proc.pid}/task")
        kids = [c for t in tasks.iterdir() for c in (t / "children").read_text().split()]
        return len(kids) >= 2

    _wait_for(proc, drawing)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the command and its workers
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip() == (  # one line: what stopped and how to draw it again
        "gpubench: stopped (Ctrl-C) while drawing the report; the results are kept; draw it "
        f"again with: python -m gpubench report {run} --out {tmp_path / 'r.html'}"
    ), stderr


@pytest.mark.slow  # a sweep's process
def test_ctrl_c_before_the_first_point_is_one_line_and_the_resume_command(
    tmp_path: Path,
) -> None:
    import signal

    from test_resume import _start, _wait_for

    out = tmp_path / "run"
    marker = tmp_path / "check-started"
    args = ["--models", "fault_workloads:slow_check", "--size", "tiny", "--devices", "cpu"]
    args += ["--batch-sizes", "1", "--precisions", "fp32", "--optimizers", "sgd", "--steps", "1"]
    env = {"GPUBENCH_TEST_SLOW_MARKER": str(marker)}
    proc = _start("sweep", *args, "--out", str(out), new_session=True, env=env)
    # the model's check step is asleep: the sweep is surely not at its first point (waiting for
    # the folder instead raced the whole 1-point sweep on a loaded CI machine, which finished
    # before the test's poll woke)
    _wait_for(proc, marker.exists)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the sweep and its workers
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    # the model named again: a resume imports no code the folder names (config.user_code)
    resume = f"python -m gpubench sweep --resume {out} --models fault_workloads:slow_check"
    assert last.endswith(f"resume with: {resume}"), stderr
    assert not (out / "results.jsonl").exists() or not read_rows(out)
    # no point was in flight: none is said to be finished first
    assert "stopping before the first point" in stderr and "in flight" not in stderr, stderr


@pytest.mark.parametrize(
    ("factory", "timeout", "said"),
    [
        ("hang_building", "1", "B=1 ended with timeout: no result within 1 s (--point-timeout)"),
        # a limit the death comes well within: at load 8 a worker took over 1 s to reach the
        # build, and a 1 s limit killed it first (a timeout, not the death this case checks)
        ("die_building", "120", "B=1 ended with error: the worker process died"),
    ],
)
def test_max_batch_meets_a_factory_that_hangs_or_dies_in_its_probe(
    capsys: pytest.CaptureFixture[str], factory: str, timeout: str, said: str
) -> None:
    args = ["--model", f"fault_workloads:{factory}", "--size", "tiny", "--device", "cpu"]
    # before, its build in the command's own process hung it for good, or killed it
    assert main(["max-batch", *args, "--point-timeout", timeout, "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["largest_batch"] == 0 and found["stopped"].startswith(said), found
    # in words, nothing was measured: not "not even a batch of one fits" (nothing ran out of
    # memory), and the exit status says no answer
    assert main(["max-batch", *args, "--point-timeout", "1"]) == 1
    printed = capsys.readouterr().out
    assert "no batch size measured: " + said in printed and "not even" not in printed


@pytest.mark.parametrize(
    ("factory", "said"),
    [("hang_building", "no result within 1 s"), ("die_building", "the worker process died")],
)
def test_tune_meets_a_factory_that_hangs_or_dies_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], factory: str, said: str
) -> None:
    # before, tune built the model in its own process: it hung for good, or was killed
    args = ["--model", f"fault_workloads:{factory}", "--size", "tiny", "--device", "cpu"]
    args += ["--budget", "30s", "--point-timeout", "1", "--out", str(tmp_path / "t")]
    assert main(["tune", *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"model 'fault_workloads:{factory}' at tiny: building it failed: " in line
    assert said in line, line


@pytest.mark.parametrize(
    ("model", "options", "named"),
    [
        ("mlp", {"hidden": "abc"}, "mlp.hidden = 'abc'; allowed: a list of whole numbers"),
        ("mlp", {"hidden": 8}, "mlp.hidden = 8; allowed: a list of whole numbers of 1 or more"),
        ("mlp", {"hidden": [0]}, "mlp.hidden = [0]; allowed: a list of whole numbers"),
        ("mlp", {"classes": 0}, "mlp.classes = 0; allowed: a whole number of 1 or more"),
        ("transformer", {"layers": -1}, "transformer.layers = -1; allowed: a whole number"),
        ("builtins:dict", {}, "'builtins:dict' returned dict {}, not a Workload"),
    ],
)
def test_a_bad_model_option_or_factory_is_named_with_what_is_allowed(
    model: str, options: dict[str, Any], named: str
) -> None:
    from gpubench.config.model_options import check_buildable

    with pytest.raises(ConfigError) as e:
        check_buildable((model,), "tiny", {model: options})
    assert named in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("factory", "status", "said", "exit_status"),
    [
        ("hang_building", "timeout", "no result within 1 s (--point-timeout)", 0),
        ("die_building", "error", "the worker process died while measuring", 1),
    ],
)
def test_a_factory_that_hangs_or_dies_while_built_is_a_row_and_the_sweep_goes_on(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    factory: str,
    status: str,
    said: str,
    exit_status: int,
) -> None:
    from isolation import rows

    model = f"fault_workloads:{factory}"
    out = tmp_path / "run"
    args = ["--models", model, "--devices", "cpu", "--batch-sizes", "1,2", "--steps", "1"]
    args += ["--precisions", "fp32", "--optimizers", "sgd", "--point-timeout", "1"]
    args += ["--no-profile", "--no-confirm", "--quiet"]
    assert main(["sweep", "quick", *args, "--out", str(out)]) == exit_status
    assert "Traceback" not in capsys.readouterr().err
    measured = rows(out)
    assert [(r["batch_size"], r["status"]) for r in measured] == [(1, status), (2, status)]
    assert all(said in r["error"] for r in measured), measured
    assert (out / "results.csv").is_file()
