"""`gpubench` / `python -m gpubench`: parse the command line and hand it to its command. A
ConfigError anywhere before measuring is one line on stderr and exit status 2 (a model that
failed its check step before a sweep: that line, then the last frames of its traceback).

Light to import: the parser imports no torch, scipy, pandas or matplotlib, so `--help` and a
mistyped flag answer at once. A command that runs workers starts their fork server
(run.forkserver) once its flags have parsed and before the command's own imports (torch,
pandas, scipy: seconds of one core), so that both import side by side. A command run as its
own process ends without the interpreter's teardown (leave)."""

from __future__ import annotations

import argparse
import atexit
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from gpubench.config.errors import ConfigError
from gpubench.probes import process_tree

# The commands that measure in worker processes (run.worker): their fork server starts first.
_WORKER_COMMANDS = ("sweep", "max-batch", "tune")
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    with warnings.catch_warnings():  # restores Python's warning display on the way out
        warnings.formatwarning = _format_warning
        try:
            from gpubench.cli import parser

            args = parser.build_parser().parse_args(negative_values_joined(given))
            # a torchrun rank measures in its own process: its fork server (seconds of imports
            # a rank) starts only if something asks it for a worker
            if args.command in _WORKER_COMMANDS and not process_tree.under_torchrun():
                if _submits(args):
                    # no worker here, but a local launch's jobs (its descendants) are still
                    # gpubench's own to their busy checks, as the server's claim made them
                    process_tree.claim_root()
                else:
                    from gpubench.run import forkserver

                    forkserver.start()
            # a command of its own process (not main([...]) from Python): a wall-clock budget
            # counts from the process's start (tune)
            args.own_process = argv is None
            status = _dispatch(args)
        except ConfigError as e:
            print(f"gpubench: error: {_one_line(str(e))}", file=sys.stderr)
            # a model that failed its check (run.preflight.ModelCheckFailed): where, under it
            for line in getattr(e, "frames", ()):
                print(line, file=sys.stderr)
            status = 2
        except OSError as e:
            # a user's folder or file (unwritable, not a folder, a full disk): one line naming
            # it, as for any other input of theirs; a bug of gpubench's own keeps its traceback
            from gpubench.cli.commands import os_error_line

            print(f"gpubench: error: {_one_line(os_error_line(e))}", file=sys.stderr)
            status = 2
        except KeyboardInterrupt:
            # Ctrl-C outside a sweep's points (start-up, imports, a report): nothing measured
            # is lost (a sweep's rows are on disk as each ends)
            print("\ngpubench: stopped (Ctrl-C)", file=sys.stderr)
            status = 130
    return leave(status) if argv is None else status


def _submits(args: argparse.Namespace) -> bool:
    """Whether `args` is a sweep that a launcher's jobs measure (--launcher, or a launch's
    resume): this process only submits and collects, so no worker of its own (issue 53). A
    suite whose [launcher] table names the launcher is told apart later (cli.launch_args):
    a fork server started for it is only unused."""
    from gpubench.cli import launch_command

    if args.command != "sweep":
        return False
    return args.launcher is not None or launch_command.is_launch(args.resume)


# Flags whose value a user may give negative by mistake: argparse takes "-5G" for an option and
# says only "expected one argument"; joined as --max-memory=-5G, the value's check names it.
_NUMBER_FLAGS = ("--max-memory", "--point-timeout", "--max-time", "--steps", "--batch-sizes")
_NUMBER_FLAGS += ("--cpu-watts",)
_NEGATIVE = re.compile(r"-[\d.]")


def negative_values_joined(args: Sequence[str]) -> list[str]:
    """`args` with each number flag of _NUMBER_FLAGS that is followed by a negative-looking
    value ("-5G", "-1e3") joined to it by "=", so that its check, not argparse, refuses it."""
    out: list[str] = []
    for a in args:
        if out and out[-1] in _NUMBER_FLAGS and _NEGATIVE.match(a):
            out[-1] = f"{out[-1]}={a}"
        else:
            out.append(a)
    return out


def leave(status: int) -> int:
    """End this process (a command of its own, its work done and its files closed) with exit
    status `status`, without the interpreter's teardown: unloading torch, pandas, scipy and
    matplotlib module by module took most of a second after every sweep. Output is flushed and
    the atexit handlers run (multiprocessing's among them) before os._exit. Where the output
    cannot be flushed (a closed pipe), returns `status` for the ordinary exit to report it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        return status
    atexit._run_exitfuncs()  # multiprocessing's among them: its workers are ended
    if "gpubench.run.forkserver" in sys.modules:  # its server, still importing, holds stdout
        sys.modules["gpubench.run.forkserver"].stop()
    os._exit(status)


_PACKAGE = Path(__file__).resolve().parent.parent
_python_format_warning = warnings.formatwarning


def _format_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """gpubench's own warnings (NVML missing, a torn results line) as one plain line, like its
    errors, rather than Python's format with a line of gpubench's source under it."""
    if Path(filename).resolve().is_relative_to(_PACKAGE):
        return f"gpubench: warning: {_one_line(str(message))}\n"
    return _python_format_warning(message, category, filename, lineno, line)


def _one_line(message: str) -> str:
    """Line breaks inside a message (from a value the user gave) shown escaped, as repr does."""
    return _LINE_BREAK.sub(lambda m: repr(m.group())[1:-1], message)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "tune":  # issue 24
        from gpubench.cli import tune_command

        return tune_command.run(args)
    if args.command == "compare":  # two run folders, or (--ab) two code versions measured
        from gpubench.cli import ab_args

        ab_args.check_usage(args)
        if args.ab is not None:  # issue 52
            from gpubench.cli import ab_command

            return ab_command.run(args)
    from gpubench.cli import commands, launch_args, launch_command, sweep_args

    if args.command == "sweep":  # issue 53: --launcher (or its suite key), a launch's resume
        keys = launch_args.suite_keys(args, sweep_args.DEFAULT_SUITE)
        if launch_args.kind(args, keys) is not None or launch_command.is_launch(args.resume):
            return launch_command.sweep(args)
        launch_args.check(args, keys)
    run = {
        "sweep": commands.sweep,
        "merge": commands.merge,
        "collect": launch_command.collect,  # issue 53
        "report": commands.report,
        "explain": commands.explain,
        "compare": commands.compare,
        "max-batch": commands.max_batch,
        "list": commands.list_all,
        "env": commands.show_env,
    }
    return run[args.command](args)
