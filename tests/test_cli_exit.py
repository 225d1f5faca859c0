"""A command run as its own process ends without the interpreter's teardown (cli.main.leave):
its output flushed and its atexit handlers run, then os._exit with the command's status;
main([...]) called from Python returns the status as before."""

from __future__ import annotations

import subprocess
import sys

from isolation import ROOT, subprocess_env

# A script that runs the console entry as pip writes it, with an atexit handler and an object
# whose finaliser would print at the interpreter's teardown.
SCRIPT = """import atexit, sys
from gpubench.cli import main

class Torn:
    def __del__(self):
        print("torn down", flush=True)

kept = Torn()
atexit.register(print, "atexit ran")
sys.argv = ["gpubench", *sys.argv[1:]]
sys.exit(main())
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_command_ends_with_its_output_and_atexit_handlers_but_no_teardown() -> None:
    done = _run("list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "quick" in done.stdout  # the command's own output, flushed
    assert lines[-1] == "atexit ran"
    assert "torn down" not in done.stdout  # os._exit: no module teardown, no finalisers


def test_a_configuration_error_keeps_status_2_and_its_message() -> None:
    done = _run("sweep", "--models", "no_such_model", "--devices", "cpu", "--quiet")
    assert done.returncode == 2
    assert done.stderr.startswith("gpubench: error: "), done.stderr
    assert "no_such_model" in done.stderr
    assert done.stdout.splitlines()[-1:] == ["atexit ran"]


def test_main_called_from_python_returns_its_status() -> None:
    from gpubench.cli import main

    assert main(["list"]) == 0
