"""A suite's [launcher] table (issue 53, config.launcher_keys): its keys are the launcher flags'
defaults, each flag over its key; a bad value is one line naming the file, the line, the value
and what is allowed; a suite's `kind` makes `sweep SUITE` a launch. No launch is submitted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpubench.cli import launch_args, parser
from gpubench.cli.main import main
from gpubench.config.errors import ConfigError
from gpubench.config.launcher_keys import LauncherKeys
from gpubench.config.suite import load_launcher, load_suite
from gpubench.run import folder

SUITE = """\
name = "cluster"
models = ["mlp"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [2, 4]
precisions = ["fp32"]
optimizers = ["sgd", "adamw"]

[launcher]
"""
TABLE = """\
kind = "slurm"
partition = "gpu"
time_limit_min = 120
gpus_per_task = 0
array_parallelism = 4
shards = 2
"""


def _suite(tmp_path: Path, table: str) -> Path:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "cluster.toml"
    path.write_text(SUITE + table)
    return path


def test_the_table_is_read_and_each_flag_overrides_its_key(tmp_path: Path) -> None:
    path = _suite(tmp_path, TABLE)
    keys = load_launcher(path)
    assert keys == LauncherKeys("slurm", "gpu", 120, 0, 4, 2)
    assert load_launcher("quick") == LauncherKeys()  # a suite without the table
    # the table is no part of the suite's points nor of suite.json (a resume compares that)
    spec = load_suite(path)
    assert "launcher" not in folder.as_saved(spec)
    assert spec == load_suite(_suite(tmp_path / "bare", ""))

    def settings(*flags: str) -> object:
        args = parser.build_parser().parse_args(["sweep", str(path), *flags])
        return launch_args.settings(args, launch_args.suite_keys(args, "quick"))

    assert settings() == launch_args_settings("slurm", "gpu", 120, 0, 4, 2)
    overridden = settings(
        "--partition", "big", "--time-limit", "30", "--gpus-per-task", "2",
        "--array-parallelism", "1", "--shards", "1",
    )  # fmt: skip
    assert overridden == launch_args_settings("slurm", "big", 30, 2, 1, 1)
    # --launcher local over kind = "slurm": the table's partition is Slurm's, left out
    assert settings("--launcher", "local") == launch_args_settings("local", None, 120, 0, 4, 2)
    # without the table: the flags' defaults
    bare = parser.build_parser().parse_args(["sweep", "quick", "--launcher", "local"])
    assert launch_args.settings(
        bare, launch_args.suite_keys(bare, "quick")
    ) == launch_args_settings("local", None, 60, 1, None, None)


def launch_args_settings(*values: object) -> object:
    from gpubench.run.launcher import Settings

    return Settings(*values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('kind = "pbs"\n', "invalid launcher.kind 'pbs'; allowed: slurm, local"),
        ("time_limit_min = 0\n", "invalid launcher.time_limit_min 0; allowed: a whole number of 1"),
        ("gpus_per_task = -1\n", "invalid launcher.gpus_per_task -1; allowed: a whole number of 0"),
        ("shards = 1.5\n", "invalid launcher.shards 1.5; allowed: a whole number of 1"),
        ("array_parallelism = true\n", "invalid launcher.array_parallelism True; allowed"),
        ('partition = ""\n', "invalid launcher.partition ''; allowed: a partition's name"),
        ("nodes = 2\n", "unknown key 'launcher.nodes'; allowed: kind, partition, time_limit_min"),
        ('kind = "local"\npartition = "gpu"\n', 'launcher.partition with launcher.kind = "local"'),
    ],
)
def test_a_bad_key_is_one_line_naming_the_file_line_value_and_what_is_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, message: str
) -> None:
    path = _suite(tmp_path, table)
    line = SUITE.count("\n")  # the [launcher] table's line
    for load in (load_suite, load_launcher):
        with pytest.raises(ConfigError) as e:
            load(path)
        assert str(e.value).startswith(f"{path}, line {line}: ") and message in str(e.value)
    out = tmp_path / "run"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_a_suites_kind_makes_the_sweep_a_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _suite(tmp_path, 'kind = "local"\n')
    out = tmp_path / "run"
    # a launch refuses a flag of one machine's, naming the suite's key
    assert main(["sweep", str(path), "--gpus", "all", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'the suite\'s launcher.kind "local" shares the points' in err[0]
    # the launch path is taken (it asks for submitit), launcher flags need no --launcher
    monkeypatch.setitem(sys.modules, "submitit", None)  # as where it is not installed
    assert main(["sweep", str(path), "--shards", "2", "--out", str(out)]) == 2
    assert "--launcher needs submitit" in capsys.readouterr().err
    # a table without kind: its settings wait for --launcher, and its flags still need one
    plain = _suite(tmp_path / "plain", "shards = 2\n")
    assert main(["sweep", str(plain), "--shards", "2", "--out", str(out)]) == 2
    assert "--shards needs --launcher slurm|local" in capsys.readouterr().err
    assert not out.exists()
