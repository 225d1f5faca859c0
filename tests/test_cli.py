from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gpubench.cli import main
from gpubench.store.row import COLUMNS

TINY = """
name = "tiny"
models = ["mlp", "transformer"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [2, 8]
precisions = ["fp32", "tf32"]
optimizers = ["sgd"]

[budget]
warmup_steps = 1
warmup_min_s = 0
warmup_max_s = 0.5
min_steps = 3
max_steps = 3
min_time_s = 0
max_time_s = 60.0
"""


def test_sweep_end_to_end_writes_the_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    out = tmp_path / "run"
    assert main(["sweep", str(suite), "--out", str(out), "--quiet"]) == 0
    assert {p.name for p in out.iterdir()} >= {
        "results.jsonl",
        "results.csv",
        "env.json",
        "suite.json",
    }
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 2 * 2
    rows = [json.loads(line) for line in lines]
    ok = [r for r in rows if r["status"] == "ok"]
    unsupported = [r for r in rows if r["status"] == "unsupported"]
    assert len(ok) == 4 and all(r["precision"] == "fp32" for r in ok)
    assert len(unsupported) == 4 and all("CUDA" in r["error"] for r in unsupported)
    for r in ok:
        assert r["steps_measured"] >= 3 and len(r["step_times_s"]) == r["steps_measured"]
        assert r["step_time_s"] > 0 and r["samples_per_s"] == pytest.approx(
            r["batch_size"] / r["step_time_s"]
        )
        assert r["loss_first"] > 0 and r["loss_last"] > 0
    lm = [r for r in ok if r["model"] == "transformer"]
    assert all(r["tokens_per_s"] == pytest.approx(r["samples_per_s"] * 16) for r in lm)
    csv = pd.read_csv(out / "results.csv")
    assert list(csv.columns) == COLUMNS and len(csv) == 8
    env = json.loads((out / "env.json").read_text())
    assert env["torch"]["version"] and env["cpu"]["torch_threads"] >= 1
    printed = capsys.readouterr().out
    assert "gpubench results" in printed and str(out) in printed


