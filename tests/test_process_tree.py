"""gpubench's own processes are never "other load": the CPU time of its process tree (children,
grandchildren, children that ended inside the window) is its own, a process outside the tree
(a daemon of its own session) is other load. Each process burns a fixed amount of CPU time
inside the window, so the assertions hold however busy the machine is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from own_load import burn, foreign_burner, wait_for

from gpubench.probes import load, process_tree

BURN_S = 0.4  # CPU seconds each burner uses inside the window
# /proc's clock ticks (10 ms) and a Python start-up (tens of ms) on either side
MARGIN_S = 0.1


def _burn(cpu_s: float) -> str:
    """Python that burns `cpu_s` CPU seconds."""
    return (
        f"import time\nend = time.process_time() + {cpu_s}\nwhile time.process_time() < end: pass\n"
    )


def _own_s(others: load.OtherLoad) -> float:
    assert others.own_cores is not None and others.wall_s is not None
    return others.own_cores * others.wall_s


def _others_s(others: load.OtherLoad) -> float:
    assert others.cores is not None and others.wall_s is not None
    return others.cores * others.wall_s


def test_a_child_that_ends_inside_the_window_is_own_load() -> None:
    """Its time moves into this process's children's time when it is reaped."""
    mine = os.times()
    with load.OtherLoad() as others:
        subprocess.run([sys.executable, "-c", _burn(BURN_S)], check=True)
    after = os.times()
    assert _own_s(others) >= BURN_S - MARGIN_S
    # this process itself only waited: the burn is the child's, counted as the tree's
    assert (after.user + after.system) - (mine.user + mine.system) < BURN_S / 2


def test_a_grandchild_still_running_at_the_windows_end_is_own_load(tmp_path: Path) -> None:
    done, pid_file = tmp_path / "done", tmp_path / "pid"
    grandchild = _burn(BURN_S) + f"open({str(done)!r}, 'w').close()\ntime.sleep(600)\n"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
            f"open({str(pid_file)!r}, 'w').write(str(p.pid))\ntime.sleep(600)\n",
        ]
    )
    try:
        with load.OtherLoad() as others:
            wait_for(done)
            grandchild_pid = int(pid_file.read_text())
            assert grandchild_pid in process_tree.tree()
    finally:
        for pid in (int(pid_file.read_text()) if pid_file.exists() else None, child.pid):
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
        child.wait()
    assert _own_s(others) >= BURN_S - MARGIN_S


def test_a_process_outside_the_tree_is_other_load(tmp_path: Path) -> None:
    done = tmp_path / "done"
    with load.OtherLoad() as others, foreign_burner(BURN_S, done) as pid:
        wait_for(done)
        assert pid not in process_tree.tree()
    # the machine's busy time holds the daemon's burn, the tree's only this process's
    # waiting and the short-lived parent that forked the daemon
    assert _others_s(others) >= BURN_S - MARGIN_S
    assert _own_s(others) < BURN_S / 2


def test_the_root_is_named_to_children_and_a_stale_root_is_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(process_tree.ROOT_ENV, raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert process_tree.root_pid() == os.getpid()
    process_tree.claim_root()
    assert os.environ[process_tree.ROOT_ENV] == str(os.getpid())
    # a child sees the root it was told of (its parent), and names it to its own children
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gpubench.probes import process_tree as t; print(t.root_pid())",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert int(out.stdout) == os.getpid()
    # a pid that is not this process or an ancestor (a finished child's) is not a root
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    monkeypatch.setenv(process_tree.ROOT_ENV, ended.stdout.strip())
    assert process_tree.root_pid() == os.getpid()


def test_a_torchrun_rank_takes_its_agent_as_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent started every rank of the node: its tree holds them all."""
    monkeypatch.delenv(process_tree.ROOT_ENV, raising=False)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert process_tree.root_pid() == os.getppid()


def test_own_cpu_time_counts_this_process_threads() -> None:
    before = process_tree.tree_cpu_s()
    burn(0.2)
    assert process_tree.tree_cpu_s() - before >= 0.2 - MARGIN_S / 2


def test_a_kernel_without_children_lists_gives_the_same_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        listed = process_tree.tree()
        monkeypatch.setattr(process_tree, "_children", lambda pid: None)  # CONFIG_PROC_CHILDREN off
        scanned = process_tree.tree()
    finally:
        child.kill()
        child.wait()
    assert child.pid in listed and set(scanned) == set(listed)
