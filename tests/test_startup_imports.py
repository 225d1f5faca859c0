"""The command line answers at once: `import gpubench`, the parser, `--help` and a refused flag
import no torch, scipy, pandas or matplotlib (seconds of one core between them), and `explain`
on a finished folder none of torch and matplotlib. Each check runs in a fresh interpreter, since
this one has imported them all long ago."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "scipy", "pandas", "matplotlib")
# A published run folder with rows, a verdict and its confirmation (docs/results.md)
FOLDER = ROOT / "results" / "20261128-cpu-default-minute" / "run-1"

# Runs `main(argv)` (or only the imports where argv is null) and prints which of HEAVY it loaded.
SCRIPT = """
import contextlib, io, json, sys
import gpubench
import gpubench.cli.parser
argv = json.loads(sys.argv[1])
status = None
if argv is not None:
    from gpubench.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as e:
            status = e.code
    if not out.getvalue() and not err.getvalue():
        status = "silent"
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[2])))
print(json.dumps([status, heavy]))
"""


def _loaded(argv: list[str] | None, cwd: Path) -> tuple[object, list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    status, heavy = json.loads(done.stdout.splitlines()[-1])
    return status, heavy


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (None, None),
        (["--help"], 0),
        (["sweep", "--help"], 0),
        (["tune", "--help"], 0),
        (["max-batch", "--help"], 0),
        (["sweep", "--batch-sizes", "0"], 2),
        (["sweep", "--models", "resnet"], 2),
        (["sweep", "--precisions", "fp8"], 2),
        (["compare", "--threshold"], 2),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_the_package_the_parser_and_a_refused_flag_import_nothing_heavy(
    argv: list[str] | None, status: int | None, tmp_path: Path
) -> None:
    ran, heavy = _loaded(argv, tmp_path)
    assert ran == status
    assert heavy == [], f"{argv}: imported {heavy}"


@pytest.mark.skipif(not FOLDER.is_dir(), reason="the published folder is not in this checkout")
def test_explain_reads_a_folder_without_torch_or_matplotlib(tmp_path: Path) -> None:
    ran, heavy = _loaded(["explain", str(FOLDER)], tmp_path)
    assert ran == 0
    assert "torch" not in heavy and "matplotlib" not in heavy, heavy
    assert "pandas" in heavy  # what it does use, so that the check above looked at a real run


def test_pytest_with_the_plugin_loaded_imports_no_torch_until_a_test_uses_the_fixture(
    tmp_path: Path,
) -> None:
    """The plugin loads in every pytest run of an environment where gpubench is installed: a
    plain test must not pay torch's import for it (seconds a process); the fixture imports it."""
    (tmp_path / "conftest.py").write_text(
        "import json, sys\n"
        "def pytest_sessionfinish(session):\n"
        "    loaded = session.config.pluginmanager.has_plugin('gpubench')\n"
        f"    heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))\n"
        "    print('\\nFINISH=' + json.dumps([loaded, heavy]))\n",
        encoding="utf-8",
    )
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    argv = ["-m", "pytest", "-p", "gpubench", "-s", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, *argv, "test_plain.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("FINISH="))
    assert json.loads(line.removeprefix("FINISH=")) == [True, []]
