"""`tune --target` for real: a tiny search on the shipped digits, through the convergence
runner in a worker process, and its bad input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpubench import models
from gpubench.cli import main
from gpubench.config.convergence import Convergence
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.config.suite import convergence_settings
from gpubench.store import target_record
from gpubench.store.results import read_rows
from gpubench.tune.target import TargetSearch, parse_target, run_target, space


def mlp(**fields: object) -> Point:
    """The MLP on the CPU at the convergence suite's size, as a target search starts from it
    (its batch size is the search's)."""
    size = convergence_settings("adamw")[0]
    return Point("mlp", size, "cpu", "fp32", "adamw", 1, **fields)  # type: ignore[arg-type]


def test_a_tiny_search_on_digits_writes_its_trajectory_and_an_answer_over_seeds(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    heard = []
    search = TargetSearch(
        budget_s=120,
        seeds=2,
        batch_sizes=[32, 128],
        rules=["sqrt"],
        max_time_s=8.0,  # room for the target on a loaded machine: runs stop there
        rungs=2,
        eta=2,
    )
    # seed 3 (--seed): the first seed; a contender's re-runs take the next ones
    result = run_target(
        mlp(seed=3),
        "eval_accuracy=0.4",  # the tiny MLP passed 0.5 in 0.81 s of training here
        search,
        out,
        on_run=heard.append,
    )
    assert result.best is not None and result.best.batch_size in (32, 128)
    spread = result.time_to_target
    assert spread is not None and spread.runs == 2 and spread.complete
    assert spread.min_s <= spread.median_s <= spread.max_s
    assert result.measured == result.space_size == 2

    record = json.loads((out / "tune_target.json").read_text())
    assert record["finished"] and record["metric"] == "eval_accuracy" and record["target"] == 0.4
    assert record["rungs_s"] == [4.0, 8.0] and record["covered"] == {"measured": 2, "space_size": 2}
    trials = record["trials"]
    assert {t["decision"] for t in trials} <= {"reached", "kept", "stopped", "seed"}
    # every configuration that reached the target on seed 0 (at most the 3 contenders) re-runs
    # on seed 1 before the answer is named
    reached = {json.dumps(t["config"]) for t in trials if t["decision"] == "reached"}
    reruns = [t for t in trials if t["decision"] == "seed"]
    assert [t["seed"] for t in reruns] == [1] * len(reached) and reached
    assert record["seed"] == 3 and record["max_steps"] is None
    assert {json.dumps(t["config"]) for t in reruns} == reached
    for t in trials:
        assert {"config", "rung", "elapsed_s", "best_metric", "decision", "reason"} <= set(t)
    assert record["answer"]["time_to_target"]["runs"] == 2
    # the record is the Optuna study's: a trial per configuration and per contender's re-run
    assert record["optuna"]["pruner"] == "SuccessiveHalvingPruner"
    ended = record["optuna"]["states"]
    assert sum(ended.values()) == 2 + len(reruns)
    assert {t["optuna_trial"] for t in trials} == set(range(2 + len(reruns)))
    assert len(heard) == len(trials)
    typed = target_record.read(out)  # the reader takes what the writer wrote, whole
    assert typed.answer is not None and len(typed.trials) == len(trials)
    assert [t.decision for t in typed.trials] == [t["decision"] for t in trials]

    rows = read_rows(out)
    assert len(rows) == len(trials)
    assert [r["tune_run"] for r in rows] == list(range(len(trials)))
    for row, t in zip(rows, trials, strict=True):  # convergence rows, as a sweep's
        assert row["seed"] == 3 + t["seed"]
        assert row["lr_scaling"] == "sqrt" and row["dataset"] == "digits"
        assert row["target_metric"] == "eval_accuracy" and "curve" in row
    answered = [
        r for r in rows if r["batch_size"] == result.best.batch_size and r["status"] == "ok"
    ]
    assert sorted(r["time_to_target_s"] for r in answered if r["time_to_target_s"] is not None)[
        -1
    ] == pytest.approx(spread.max_s)
    assert (out / "env.json").is_file() and (out / "results.csv").is_file()
    assert "median over 2 seeds" in result.describe()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accuracy=0.9", "unknown --target metric 'accuracy'"),
        ("eval_accuracy", "invalid --target 'eval_accuracy'"),
        ("eval_accuracy=high", "invalid --target value 'high'"),
        ("eval_accuracy=1.5", "an accuracy, above 0 and at most 1"),
    ],
)
def test_a_bad_target_is_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_target(text)


