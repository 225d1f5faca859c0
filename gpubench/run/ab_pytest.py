"""The A/B gate over pytest-benchmark tests (`gpubench compare --ab BASE_REF --pytest PATH...`):
the selected benchmark tests (a user's own, with the `gpubench` fixture or plain
pytest-benchmark ones, or gpubench's tests/benchmarks) run from BASE_REF's export and from the
working tree alternately, round by round, each in a fresh pytest process of its own tree, and
each benchmark judged by the 95% interval of its head/base ratio (science.regression, as run.ab
judges points) against a margin.

Each round runs `pytest SELECTION --benchmark-enable --benchmark-only --benchmark-json=FILE` once
per version, one after the other (the base first in even rounds, the head in odd ones), in that
version's tree with the tree first on PYTHONPATH: the base's run collects the base's tests and
imports the base's code (and the base's gpubench where the checkout is gpubench's). A
benchmark's figure in a round is store.benchjson's: the gpubench fixture's samples/s (batch over
the median step time), or for a plain benchmark its calls per second (1 / the median time of a
call). Whole pytest processes alternate, not windows within them as run.ab's points do, so the
two figures of a round are seconds to minutes apart, and a busy machine's drift in between
widens the interval.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.probes import load, process_tree
from gpubench.run.ab import ABError, check_own_code, judged, log_tail, versions
from gpubench.run.base_tree import Trees
from gpubench.store import benchjson
from gpubench.store.ab_record import BENCHMARK, ABRecord
from gpubench.store.results import ResultsError

# A pytest process that writes where its gpubench is (found, not imported: a test run may turn
# the plugin off) and then runs pytest, as `python -m pytest` does (the current folder first on
# sys.path).
_RUNNER = """import importlib.util, sys
spec = importlib.util.find_spec("gpubench")
with open(sys.argv[1], "w", encoding="utf-8") as f:
    f.write(spec.origin if spec is not None and spec.origin else "")
import pytest
sys.exit(pytest.main(sys.argv[2:]))
"""
_NOTHING = (4, 5)  # pytest's exit status for a path that is not there, and for no test collected


def needs() -> None:
    """ConfigError (one line) where pytest or pytest-benchmark is not installed here."""
    import importlib.util

    for module, package in (("pytest", "pytest"), ("pytest_benchmark", "pytest-benchmark")):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"compare --ab --pytest needs {package}, which is not installed; allowed: "
                f"pip install {package}, or compare --ab without --pytest (gpubench's points)"
            )


def selection(given: list[str], trees: Trees, cwd: Path | None = None) -> list[str]:
    """`given` paths or node IDs (relative to `cwd`, default the current folder) as paths
    relative to the checkout's top, so that each version's tree runs its own copy. ConfigError
    naming the value where its file or folder is not in the working tree or lies outside the
    checkout."""
    here = Path.cwd() if cwd is None else cwd
    top = trees.head.resolve()
    out = []
    for item in given:
        path, sep, rest = item.partition("::")
        where = (here / path).resolve()
        if not where.is_relative_to(top):
            raise ConfigError(
                f"--pytest {item!r} lies outside the checkout {top}; allowed: tests in it"
            )
        if not where.exists():
            raise ConfigError(
                f"--pytest {item!r}: no such file or folder in the working tree; allowed: a "
                "test file or folder, or a node ID (path::test)"
            )
        out.append(where.relative_to(top).as_posix() + sep + rest)
    return out


class _PytestVersion:
    """One version's pytest runs: `tree`, `what` (how errors name it), its log (their output)."""

    def __init__(self, name: str, tree: Path, what: str, folder: Path) -> None:
        self.name = name
        self.tree = tree
        self.what = what
        self.folder = folder
        self.log = folder / f"{name}.log"
        self.gpubench = ""

    def run(self, tests: list[str], r: int) -> tuple[int, Path]:
        """Round `r`'s pytest process of `tests` in this tree: its exit status and its
        --benchmark-json file. Ends the process (and its own children) however this ends."""
        json_file = self.folder / f"{self.name}-{r}.json"
        where = self.folder / f"{self.name}-{r}.gpubench"
        env = dict(os.environ)
        others = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        others = [p for p in others if Path(p).resolve() != self.tree.resolve()]
        env["PYTHONPATH"] = os.pathsep.join([str(self.tree), *others])
        argv = [*tests, "--benchmark-enable", "--benchmark-only", f"--benchmark-json={json_file}"]
        argv += ["-p", "no:cacheprovider", "-q"]
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"--- round {r + 1}: pytest {' '.join(argv)}\n")
            log.flush()
            proc = subprocess.Popen(
                [sys.executable, "-c", _RUNNER, str(where), *argv],
                cwd=self.tree,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C is the gate's; it ends the run's group
            )
            try:
                code = proc.wait()
            finally:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        if where.is_file():
            self.gpubench = where.read_text(encoding="utf-8")
        return code, json_file

    def figures(self, tests: list[str], r: int) -> dict[str, tuple[str, float]]:
        """Round `r`'s figure of each benchmark that ran: {full name: (unit, per second)};
        {} where pytest found no test or no such path. ABError where pytest failed otherwise
        (a test failed, an error), with the end of its output."""
        code, json_file = self.run(tests, r)
        if code in _NOTHING:
            return {}
        if code != 0 or not json_file.is_file():
            raise ABError(
                f"{self.what}'s pytest run of round {r + 1} failed (exit status {code}; the end "
                "of its output above)",
                log_tail(self.log),
            )
        if json_file.stat().st_size == 0:  # pytest-benchmark's file where no benchmark ran
            return {}
        try:
            rows = benchjson.rows_from_benchmark_json(json_file)
        except ResultsError as e:  # pytest-benchmark's own file: not the user's doing
            raise ABError(f"{self.what}'s pytest run of round {r + 1}: {e}") from None
        got: dict[str, tuple[str, float]] = {}
        for row in rows:
            name = str(row["benchmark"])
            if row["samples_per_s"] is not None:
                got[name] = ("samples/s", float(row["samples_per_s"]))
            elif float(row["step_time_s"]) > 0:  # a plain benchmark: a call is its sample
                got[name] = ("calls/s", 1 / float(row["step_time_s"]))
            else:  # faster than its timer can tell: no ratio to take
                raise ABError(
                    f"{self.what}'s benchmark {name} read a median time of 0 s in round {r + 1}; "
                    "allowed: a benchmark whose call takes longer than its timer's resolution"
                )
        return got


