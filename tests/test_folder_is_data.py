"""A results folder is data (issue 50): what its suite.json, rows or tune.json name by import path
is never imported on a resume (a shared folder naming `os:system` with a model option `command`
would run it), and no command imports a module from the folder it is run in (a `rich.py` there is
not the library). The user's own code runs only where they name it in this command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.cli.main import main

TINY = [
    "quick", "--models", "mlp", "--size", "tiny", "--devices", "cpu", "--batch-sizes", "4,8",
    "--precisions", "fp32", "--optimizers", "sgd", "--steps", "1", "--quiet",
]  # fmt: skip
TUNE = Path(__file__).parent / "data" / "tune" / "cnn-stopped"


@pytest.fixture
def finished(finished_sweep: Path) -> Path:
    """A tiny sweep run to its end (two batch sizes of one series, confirmed): the session's
    (conftest.finished_sweep), which every test here copies before changing anything."""
    return finished_sweep


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "copy"))


def _system(marker: Path) -> dict[str, str]:
    return {"command": f"touch {marker}"}


def test_a_suite_json_naming_code_by_import_path_runs_nothing_on_resume(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, marker = _copy(finished, tmp_path), tmp_path / "PWNED"
    suite = json.loads((run / "suite.json").read_text())
    suite["models"] = ["os:system"]
    suite["model_options"] = {"os:system": _system(marker)}
    (run / "suite.json").write_text(json.dumps(suite))
    # the same where env.json names another machine: nothing is built before the checks
    env = json.loads((run / "env.json").read_text())
    env["hostname"] = "elsewhere"
    (run / "env.json").write_text(json.dumps(env))
    rows = (run / "results.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["sweep", "--resume", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "'os:system'" in err and "--models os:system" in err and "suite.json" in err
    assert not marker.exists()
    assert (run / "results.jsonl").read_bytes() == rows


def test_rows_naming_code_are_not_built_by_the_resumes_confirmation(
    finished: Path, tmp_path: Path
) -> None:
    run, marker = _copy(finished, tmp_path), tmp_path / "PWNED"
    (run / "confirm.json").unlink()  # the resume confirms again
    row = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    with (run / "results.jsonl").open("a") as f:
        for batch in (4, 8):
            crafted = {**row, "model": "os:system", "batch_size": batch}
            crafted["model_options"] = json.dumps(_system(marker))
            crafted["samples_per_s"] = 1e9 * batch
            f.write(json.dumps(crafted) + "\n")
    with pytest.warns(UserWarning, match=r"2 rows of results.jsonl name .*\(os:system\)"):
        assert main(["sweep", "--resume", str(run), "--quiet"]) == 0  # one line says so
    assert not marker.exists()
    confirmed = json.loads((run / "confirm.json").read_text())
    text = json.dumps(confirmed)
    assert "os:system" not in text and '"mlp"' in text  # the suite's own series confirmed


def test_a_tune_json_naming_code_runs_nothing_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, marker = Path(shutil.copytree(TUNE, tmp_path / "tune")), tmp_path / "PWNED"
    record = json.loads((run / "tune.json").read_text())
    record["request"]["model"] = "os:system"
    record["request"]["model_options"] = _system(marker)
    (run / "tune.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert main(["tune", "--resume", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "'os:system'" in err and "--model os:system" in err and "tune.json" in err
    assert not marker.exists()
    # a model other than the folder's own is refused too: --model does not change the tune
    assert main(["tune", "--resume", str(run), "--model", "mlp", "--quiet"]) == 2
    assert "cannot change it" in capsys.readouterr().err
    assert not marker.exists()


def test_a_sweep_resume_refuses_a_tune_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(TUNE, tmp_path / "tune"))
    before = (run / "results.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["sweep", "--resume", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "holds a tune" in err and f"tune --resume {run}" in err
    assert (run / "results.jsonl").read_bytes() == before


def _library_shadow(folder: Path, marker: Path) -> None:
    """A `rich.py` (a library the terminal output imports) that leaves `marker` if imported."""
    (folder / "rich.py").write_text(f"open({str(marker)!r}, 'w').close()\n")


def _env() -> dict[str, str]:
    """The environment with gpubench importable from this checkout, wherever a test runs."""
    here = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.mark.parametrize("entry", ["module", "script"])
def test_no_command_imports_a_module_from_the_folder_it_runs_in(
    finished: Path, tmp_path: Path, entry: str
) -> None:
    marker = tmp_path / "IMPORTED"
    _library_shadow(tmp_path, marker)
    command = [sys.executable, "-m", "gpubench"]
    if entry == "script":
        script = shutil.which("gpubench")
        if script is None:
            pytest.skip("the gpubench console script is not installed")
        command = [script]
    done = subprocess.run(
        [*command, "explain", str(finished)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists()


def _user_module(folder: Path) -> None:
    (folder / "mine.py").write_text("def build():\n    return 1\n")


@pytest.mark.parametrize("safe", [False, True])
def test_the_current_folder_finds_only_an_import_path_the_user_typed(
    tmp_path: Path, safe: bool
) -> None:
    _user_module(tmp_path)
    check = (
        "import sys; from gpubench.config import user_code as u; "
        "u.without_current_folder(); u.find_typed(['mlp']); "
        "import importlib.util as i; print(i.find_spec('mine') is not None, end=' '); "
        "u.find_typed(['mine:build']); print(i.find_spec('mine') is not None, end=' '); "
        "print(sys.path.index(__import__('os').getcwd()) == len(sys.path) - 1 "
        "if __import__('os').getcwd() in sys.path else None)"
    )
    flags = ["-P"] if safe else []
    done = subprocess.run(
        [sys.executable, *flags, "-c", check],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # named by a reference name: not findable; typed as an import path: found, from the
    # folder placed after the installed packages; never under python -P
    assert done.stdout.split() == (
        ["False", "False", "None"] if safe else ["False", "True", "True"]
    )


def test_a_refused_sweep_touches_no_file_of_the_users(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy(finished, tmp_path)
    (run / "analysis.tmp").write_text("a user's notes")
    assert main(["sweep", *TINY, "--out", str(run)]) == 2
    assert "already holds results" in capsys.readouterr().err
    assert (run / "analysis.tmp").read_text() == "a user's notes"


def test_a_run_file_that_is_a_symlink_is_replaced_or_refused_never_written_through(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpubench.store.results import ResultStore, append_row

    run, outside = _copy(finished, tmp_path), tmp_path / "outside.txt"
    outside.write_text("not gpubench's")
    # a whole file replaced: the link is replaced by the file, its target untouched
    (run / "suite.json").rename(tmp_path / "suite.json")
    (run / "suite.json").symlink_to(outside)
    ResultStore(run).write_json("suite.json", {"name": "x"})
    assert not (run / "suite.json").is_symlink() and outside.read_text() == "not gpubench's"
    # the rows are appended: a link there is refused, by the resume's check and by the append
    rows = run / "results.jsonl"
    rows.rename(tmp_path / "rows.jsonl")
    rows.symlink_to(outside)
    with pytest.raises(OSError):
        append_row(rows, {"model": "mlp"})
    (run / "suite.json").unlink()
    (tmp_path / "suite.json").rename(run / "suite.json")
    capsys.readouterr()
    assert main(["sweep", "--resume", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is a symbolic link" in err and err.count("\n") == 1
    assert outside.read_text() == "not gpubench's"


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--seeds", "18446744073709551616"], "seed"),
        (["--max-memory", "99999999999T"], "memory size"),
        (["--max-memory", "9" * 400], "memory size"),
        (["--max-time", "9" * 400], "number of seconds"),
        (["--steps", "9" * 400], "number"),
    ],
)
def test_numbers_out_of_range_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    out = tmp_path / "run"
    assert main(["sweep", *TINY, *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"invalid {named}" in err and len(err) < 400, err
    assert not out.exists()


def test_a_tune_budget_out_of_range_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["tune", "--model", "mlp", "--budget", "9" * 400, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "invalid --budget" in err and len(err) < 400, err
    assert not out.exists()


def test_a_tune_that_measured_nothing_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    model = "fault_workloads:raises_when_measured"  # its checks train, every point fails
    flags = ["--batch-sizes", "4", "--precisions", "fp32", "--threads", "1", "--no-confirm"]
    flags += ["--compile", "eager"]  # a compiled trial compiled for 11-13 s, then failed alike
    assert (
        main(["tune", "--model", model, *flags, "--budget", "60s", "--out", str(out), "--quiet"])
        == 1
    )
    err = capsys.readouterr().err
    assert "the tune measured no configuration" in err and str(out / "results.jsonl") in err


def test_a_write_refused_by_permission_mid_sweep_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins
    import errno
    import tempfile

    from gpubench.store import results

    out = tmp_path / "run"
    written: list[bool] = []  # the folder turns read-only once results.jsonl has its first row

    def refusing(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if str(file) == str(out / "results.jsonl") and mode.startswith("a"):
            if written:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
            written.append(True)
        return builtins.open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(results, "open", refusing, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the unwritten row is kept
    args = ["--models", "mlp", "--size", "tiny", "--devices", "cpu", "--batch-sizes", "1,2"]
    args += ["--precisions", "fp32", "--optimizers", "sgd", "--steps", "1", "--no-profile"]
    assert main(["sweep", *args, "--no-confirm", "--quiet", "--out", str(out)]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(error) == 1 and "Permission denied" in error[0], error
    assert "once the folder is writable again, resume with" in error[0]
    assert "room" not in error[0]


def test_the_report_replaces_links_planted_at_its_files(finished: Path, tmp_path: Path) -> None:
    from gpubench.report import build_report

    run, outside = _copy(finished, tmp_path), tmp_path / "outside.txt"
    outside.write_text("not gpubench's")
    for name in ("report.html", "plots/throughput.png"):
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(outside)
    build_report([run])
    assert outside.read_text() == "not gpubench's"
    assert not (run / "report.html").is_symlink() and "<html" in (run / "report.html").read_text()
    assert not (run / "plots" / "throughput.png").is_symlink()