def test_bad_settings_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="model 'resnet'"):
        run_target(
            dataclasses.replace(mlp(), model="resnet"), "eval_accuracy=0.9", TargetSearch(60), out
        )
    with pytest.raises(ConfigError, match="invalid batch size 4096"):
        run_target(mlp(), "eval_accuracy=0.9", TargetSearch(60, batch_sizes=[4096]), out)
    with pytest.raises(ConfigError, match="invalid --budget"):
        run_target(mlp(), "eval_accuracy=0.9", TargetSearch(0), out)
    with pytest.raises(ConfigError, match="compile with --target; allowed: their defaults"):
        run_target(mlp(compile="compile"), "eval_accuracy=0.9", TargetSearch(60), out)
    assert not out.exists()


def test_the_space_is_batch_sizes_by_the_rates_the_scaling_rules_give() -> None:
    conv = Convergence(lr=0.004, base_batch_size=32)
    configs = space("adamw", conv, [8, 32, 128])
    # sqrt (AdamW's own rule) first; at the base batch size every rule gives the base rate
    assert [(c.batch_size, c.lr_scaling, c.lr) for c in configs] == [
        (8, "sqrt", pytest.approx(0.002)),
        (32, "sqrt", pytest.approx(0.004)),
        (128, "sqrt", pytest.approx(0.008)),
        (8, "none", pytest.approx(0.004)),
        (128, "none", pytest.approx(0.004)),
        (8, "linear", pytest.approx(0.001)),
        (128, "linear", pytest.approx(0.016)),
    ]


def test_the_flags_tune_shares_with_sweep_reach_every_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["tune", "--model", "mlp", "--device", "cpu", "--target", "eval_accuracy=0.99"]
    argv += ["--batch-sizes", "32,128", "--seeds", "2", "--budget", "5m", "--quiet"]
    # the shared flags: a wider hidden layer, seed 5, 7 steps at the top rung (its 10 s of
    # training never bind: the steps do)
    argv += ["--option", "mlp.hidden=[48]", "--seed", "5", "--steps", "7", "--max-time", "10"]
    assert main([*argv, "--out", str(out)]) == 0
    rows = read_rows(out)
    record = json.loads((out / "tune_target.json").read_text())
    assert record["rungs_s"][-1] == 10 and len(record["rungs_s"]) == 3
    assert record["seed"] == 5 and record["max_steps"] == 7
    assert record["model_options"] == {"hidden": [48]}
    wide = models.build("mlp", "tiny", hidden=(48,)).parameter_count()
    assert wide != models.build("mlp", "tiny").parameter_count()
    rungs = {}
    for row in rows:
        assert row["seed"] == 5 and json.loads(row["model_options"]) == {"hidden": [48]}
        assert row["parameters"] == wide and row["status"] == "ok"
        # each rung's step cap is its share of the top rung's time: ceil(7 x 1/9), ceil(7 x 1/3)
        cap = {0: 1, 1: 3, 2: 7}[row["tune_rung"]]
        rungs[row["tune_rung"]] = row["curve"][-1]["step"]
        assert rungs[row["tune_rung"]] == cap
    assert sorted(rungs) == [0, 1, 2]  # eta 3 keeps one of the two at each rung


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--data", "host"], "invalid --data 'host' with --target"),
        (["--compile", "eager"], "so --compile does not apply"),
        (["--option", "mlp.depth=3"], "depth"),
    ],
)
def test_a_shared_flag_tune_target_cannot_take_is_refused(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["tune", "--model", "mlp", "--device", "cpu", "--target", "eval_accuracy=0.9"]
    assert main([*argv, *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()
