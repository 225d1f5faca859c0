"""`gpubench compare --ab BASE_REF --pytest PATH` (issue 52): a repository's own pytest-benchmark
tests run from the base commit's export and from the working tree alternately, in a fresh pytest
process per round and version, each benchmark judged by its head/base ratio. On a git repository
made here: an unchanged head passes (A/A), a head whose benchmarked work is made 3x heavier fails
naming the benchmark (so each version ran its own tree's test code), and a bad input is one line,
exit 2.

The benchmark is a plain pytest-benchmark test whose work is a small deterministic loop, and its
pytest processes load pytest-benchmark alone (PYTEST_DISABLE_PLUGIN_AUTOLOAD, and the plugin
named in the repository's pytest.ini): the gpubench fixture, or merely the gpubench plugin, would
import torch in each of a gate's 12 pytest processes (about 7 s each on the busy 2-core CPU);
this way one takes about 1 s. Its figure is then calls/s; the fixture's samples/s is read by the
same code (store.benchjson's row).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from git_repo import git as _git

from gpubench.store import ab_record

WORK = "def work() -> int:\n    return sum(i * i for i in range({n}))\n"
TEST = """from work import work


def test_work(benchmark):
    benchmark.pedantic(work, rounds=15, iterations=1)
"""
# pytest-benchmark's machine and commit info (py-cpuinfo, git) would take seconds per process
CONFTEST = """def pytest_benchmark_generate_machine_info(config):
    return {}


def pytest_benchmark_generate_commit_info(config):
    return {}
"""
NAME = "tests/test_speed.py::test_work"
ROUNDS = ["--rounds", "6"]  # the fewest with a 95% interval


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository (no gpubench in it) whose one commit holds a benchmark test of a loop,
    and a plain test that is no benchmark."""
    root = tmp_path_factory.mktemp("abpytest") / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "work.py").write_text(WORK.format(n=20_000))
    (root / "tests" / "test_speed.py").write_text(TEST)
    (root / "tests" / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    (root / "conftest.py").write_text(CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p pytest_benchmark.plugin\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "base")
    return root


def _gate(repo: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m gpubench compare ARGS` run in `cwd` (default: `repo`)."""
    return subprocess.run(
        [sys.executable, "-m", "gpubench", "compare", *args],
        cwd=cwd or repo,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_an_unchanged_head_passes(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "aa"
    # from a subfolder: the selection is taken relative to it, and run in each version's tree
    done = _gate(
        repo,
        "--ab",
        "HEAD",
        "--pytest",
        "test_speed.py",
        *ROUNDS,
        "--out",
        str(out),
        cwd=repo / "tests",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED: no benchmark slower" in done.stdout, done.stdout
    assert f"{NAME}  " in done.stdout and "6 rounds of each version in" in done.stdout
    record = ab_record.read(out)
    assert record is not None and record.exit_code() == 0 and not record.failed
    assert record.pytest == ["tests/test_speed.py"] and record.unmatched == []
    assert record.window_s is None and record.windows == 1
    (point,) = record.points
    assert point.point == {"benchmark": NAME, "unit": "calls/s"}
    assert len(point.base_samples_per_s) == len(point.head_samples_per_s) == 6
    assert point.reading != "slower"


def test_a_head_three_times_heavier_fails_naming_the_benchmark(repo: Path, tmp_path: Path) -> None:
    (repo / "work.py").write_text(WORK.format(n=60_000))
    try:
        out = tmp_path / "ab"
        done = _gate(repo, "--ab", "HEAD", "--pytest", NAME, *ROUNDS, "--out", str(out))
    finally:
        _git(repo, "checkout", "--", "work.py")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "1 benchmark slower" in failed[0] and NAME in failed[0]
    record = ab_record.read(out)
    assert record is not None and record.head_changed
    (point,) = record.points
    assert point.reading == "slower" and point.ratio < 0.6


def test_a_benchmark_that_fails_in_a_version_stops_the_gate_with_exit_1(
    repo: Path, tmp_path: Path
) -> None:
    test = repo / "tests" / "test_speed.py"
    test.write_text(TEST + "    raise AssertionError('broken in the head')\n")
    try:
        done = _gate(repo, "--ab", "HEAD", "--pytest", NAME, *ROUNDS, "--out", str(tmp_path))
    finally:
        _git(repo, "checkout", "--", "tests/test_speed.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "broken in the head" in done.stderr  # the end of its pytest output
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpubench: error: the head (the working tree)'s pytest run of round 1")
    assert not (tmp_path / ab_record.FILE).exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--pytest", "tests/test_plain.py"], "no benchmark test collected"),
        (["--pytest", "tests/no_such.py"], "'tests/no_such.py': no such file"),
        (["--pytest", "/"], "lies outside the checkout"),
        (["--pytest", "tests", "--models", "mlp"], "--models chooses points"),
    ],
)
def test_a_bad_selection_is_one_line_and_exit_2(
    repo: Path, tmp_path: Path, args: list[str], named: str
) -> None:
    out = tmp_path / "out"
    done = _gate(repo, "--ab", "HEAD", *args, *ROUNDS, "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpubench: error:") and named in last, done.stderr
    assert [x for x in done.stderr.splitlines() if x.startswith("gpubench")] == [last]
    assert not out.exists()


def test_without_pytest_benchmark_it_is_one_line_and_exit_2(repo: Path) -> None:
    # pytest-benchmark made unimportable in the gate's process (find_spec then finds nothing)
    code = (
        "import sys, runpy; sys.modules['pytest_benchmark'] = None; "
        "sys.argv = ['gpubench', 'compare', '--ab', 'HEAD', '--pytest', 'tests']; "
        "runpy.run_module('gpubench', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "needs pytest-benchmark, which is not installed" in line
