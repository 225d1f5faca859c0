"""scripts/tune_vs_grid.py and target_vs_grid.py as callers: a list of budget shares, a finished
grid reused (never rerun), one tune folder and one acceptance line per share, the judgement
scripts/acceptance*.py's. The grid and the tunes are trimmed published folders
(tests/data/acceptance); the tune command is replaced by a copy of a published tune's folder."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from acceptance import judge_runs
from acceptance_target import judge_target_runs

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "acceptance"
GRID, TUNE = DATA / "cnn2" / "grid-cnn", DATA / "cnn2" / "tune-cnn"
TARGET_GRID, TARGET_TUNE = (
    DATA / "target95b" / "grid-target-cnn",
    DATA / "target95b" / "tune-target-cnn",
)


@pytest.fixture
def scripts(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("grid_runs")


def _script(name: str, monkeypatch: pytest.MonkeyPatch, tune_from: Path) -> list[list[str]]:
    """Import scripts/`name`.py with its gpubench commands replaced: each "tune" copies
    `tune_from` into its --out and takes 100 s; the calls are returned as they come."""
    module = importlib.import_module(name)
    calls: list[list[str]] = []

    def fake(argv: list[str]) -> float:
        calls.append(argv)
        shutil.copytree(tune_from, argv[argv.index("--out") + 1])
        return 100.0

    monkeypatch.setattr(module, "run_gpubench", fake)
    return calls


def test_budget_shares_read_a_list(scripts: Any) -> None:
    assert scripts.budget_shares("0.15,0.25,0.40") == [0.15, 0.25, 0.4]
    assert scripts.budget_shares("0.25") == [0.25]
    for bad in ("0.15,x", "0", "1.5", "0.2,0.2", ""):
        with pytest.raises(ValueError, match="invalid --budget-share"):
            scripts.budget_shares(bad)
    assert scripts.tune_dir(Path("d"), "cnn", 0.15) == Path("d/tune-cnn-at-15pct")
    assert scripts.tune_dir(Path("d"), "cnn", 0.4, target=True) == Path(
        "d/tune-target-cnn-at-40pct"
    )


def test_only_a_finished_sweep_of_the_model_is_a_grid(scripts: Any, tmp_path: Path) -> None:
    scripts.check_finished_grid(GRID, "cnn", "speed")
    with pytest.raises(ValueError, match="is a sweep of cnn, not mlp"):
        scripts.check_finished_grid(GRID, "mlp", "speed")
    with pytest.raises(ValueError, match=r"has no results\.jsonl"):
        scripts.check_finished_grid(tmp_path, "cnn", "speed")
    tune = shutil.copytree(TUNE, tmp_path / "tune")
    (tune / "tune.json").write_text("{}")
    with pytest.raises(ValueError, match=r"is a tune's folder \(tune.json\)"):
        scripts.check_finished_grid(tune, "cnn", "speed")
    stopped = shutil.copytree(GRID, tmp_path / "stopped")
    (stopped / "confirm.json").unlink()  # a sweep stopped before its confirmation
    with pytest.raises(ValueError, match=r"not a finished speed sweep: it has no confirm\.json"):
        scripts.check_finished_grid(stopped, "cnn", "speed")
    with pytest.raises(ValueError, match=r"no batch_analysis\.json"):
        scripts.check_finished_grid(TARGET_GRID, "cnn", "convergence")
    with pytest.raises(ValueError, match="give it with --grid-seconds S"):
        scripts.grid_seconds(GRID, None)
    assert scripts.grid_seconds(GRID, 860.0) == 860.0


def test_tune_vs_grid_reuses_the_grid_and_judges_each_share(
    scripts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    calls = _script("tune_vs_grid", monkeypatch, TUNE)
    out = tmp_path / "cmp"
    argv = ["cnn", "--out", str(out), "--grid", str(GRID), "--grid-seconds", "800"]
    monkeypatch.setattr(sys, "argv", ["tune_vs_grid.py", *argv, "--budget-share", "0.15,0.25"])
    said = importlib.import_module("tune_vs_grid").main()
    assert [c[0] for c in calls] == ["tune", "tune"]  # the grid is not run again
    assert [c[c.index("--budget") + 1] for c in calls] == ["120s", "200s"]
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("at ")]
    judged = judge_runs(GRID, TUNE)[0]
    assert len(lines) == 2 and lines[0].startswith("at 15%: tune took 100 s (12% of")
    assert all(line.endswith(judged.line()) for line in lines)
    summary = json.loads((out / "tune-vs-grid-cnn.json").read_text())
    assert [s["tune"] for s in summary["shares"]] == [
        str(out / "tune-cnn-at-15pct"),
        str(out / "tune-cnn-at-25pct"),
    ]
    # 100 s is over 15% + 5% of 800 s, within 25% + 5%: the first share fails on its time
    assert [s["pass"] for s in summary["shares"]] == [False, judged.within]
    assert said == 1


def test_a_grid_that_is_not_a_finished_sweep_is_refused_in_one_line(
    scripts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    calls = _script("tune_vs_grid", monkeypatch, TUNE)
    argv = ["tune_vs_grid.py", "mlp", "--out", str(tmp_path), "--grid", str(GRID)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as stop:
        importlib.import_module("tune_vs_grid").main()
    assert stop.value.code == 2 and not calls
    assert capsys.readouterr().err == f"--grid {GRID} is a sweep of cnn, not mlp\n"


def test_target_vs_grid_reuses_the_grid_with_its_own_space(
    scripts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    grid = shutil.copytree(TARGET_GRID, tmp_path / "grid")
    (grid / "batch_analysis.json").write_text("{}")  # finished, as the published folder is
    (grid / "grid_wall.json").write_text(json.dumps({"wall_s": 400.0}))
    calls = _script("target_vs_grid", monkeypatch, TARGET_TUNE)
    out = tmp_path / "cmp"
    argv = [
        "target_vs_grid.py",
        "cnn",
        "eval_accuracy=0.95",
        "--out",
        str(out),
        "--grid",
        str(grid),
    ]
    monkeypatch.setattr(sys, "argv", [*argv, "--budget-share", "0.25,0.4"])
    importlib.import_module("target_vs_grid").main()
    assert [c[0] for c in calls] == ["tune", "tune"]
    for call, budget in zip(calls, ["100s", "160s"], strict=True):
        assert call[call.index("--budget") + 1] == budget
        # the grid's own batch sizes and seeds, not the script's defaults
        assert call[call.index("--batch-sizes") + 1] == "8,16,32,64,128,256,512"
        assert call[call.index("--seeds") + 1] == "3"
    assert (out / "tune-target-cnn-at-25pct").is_dir() and (
        out / "tune-target-cnn-at-40pct"
    ).is_dir()
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("at ")]
    judged = judge_target_runs(grid, TARGET_TUNE)
    assert len(lines) == 2 and all(line.endswith(judged.line()) for line in lines)
    monkeypatch.setattr(sys, "argv", [*argv[:2], "eval_accuracy=0.9", *argv[3:]])
    with pytest.raises(SystemExit) as stop:
        importlib.import_module("target_vs_grid").main()
    assert stop.value.code == 2 and "was run to" in capsys.readouterr().err


def test_judge_only_reads_a_published_folder_of_one_tune(
    scripts: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    calls = _script("tune_vs_grid", monkeypatch, TUNE)
    monkeypatch.setattr(sys, "argv", ["tune_vs_grid.py", "cnn", "--out", str(DATA / "cnn2")])
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--judge-only"])
    said = importlib.import_module("tune_vs_grid").main()
    judged = judge_runs(GRID, TUNE)[0]
    assert not calls and capsys.readouterr().out == judged.line() + "\n"
    assert said == (0 if judged.within else 1)


def test_a_second_run_at_other_shares_keeps_the_first_runs_in_the_summary(
    scripts: Any, tmp_path: Path
) -> None:
    # an H100 comparison ran 0.15 first, then 0.25,0.40,0.60 against the same grid: the
    # summary keeps all four (a share run again is replaced); another grid starts afresh
    path = tmp_path / "tune-vs-grid-cnn.json"
    first = {"grid": "g", "shares": [{"share": 0.15, "x": 1}, {"share": 0.25, "x": 1}]}
    path.write_text(json.dumps(first))
    later = {"grid": "g", "shares": [{"share": 0.25, "x": 2}, {"share": 0.4, "x": 2}]}
    merged = scripts.merged_summary(path, later)
    assert [(s["share"], s["x"]) for s in merged["shares"]] == [(0.15, 1), (0.25, 2), (0.4, 2)]
    assert scripts.merged_summary(path, {**later, "grid": "h"})["shares"] == later["shares"]