def _first_round(
    order: tuple[_PytestVersion, _PytestVersion],
    tests: list[str],
    given: list[str],
) -> tuple[dict[str, dict[str, tuple[str, float]]], list[str], list[str]]:
    """Round 0: each version's figures, the benchmarks both ran (sorted), and those only one
    did. ConfigError where the head collected no benchmark (a bad selection)."""
    got = {v.name: v.figures(tests, 0) for v in order}
    if not got["head"]:
        raise ConfigError(
            f"--pytest {' '.join(given)}: no benchmark test collected in the working tree "
            "(pytest found no test there, or none that uses the benchmark or gpubench "
            "fixture); allowed: test files, folders or node IDs of benchmark tests"
        )
    common = sorted(set(got["head"]) & set(got["base"]))
    unmatched = sorted(set(got["head"]) ^ set(got["base"]))
    for name in common:
        units = {got[v][name][0] for v in ("base", "head")}
        if len(units) > 1:
            raise ABError(f"benchmark {name}: the versions measure it in {' and '.join(units)}")
    return got, common, unmatched


def measure(
    trees: Trees,
    tests: list[str],
    margin: float,
    rounds: int,
    log_dir: Path | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> ABRecord:
    """Run the benchmark tests `tests` (paths or node IDs relative to the checkout's top) from
    both trees, `rounds` rounds alternating the version that goes first, and judge each
    benchmark both versions ran by its head/base ratio at `margin` (science.regression).
    `log_dir`: where each version's pytest output and JSON files go (default: beside the base
    tree); `on_round(done, of)` after each round. ConfigError where the head collects no
    benchmark; ABError where a version's pytest fails, a benchmark stops running in a later
    round, or the base imported the head's gpubench."""
    started = time.perf_counter()
    process_tree.claim_root()  # the pytest processes are gpubench's own: no "other load"
    folder = log_dir if log_dir is not None else trees.base.parent
    short = trees.base_commit[:7]
    base = _PytestVersion("base", trees.base, f"the base ({trees.base_ref}, {short})", folder)
    head = _PytestVersion("head", trees.head, "the head (the working tree)", folder)
    figures: dict[str, list[list[float]]] = {"base": [], "head": []}  # [round][benchmark]
    units: dict[str, str] = {}
    common: list[str] = []
    unmatched: list[str] = []
    loads: list[float] = []
    for r in range(rounds):
        order = (base, head) if r % 2 == 0 else (head, base)
        with load.OtherLoad() as others:
            if r == 0:
                got, common, unmatched = _first_round(order, tests, tests)
                units = {name: got["head"][name][0] for name in common}
                check_own_code(base.what, base.gpubench, head.gpubench, trees)
                if not common:  # nothing to compare: the record says so, the gate fails
                    break
            else:
                got = {v.name: v.figures(tests, r) for v in order}
        if others.cores is not None:
            loads.append(others.cores)
        for v in order:
            missing = [name for name in common if name not in got[v.name]]
            if missing:
                raise ABError(f"{v.what} did not run benchmark {missing[0]} in round {r + 1}")
            figures[v.name].append([got[v.name][name][1] for name in common])
        if on_round is not None:
            on_round(r + 1, rounds)
    identities: list[dict[str, Any]] = [{BENCHMARK: n, "unit": units[n]} for n in common]
    needed = _threads()
    busy = [load.contended(c, needed, load.cores()) for c in loads]
    return ABRecord(
        **versions(trees),
        margin=margin,
        rounds=len(figures["head"]) if common else 1,
        window_s=None,
        windows=1,
        seconds=time.perf_counter() - started,
        base_gpubench=base.gpubench,
        head_gpubench=head.gpubench,
        points=judged(identities, figures["base"], figures["head"], margin) if common else [],
        other_load_cores=max(loads, default=None),
        busy=any(b for b in busy if b is not None) if loads else None,
        pytest=list(tests),
        unmatched=unmatched,
    )


def _threads() -> int:
    """The cores a benchmark test keeps busy: OMP_NUM_THREADS where it sets them, else every
    core (torch's default on the CPU)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else load.cores()
