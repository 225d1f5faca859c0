"""The command line's parser: each command's flags (sweep_args, max_batch_args, tune_args,
sharing flags.py) under one `gpubench`; a usage error is one line naming the bad value and
what is allowed (a ConfigError, exit status 2)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn

from gpubench.cli import ab_args, launch_args, max_batch_args, sweep_args, tune_args, values
from gpubench.config.errors import ConfigError


class Help(argparse.HelpFormatter):
    """Each option's help ends with its default, '(default: small)', unless it takes no value,
    has none (None, or an empty list), or its help says it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "(default" in text
            or action.nargs == 0
            or default in (None, [], argparse.SUPPRESS)
            or not action.option_strings
        ):
            return action.help
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # argparse drops a value of "--" (`--size=--`) and hands the option an empty list,
        # unchecked by its type: check "--" by the option's own type, which names what is
        # allowed; an option that would take it (a path) still cannot have it.
        if action.option_strings and arg_strings == ["--"]:
            if action.type is not None:
                self._get_value(action, "--")  # raises, naming the allowed values
            raise ConfigError(
                f"argument {'/'.join(action.option_strings)}: invalid value '--'; allowed: "
                f"{action.metavar or 'a value'} other than '--' (which ends the options)"
            )
        return super()._get_values(action, arg_strings)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """argparse's, with an unrecognised option named beside the options allowed."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}; {self._allowed(parsed)}")
        return parsed

    def _allowed(self, parsed: argparse.Namespace) -> str:
        """The options of the command given (of the whole parser where none was)."""
        command = getattr(parsed, "command", None)
        found = self
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                found = action.choices[command]
        options = sorted(
            {s for a in found._actions for s in a.option_strings if s.startswith("--")}
        )
        return f"allowed: {', '.join(options)}"


DESCRIPTION = """\
gpubench measures neural-network training (PyTorch) on the GPU and the CPU with one harness:
step time, throughput, memory, energy and FLOPs as batch size, precision, optimizer and speed
options change, then says which configuration is fastest, what holds it back and what to try
next. Every point runs in a process of its own and ends as one row (a JSON line) of its run
folder's results file."""

SYNOPSIS = """\
examples:
  gpubench sweep                               the quick suite on every device here
  gpubench sweep gpu --models transformer --batch-sizes 32,64 --precisions bf16
  gpubench tune --model cnn --budget 15m       the fastest configuration, within a budget
  gpubench max-batch --model transformer       the largest batch that fits in memory
  gpubench max-batch --model transformer --target-batch 256
                                               the fewest accumulation steps for batch 256
  gpubench explain results/RUN                 the verdict: fastest, bottleneck, next step
  gpubench report results/RUN                  the HTML report of one or more runs
  gpubench compare results/BASE results/NEW    point by point; exit 1 on a regression
  gpubench compare --ab main                   this tree's code against main's, measured
                                               alternately in one job; exit 1 on a slowdown

`gpubench COMMAND --help` lists a command's flags, their allowed values and defaults;
README.md (the Quick start) and docs/ say more."""


class _TopHelp(argparse.RawDescriptionHelpFormatter, Help):
    """The top level's description and examples as written (line breaks kept)."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gpubench", description=DESCRIPTION, epilog=SYNOPSIS, formatter_class=_TopHelp
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=Parser, metavar="COMMAND"
    )
    sweep_args.add_parser(sub)
    max_batch_args.add_parser(sub)
    tune_args.add_parser(sub)  # issue 24

    merge = sub.add_parser(
        "merge", help="join run folders (shards of a sweep, runs on other machines) into one"
    )
    merge.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="run folders")
    merge.add_argument("--out", type=Path, required=True, help="the new run folder")
    merge.add_argument(
        "--allow-duplicates",
        action="store_true",
        help="a point in several folders keeps its first ok row, or its first row where none "
        "is ok (default: refused)",
    )
    merge.add_argument(
        "--across-machines",
        action="store_true",
        help="set a parallel row against a one-process baseline measured on another machine "
        "(default: only against its own machine's)",
    )

    launch_args.add_collect(sub)  # issue 53

    report = sub.add_parser("report", help="render the HTML report of one or more run folders")
    report.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="run folders")
    report.add_argument(
        "--out", type=Path, help="report .html file or folder (default: DIR/report.html)"
    )

    compare = sub.add_parser(
        "compare",
        help="compare two runs point by point, or (--ab) this working tree's code against a "
        "commit's, measured in one job; exit 1 on a regression",
        description="compare BASE NEW: two run folders point by point. compare --ab BASE_REF: "
        "the working tree's code against BASE_REF's, both measured in this job, window by "
        "window, in fresh processes of each version every round; each point's head/base ratio "
        "of samples/s, with its 95% interval, is judged against --margin (docs/ci-gate.md).",
    )
    compare.add_argument("base", type=Path, nargs="?", help="the baseline run folder")
    compare.add_argument("new", type=Path, nargs="?", help="the run folder to check")
    compare.add_argument(
        "--threshold",
        type=values.arg(values.percent),
        help="smallest slowdown of the median step time, in percent, that counts (default: 5)",
    )
    compare.add_argument(
        "--format",
        type=values.choice(("text", "markdown", "json"), "format"),
        default="text",
        help="text, markdown, json (--ab: text, json)",
    )
    ab_args.add_flags(compare)
    explain = sub.add_parser(
        "explain", help="print the verdict of run folders: fastest, bottleneck, next experiment"
    )
    explain.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="run folders")
    explain.add_argument(
        "--json",
        action="store_true",
        help="print the verdicts as JSON: per model and optimizer the winner's identity, the "
        "ties, how sure, the bottleneck and its evidence, the levers",
    )
    explain.add_argument(
        "--margin",
        type=values.arg(values.percent),
        metavar="PCT",
        help="the practical difference, in percent (default: 3): a smaller lead is a tie",
    )

    sub.add_parser("list", help="show the models, sizes, precisions, optimizers and suites")
    sub.add_parser("env", help="print the machine and software as JSON")
    return parser
