from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path

import pytest
import torch

from gpubench.config.spec import Budget


def threads_per_worker(workers: str | None, cores: int) -> int | None:
    """The torch threads each of `workers` pytest-xdist workers (its PYTEST_XDIST_WORKER_COUNT;
    None: not under xdist) may use on `cores` cores: their share, at least 1. None: not under
    xdist, where a test may use every core."""
    if not workers:
        return None
    return max(1, cores // int(workers))


def pytest_configure(config: pytest.Config) -> None:
    # issue 51: no sweep of a test runs the noise phase (seconds of training) unless the test
    # asks for it (tests/test_noise_phase.py); the sweeps a test starts as processes inherit it
    os.environ["GPUBENCH_NOISE_BUDGET_S"] = "0"
    # issue 49: the session's machine is calibrated once (its first sweep, into the session's
    # cache: _matmul_peak_cache below), not again by each of its 100-odd sweeps (about 1 s of a
    # core each, twice with the end probes); a test of recalibration asks for it
    # (monkeypatch.delenv(RECALIBRATE_VARIABLE))
    os.environ["GPUBENCH_RECALIBRATE"] = "0"
    # Under xdist, every worker's torch would take a thread per core, and so would each worker
    # process, rank and subprocess its tests start (15 workers on 16 cores: 240 threads for 16
    # cores, and the suite crawled). Each worker takes its share of the cores instead, and its
    # children inherit it through OMP_NUM_THREADS (unless the user set that).
    threads = threads_per_worker(
        os.environ.get("PYTEST_XDIST_WORKER_COUNT"), len(os.sched_getaffinity(0))
    )
    if threads is not None:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Set by CI's second environment (.ci/ecosystem), where torchvision, timm and transformers are
# installed as matching builds: there a test that skips for "could not import" one of them fails.
REQUIRE_ECOSYSTEM = os.environ.get("GPUBENCH_REQUIRE_ECOSYSTEM") == "1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if REQUIRE_ECOSYSTEM and report.skipped and "could not import" in str(report.longrepr):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        reason = str(reason).removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"GPUBENCH_REQUIRE_ECOSYSTEM=1, and this test skipped: {reason}"
    return report


# pytest-xdist names its workers in the environment, and every process a test starts (a
# subprocess, a worker, a pytester run in this process) would inherit them: pytest-benchmark
# then believes it runs under xdist and disables itself, so a test of the benchmark JSON that
# passes serially fails under `-n`. A test's own processes are not xdist's workers.
XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True)
def _no_xdist_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in XDIST_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def finished_sweep(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A real finished sweep folder (FINISHED_SWEEP, run in this process), built once a session
    for every test that reads one: a test that changes a folder works on a copy
    (shutil.copytree), and a test that only reads it may not write into it. Under xdist the
    workers share one (pytest-xdist's documented pattern: built by the first worker that asks,
    under a file lock, in the folder above the workers' own), so it is not built once a worker."""
    import contextlib
    import io

    from isolation import FINISHED_SWEEP

    from gpubench.cli.main import main

    def build(out: Path) -> None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main([*FINISHED_SWEEP, "--out", str(out)]) == 0
        for name in ("results.jsonl", "suite.json", "env.json", "confirm.json"):
            assert (out / name).is_file(), name

    if not hasattr(request.config, "workerinput"):  # not under xdist
        out = tmp_path_factory.mktemp("finished-sweep") / "run"
        build(out)
        return out
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # the session's, above every worker's own
    done = shared / "finished-sweep"
    with FileLock(str(shared / "finished-sweep.lock")):
        if not done.is_dir():
            # built aside and renamed whole: a worker that failed midway leaves no half folder
            building = shared / f"finished-sweep.{os.getpid()}"
            build(building / "run")
            building.rename(done)
    return done / "run"


@pytest.fixture
def quick_budget() -> Budget:
    """A few fixed steps: enough to exercise the harness, fast on 2 cores."""
    return Budget.fixed(steps=3, warmup_steps=1)


# tests/fault_workloads.py (workloads that crash, hang or exhaust memory on purpose) must be
# importable here and in worker processes, which take sys.path from this process.
TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


# The cache folder of the test session a test started this one from, where it did
SESSION_CACHE_ENV = "GPUBENCH_TEST_SESSION_CACHE"


@pytest.fixture(autouse=True, scope="session")
def _matmul_peak_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Calibrated matmul peaks go to a cache of the test session's own, not the user's. A
    session that a test starts (tests/test_ci_gate.py's five runs of the benchmarks) keeps its
    parent session's, no user's either, rather than one of its own where each run calibrated
    its matmul peak afresh (about a second of a core a run)."""
    cache = os.environ.get(SESSION_CACHE_ENV) or str(tmp_path_factory.mktemp("gpubench-cache"))
    os.environ["GPUBENCH_CACHE_DIR"] = os.environ[SESSION_CACHE_ENV] = cache
