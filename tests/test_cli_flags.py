"""The flags sweep, max-batch and tune share are one definition (issue 30): the same help and
the same refusal in each; `--option MODEL.KEY=VALUE` everywhere, the old `KEY=VALUE` of the
one-model commands read with a one-line deprecation warning; `gpubench --help` describes the
tool."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from gpubench.cli import main
from gpubench.cli.max_batch_args import point_from_args
from gpubench.cli.parser import build_parser
from gpubench.cli.tune_args import request_from_args
from gpubench.config.errors import ConfigError
from gpubench.config.model_options import OldOptionForm

SHARED = ("--data", "--option", "--steps", "--max-time", "--max-memory", "--point-timeout")
COMMANDS = ("sweep", "max-batch", "tune")
OLD = ["--option", "hidden=8", "--start", "8", "--ceiling", "4"]


def _subparser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices[command]
    return parser


def _action(command: str, flag: str) -> argparse.Action:
    return next(a for a in _subparser(command)._actions if flag in a.option_strings)


@pytest.mark.parametrize("flag", SHARED)
def test_a_shared_flag_has_one_help_text(flag: str) -> None:
    actions = [_action(c, flag) for c in COMMANDS]
    # the sweep says its default is the suite's; tune, what its earlier rounds measure
    base = [
        (a.help or "").split(" (default: the suite's)")[0].split(", in the last")[0]
        for a in actions
    ]
    assert len(set(base)) == 1 and base[0], base
    assert len({a.metavar for a in actions}) == 1 and len({a.dest for a in actions}) == 1


@pytest.mark.parametrize(
    ("flag", "bad", "line"),
    [
        (
            "--data",
            "disk",
            "argument --data: unknown data mode 'disk'; allowed: device, host, loader",
        ),
        (
            "--steps",
            "0",
            "argument --steps: invalid number 0; allowed: a whole number of 1 or more",
        ),
        (
            "--max-time",
            "soon",
            "argument --max-time: invalid number of seconds 'soon'; allowed: a number of seconds "
            "above 0, up to a year (31,622,400 s)",
        ),
        (
            "--option",
            "mlp.hidden=",
            "argument --option: invalid model option 'mlp.hidden='; allowed: MODEL.KEY=VALUE, "
            "e.g. transformer.layers=4",
        ),
        (
            "--option",
            ".hidden=8",
            "argument --option: invalid model option '.hidden=8'; allowed: MODEL.KEY=VALUE, "
            "e.g. transformer.layers=4",
        ),
        (
            "--option",
            "mlp.2x=8",
            "argument --option: invalid model option 'mlp.2x=8'; allowed: MODEL.KEY=VALUE, "
            "e.g. transformer.layers=4",
        ),
    ],
)
def test_every_command_refuses_a_bad_shared_value_in_the_same_one_line(
    flag: str, bad: str, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in COMMANDS:
        assert main([command, flag, bad]) == 2
        assert capsys.readouterr().err.strip() == f"gpubench: error: {line}", command


def test_max_batch_and_tune_take_model_dot_key_equals_value() -> None:
    argv = ["--model", "mlp", "--device", "cpu", "--option", "mlp.hidden=[8, 8]"]
    options = ["--option", "mlp.dropout=0.5"]
    point = point_from_args(build_parser().parse_args(["max-batch", *argv, *options]))
    assert json.loads(point.model_options or "") == {"hidden": [8, 8], "dropout": 0.5}
    request = request_from_args(build_parser().parse_args(["tune", *argv, *options]))
    assert request.model_options == {"hidden": [8, 8], "dropout": 0.5}


def test_a_model_with_dots_in_its_name_keeps_them() -> None:
    args = build_parser().parse_args(
        ["max-batch", "--model", "my.nets:build", "--option", "my.nets:build.width=64"]
    )
    assert json.loads(point_from_args(args).model_options or "") == {"width": 64}


def test_the_old_key_equals_value_still_works_with_a_deprecation_warning() -> None:
    argv = ["--model", "mlp", "--device", "cpu", "--option", "hidden=[8, 8]"]
    said = r"--option hidden=\[8, 8\] without its model is deprecated; write --option mlp\.hid"
    with pytest.warns(OldOptionForm, match=said):
        point = point_from_args(build_parser().parse_args(["max-batch", *argv]))
    assert json.loads(point.model_options or "") == {"hidden": [8, 8]}
    with pytest.warns(OldOptionForm, match=said):
        request = request_from_args(build_parser().parse_args(["tune", *argv]))
    assert request.model_options == {"hidden": [8, 8]}


def test_the_deprecation_is_one_line_on_stderr() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpubench", "max-batch", "--model", "mlp", "--device", "cpu", *OLD],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "gpubench: warning: --option hidden=8 without its model is deprecated; write --option "
        "mlp.hidden=8",
        "gpubench: error: --start 8 is above --ceiling 4; allowed: start <= ceiling",
    ]


@pytest.mark.parametrize("command", ["max-batch", "tune"])
def test_an_option_for_another_model_is_refused_naming_the_one_measured(command: str) -> None:
    args = build_parser().parse_args(
        [command, "--model", "mlp", "--device", "cpu", "--option", "cnn.width=8"]
    )
    make = point_from_args if command == "max-batch" else request_from_args
    with pytest.raises(ConfigError) as e:
        make(args)
    assert str(e.value) == (
        f"--option cnn.width=8 names model 'cnn', not the one {command} measures; allowed: mlp"
    )


def test_gpubench_help_describes_the_tool(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "gpubench measures neural-network training" in text
    for command in ("sweep", "max-batch", "tune", "merge", "report", "compare", "explain"):
        assert f"\n    {command}" in text, command  # a line of its own, with what it does
    for example in (
        "gpubench report results/RUN",
        "gpubench compare results/BASE results/NEW",
        "gpubench max-batch --model transformer --target-batch 256",
        "README.md",
    ):
        assert example in text, example


def test_no_report_is_a_flag_of_sweep_and_collect(capsys: pytest.CaptureFixture[str]) -> None:
    # issue 49: drawn by default; --no-report (sweep, its resume, a launch, collect) skips it
    # (run so: test_scaling_launch, test_launched, test_launcher), and the line where its path
    # would be names the command that draws it
    from pathlib import Path

    from gpubench.cli import console

    parse = build_parser().parse_args
    assert parse(["sweep"]).report and not parse(["sweep", "--no-report"]).report
    assert parse(["collect", "d"]).report and not parse(["collect", "d", "--no-report"]).report
    console.report_skipped(Path("results/my run"))
    line = "report: not drawn (--no-report); draw it with: python -m gpubench report "
    assert capsys.readouterr().out == line + "'results/my run'\n"