def test_flags_override_the_suite(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    out = tmp_path / "run"
    args = [
        "sweep",
        str(suite),
        "--models",
        "cnn",
        "--batch-sizes",
        "3",
        "--precisions",
        "fp32",
        "--optimizers",
        "adam",
        "--steps",
        "2",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    r = rows[0]
    assert (r["model"], r["batch_size"], r["optimizer"], r["steps_measured"]) == (
        "cnn",
        3,
        "adam",
        2,
    )
    assert r["optimizer_impl"] == "foreach"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--models", "resnet"], "unknown model 'resnet'"),
        (["--size", "huge"], "unknown size 'huge'"),
        (["--devices", "tpu"], "unknown device 'tpu'"),
        (["--precisions", "fp8"], "unknown precision 'fp8'"),
        (["--optimizers", "lion"], "unknown optimizer 'lion'"),
        (["--batch-sizes", "0"], "invalid batch size 0"),
        (["--batch-sizes", "-3"], "invalid batch size -3"),
        (["--batch-sizes", "x"], "invalid batch size 'x'"),
        (["--steps", "0"], "invalid number 0"),
        (["--max-time", "-1"], "invalid number of seconds '-1'"),
        (["nosuchsuite"], "unknown suite 'nosuchsuite'"),
        (["missing.toml"], "does not exist"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    out = tmp_path / "run"
    assert main(["sweep", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err
    assert len(err.splitlines()) == 1
    assert not out.exists()


def test_malformed_suite_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('models = ["mlp"]\nprecisions = ["fp32"\n')
    assert main(["sweep", str(bad), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line" in err and len(err.strip().splitlines()) == 1


def test_list_and_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    for word in ("mlp", "cnn", "transformer", "tiny", "base", "bf16", "adamw", "quick"):
        assert word in listed
    assert main(["env"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert {"torch", "cpu", "gpus", "python", "gpubench"} <= set(env)


def test_python_dash_m_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpubench", "sweep", "--models", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "gpubench: error: argument --models: unknown model 'nope'; allowed: mlp, cnn, "
        "transformer, torchvision:NAME, timm:NAME, hf:MODEL_TYPE, or 'package.module:function' "
        "returning a Workload"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--size=--"], "argument --size: unknown size '--'; allowed: tiny, small, base"),
        (["--size=huge"], "argument --size: unknown size 'huge'; allowed: tiny, small, base"),
        (
            ["--precisions=,"],
            "argument --precisions: empty list ','; allowed: comma-separated values, each: "
            "fp32, tf32, fp16, bf16",
        ),
        (
            ["--steps=--"],
            "argument --steps: invalid number '--'; allowed: a whole number of 1 or more",
        ),
        (
            ["--resume=--"],
            "argument --resume: invalid value '--'; allowed: DIR other than '--' (which ends "
            "the options)",
        ),
        (
            ["--bogus"],
            "unrecognized arguments: --bogus; allowed: --accumulate, --array-parallelism, "
            "--batch-sizes",
        ),
        (["nosuch"], "unknown suite 'nosuch'; allowed: a .toml file, or a shipped suite: "),
    ],
)
def test_every_refusal_names_the_value_and_what_is_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    assert main(["sweep", *args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpubench: error: {line}") and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


OPTIONED = """
name = "optioned"
models = ["mlp", "transformer"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [2]
precisions = ["fp32"]
optimizers = ["sgd"]
profile = false

[budget]
warmup_steps = 1
warmup_min_s = 0
warmup_max_s = 0.5
min_steps = 2
max_steps = 2
min_time_s = 0

[model_options.transformer]
layers = 1
width = 16
"""


def test_sweep_option_sets_model_options_over_the_suites_table(tmp_path: Path) -> None:
    suite = tmp_path / "optioned.toml"
    suite.write_text(OPTIONED)
    out = tmp_path / "run"
    given = ["--option", "transformer.width=8", "--option", "mlp.hidden=[16, 16]"]
    assert main(["sweep", str(suite), *given, "--out", str(out), "--quiet", "--no-confirm"]) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    options = {r["model"]: json.loads(r["model_options"]) for r in rows}
    assert options == {"mlp": {"hidden": [16, 16]}, "transformer": {"layers": 1, "width": 8}}
    assert all(r["status"] == "ok" for r in rows)


@pytest.mark.parametrize(
    ("option", "line"),
    [
        (
            "cnn.width=8",
            "--option cnn.width=8 names model 'cnn', not in the sweep; allowed: mlp, transformer",
        ),
        (
            "transformer.depth=2",
            "model 'transformer' has no option 'depth'; allowed: heads, layers, seq_len, vocab, "
            "width",
        ),
        (
            "transformer=2",
            "--option transformer=2 names no model; allowed: MODEL.KEY=VALUE, MODEL one of mlp, "
            "transformer",
        ),
        (
            "transformer.layers",
            "argument --option: invalid model option 'transformer.layers'; allowed: "
            "MODEL.KEY=VALUE, e.g. transformer.layers=4",
        ),
    ],
)
def test_a_bad_sweep_option_exits_2_naming_what_is_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, line: str
) -> None:
    suite = tmp_path / "optioned.toml"
    suite.write_text(OPTIONED)
    out = tmp_path / "run"
    assert main(["sweep", str(suite), "--option", option, "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"gpubench: error: {line}"
    assert not out.exists()


def test_steps_keep_the_suites_noise_target_and_profiled_steps() -> None:
    """Issue 21: `--steps N` rows are flagged noisy by the suite's own target."""
    from gpubench.cli import parser as P
    from gpubench.cli import values
    from gpubench.config.spec import Budget

    args = P.build_parser().parse_args(["sweep", "--steps", "7"])
    suite = Budget(target_rel_ci=0.05, profile_steps=2, warmup_steps=1)
    budget = values.budget_from_args(args, suite)
    assert (budget.min_steps, budget.max_steps) == (7, 7)
    assert budget.target_rel_ci == 0.05 and budget.profile_steps == 2
    assert budget.warmup_steps == 1


def test_models_narrowing_a_convergence_suite_keeps_their_targets() -> None:
    """`sweep convergence --models cnn` keeps the CNN's targets and drops the others' (the suite's
    target table names models the flag leaves out: no error for those)."""
    from gpubench.cli import parser as P
    from gpubench.cli import sweep_args

    args = P.build_parser().parse_args(["sweep", "convergence", "--models", "cnn"])
    spec = sweep_args.spec_from_args(args)
    conv = spec.convergence
    assert spec.models == ("cnn",)
    assert conv.target == (("cnn", 0.04),) and conv.own_input_target == (("cnn", 0.2),)
    # (a suite file's own table naming a model it lacks is still refused: test_spec_convergence)
