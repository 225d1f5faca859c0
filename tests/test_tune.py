"""`gpubench tune` (speed mode): a real tiny tune on the CPU (run folder, tune.json, a verdict, a
resume that measures nothing twice), its space, its rounds' budgets, and bad input as one line
with exit status 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpubench.cli import main
from gpubench.cli.tune_args import duration
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point
from gpubench.store import tune_record as T
from gpubench.store import tune_rows
from gpubench.store.confirmations import FILE as CONFIRM_FILE
from gpubench.tune import space as tune_space
from gpubench.tune.search import ROUNDS, round_scale
from gpubench.tune.tuner import round_budget

TINY = [
    "tune",
    "--model",
    "mlp",
    "--size",
    "tiny",
    "--device",
    "cpu",
    "--batch-sizes",
    "4,8",
    "--precisions",
    "fp32,bf16",
    "--compile",
    "eager",
    "--threads",
    "1",
    "--max-time",
    "0.3",
]


@pytest.mark.slow  # two tunes end to end (the sweep's calibration included): about a minute
def test_a_tiny_tune_on_the_cpu_writes_its_run_folder_and_names_an_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpubench.run import confirm

    monkeypatch.setattr(confirm, "DEADLINE", float("inf"))  # no timing of this machine
    out = tmp_path / "run"
    assert main([*TINY, "--budget", "10m", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "round 0" in printed and "search: ran all its rounds" in printed
    record = json.loads((out / T.FILE).read_text())
    assert record["schema"] == T.SCHEMA and record["finished"] is True
    assert record["space"]["size"] == 4  # fp32, bf16 x B=4, 8
    trials = record["trials"]
    assert {t["round"] for t in trials} == set(range(ROUNDS))
    assert set(trials[0]) == {f.name for f in dataclasses.fields(T.TrialRecord)}
    assert all(t["outcome"] in ("kept", "pruned", "final") for t in trials)
    best = [t["best_so_far_samples_per_s"] for t in trials]
    assert best == sorted(best)  # the best so far never falls
    assert [t["elapsed_s"] for t in trials] == sorted(t["elapsed_s"] for t in trials)
    last = [t for t in trials if t["round"] == ROUNDS - 1]
    assert all(t["budget_s"] == 0.3 for t in last)  # the last round is the sweep's measurement
    assert record["coverage"]["space_size"] == 4
    assert record["best"]["round"] == ROUNDS - 1
    assert record["plan"]["dropped"] == []  # fp32 and bf16 both within a tenth of each other
    # results.jsonl: one row per configuration measured, its deepest round's
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    keys = [Point.of(r).key() for r in rows]
    assert len(keys) == len(set(keys)) == record["coverage"]["configurations_measured"]
    measured = tune_rows.read(out)
    assert measured is not None and len(measured) == len(trials)
    for r in rows:
        assert r["tune_round"] == max(
            m["tune_round"] for m in measured if Point.of(m).key() == Point.of(r).key()
        )
    assert (out / CONFIRM_FILE).is_file() and (out / "report.html").is_file()
    # the verdict names a winner or a tie, in tune.json and from explain
    assert record["verdict"]["leader"] and record["verdict"]["headline"]
    assert main(["explain", str(out), "--json"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert answer["winner"] is not None or answer["ties"]
    # tune.json is the search's record: no Optuna study beside it (issue 29)
    assert not (out / "tune.db").exists()
    # a resume replays the search on what was measured: nothing is measured twice
    assert main(["tune", "--resume", str(out), "--budget", "5m", "--quiet"]) == 0
    assert len(tune_rows.read(out) or []) == len(measured)
    again = json.loads((out / T.FILE).read_text())["trials"]
    assert len(again) == len(trials) and again[0]["elapsed_s"] == trials[0]["elapsed_s"]


def test_the_budget_ends_the_search_and_says_what_it_covered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1 s is spent before the first measurement (the calibration a sweep makes too)
    out = tmp_path / "run"
    # it measured nothing: exit status 1, one line saying why (a CI script must not read success)
    assert main([*TINY, "--budget", "1s", "--out", str(out)]) == 1
    said = capsys.readouterr()
    printed = said.out
    assert "the tune measured no configuration (budget: 1 s" in said.err
    assert "stopped early (budget: 1 s reached in round 0" in printed
    assert "measured 0 of 4 configurations (0% of the space" in printed
    record = json.loads((out / T.FILE).read_text())
    assert record["finished"] is False and record["stopped"].startswith("budget: 1 s")
    assert record["coverage"]["configurations_measured"] == 0 and record["verdict"] is None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--model", "nosuchmodel"], "unknown model 'nosuchmodel'"),
        (["--model", "mlp", "--budget", "0"], "invalid --budget '0'"),
        (["--model", "mlp", "--budget", "15x"], "invalid --budget '15x'"),
        (["--budget", "5m"], "tune needs --model M"),
        (["--model", "mlp", "--precisions", "fp8"], "unknown precision 'fp8'"),
        (["--model", "mlp", "--target", "eval_accuracy"], "invalid --target 'eval_accuracy'"),
        (["--model", "mlp", "--target", "eval_accuracy=x"], "invalid --target value 'x'"),
        (
            ["--model", "mlp", "--target", "eval_accuracy=0.9", "--precisions", "fp32,bf16"],
            "tune --target takes one precision, not fp32,bf16",
        ),
        (["--resume", "/nonexistent/run"], "nothing to resume"),
        (
            ["--resume", "/nonexistent/run", "--precisions", "fp32"],
            "goes on with that folder's own settings, so --precisions cannot change them",
        ),
        (["--resume", "/x", "--option", "depth=2"], "so --option cannot change them"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tune", *argv]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_a_duration_reads_seconds_minutes_and_hours() -> None:
    assert duration("90") == duration("90s") == 90.0
    assert duration("15m") == 900.0 and duration("1.5h") == 5400.0
    for bad in ("", "0s", "m", "1d", "nan"):
        with pytest.raises(ConfigError, match="allowed: a wall-clock time above 0"):
            duration(bad)


def test_the_space_holds_only_what_the_device_runs_for_the_model() -> None:
    base = Point("mlp", "tiny", "cpu", "fp32", "sgd", 1)
    values = tune_space.axis_values(base, has_conv=False, cpu_threads=4, named={})
    assert "tf32" not in values["precision"] and "fp32" in values["precision"]
    assert values["channels_last"] == (False,) and values["cuda_graph"] == (False,)
    assert values["cudnn_benchmark"] == (False,) and values["threads"] == (1, 2, 4)
    combos = tune_space.combos(base, values, has_conv=False)
    assert dict(combos[0]) == {  # the base: what a user runs without tuning
        "precision": "fp32",
        "compile": "eager",
        "threads": 4,
        "channels_last": False,
        "cuda_graph": False,
        "cudnn_benchmark": False,
        "checkpoint": "none",
    }
    assert len(combos) == len(values["precision"]) * 2 * 3
    conv = tune_space.axis_values(base, has_conv=True, cpu_threads=3, named={"compile": ("eager",)})
    assert conv["channels_last"] == (False, True) and conv["compile"] == ("eager",)
    assert conv["threads"] == (1, 2, 3) and conv["cudnn_benchmark"] == (False,)  # no cuDNN
    with pytest.raises(ConfigError, match="nothing to search"):
        tune_space.combos(base, {**values, "precision": ("tf32",)}, has_conv=False)
    # channels-last named by the user is left out where the model has no convolutions
    named = {**values, "channels_last": (False, True)}
    assert not any(dict(c)["channels_last"] for c in tune_space.combos(base, named, False))
    assert any(dict(c)["channels_last"] for c in tune_space.combos(base, named, True))


def test_earlier_rounds_measure_a_share_of_the_sweeps_measurement() -> None:
    sweep = Budget()
    assert round_budget(sweep, ROUNDS - 1) == sweep
    for rnd in range(ROUNDS - 1):
        b = round_budget(sweep, rnd)
        assert b.max_time_s == pytest.approx(sweep.max_time_s * round_scale(rnd))
        assert b.warmup_max_s == pytest.approx(sweep.warmup_max_s * round_scale(rnd))
        assert b.profile_steps == 0
    fixed = round_budget(Budget.fixed(90), 0)
    assert fixed.min_steps == fixed.max_steps == 10  # 90 / 9
    assert round_budget(Budget.fixed(20), 0).max_steps == 6  # the fewest with an interval


def test_the_budget_counts_from_when_the_command_started(tmp_path: Path) -> None:
    # `started` is the command's start (its process's, run from the command line): a budget
    # spent before tune() was called leaves nothing for the search
    import time

    from gpubench.tune.tuner import TuneRequest, tune

    request = TuneRequest(
        "mlp", "tiny", "cpu", "sgd", named={"precision": ("fp32",), "compile": ("eager",)},
        batch_sizes=(4,), budget_s=600.0,
    )  # fmt: skip
    record = tune(request, tmp_path / "run", started=time.perf_counter() - 601.0)
    assert record.stopped is not None and record.stopped.startswith("budget: 600 s reached")
    assert not record.trials and record.elapsed_s >= 601.0


def test_one_worker_serves_the_check_the_calibration_and_the_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one worker started for the model check, the environment capture and the trials (an H100
    # paid about 4 s a start); the confirmation runs in fresh workers of its own (issue 41: an
    # interval must hold between processes)
    from gpubench.run import calibration_process, pool, preflight
    from gpubench.run.worker import WorkerRunner
    from gpubench.tune import tuner

    made: list[WorkerRunner] = []

    class Counted(WorkerRunner):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    # both trials compete whatever else the machine ran: a trial marked busy (other load on its
    # core) is left out of the candidates, leaving one ("not needed"; seen in a CI run)
    from gpubench.science import standing

    monkeypatch.setattr(standing, "_clean_or_all", lambda ok: ok)
    # the run's own worker and the confirmation's come from run.pool.drained_worker
    monkeypatch.setattr(pool, "WorkerRunner", Counted)
    monkeypatch.setattr(preflight, "WorkerRunner", Counted)  # where the check made its own
    monkeypatch.setattr(calibration_process, "WorkerRunner", Counted)  # and the calibration
    request = tuner.TuneRequest(
        "mlp", "tiny", "cpu", "sgd", named={"precision": ("fp32",), "compile": ("eager",),
        "threads": (1,)}, batch_sizes=(4, 8), budget=Budget(max_time_s=0.2, min_time_s=0.1),
    )  # fmt: skip
    record = tuner.tune(request, tmp_path / "run")
    assert record.trials and all(t.status == "ok" for t in record.trials)
    confirmed = json.loads((tmp_path / "run" / "confirm.json").read_text(encoding="utf-8"))
    assert confirmed["partitions"][0]["status"] == "confirmed"  # its rounds ran
    from gpubench.science import leaders

    assert len(made) == 1 + leaders.PROCESSES
    assert [len(r.startup_s) for r in made] == [1] * (1 + leaders.PROCESSES)


def test_a_process_knows_how_long_it_has_run() -> None:
    import subprocess
    import sys

    code = "import time; time.sleep(0.5); from gpubench.probes.process_age import process_age_s;"
    code += "print(process_age_s())"
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)  # fmt: skip
    assert 0.5 <= age < 60
