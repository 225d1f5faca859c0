"""Acceptance of tune against the grid (scripts/acceptance.py, acceptance_target.py): on trimmed
copies of the published comparisons (tests/data/acceptance/README.md) and on synthetic rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import acceptance as A
import pytest
from acceptance_target import judge_target, judge_target_runs

from gpubench.science.leaders import decide
from gpubench.science.target_time import fastest, summarise
from gpubench.store.results import read_rows

DATA = Path(__file__).parent / "data" / "acceptance"


def row(batch: int, sps: float, ci: float = 0.01, **kw: Any) -> dict[str, Any]:
    r = {
        "model": "mlp", "model_size": "small", "device": "cpu", "precision": "fp32",
        "optimizer": "adamw", "batch_size": batch, "seed": 0, "compile": "eager",
        "status": "ok", "samples_per_s": sps, "step_time_s": batch / sps,
        "step_time_ci_rel": ci, "busy": False,
    }  # fmt: skip
    return {**r, **kw}


def record(rows: list[dict[str, Any]], samples: list[list[float]]) -> dict[str, Any]:
    """A confirmation record of `rows` re-measured in rounds with `samples`."""
    fixed = {k: rows[0][k] for k in ("model", "model_size", "optimizer")}
    return {"fixed": fixed, "candidates": rows, "decision": decide(samples).to_dict()}


def grid_rows(n: int, spread: float = 0.2) -> list[dict[str, Any]]:
    """n rows whose wide intervals overlap (a tie of n by the rows), and one clearly slower."""
    return [row(2**k, 1000 - k, ci=spread) for k in range(n)] + [row(4096, 100)]


def test_the_grids_winner_is_agreement_and_its_own_best() -> None:
    rows = [row(64, 1000), row(128, 500)]
    j = A.judge(rows, None, rows[0])
    assert (j.agreement, j.ratio, j.within, j.agrees) == (A.SAME, 1.0, True, True)


def test_a_pick_inside_a_tie_of_three_agrees_and_of_four_the_grid_could_not_tell() -> None:
    three, four = grid_rows(3), grid_rows(4)
    assert A.judge(three, None, three[2]).agreement == A.TIED
    told = A.judge(four, None, four[0])
    assert told.agreement == A.UNTOLD and not told.agrees
    assert len(told.grid_answer) == 4
    assert A.judge(four, None, four[0], max_tie=4).agreement == A.TIED


def test_the_ratio_is_the_grids_figure_for_the_pick_and_the_margin_is_configurable() -> None:
    rows = [row(64, 1000), row(128, 975), row(256, 500)]
    j = A.judge(rows, None, {**rows[1], "samples_per_s": 5000.0})  # tune's own figure: ignored
    assert j.ratio == pytest.approx(0.975) and j.source == A.ROWS
    assert j.within and not A.judge(rows, None, rows[1], margin=0.02).within
    with pytest.raises(ValueError, match=r"margin 1\.5"):
        A.judge(rows, None, rows[1], margin=1.5)


def test_a_pick_the_grid_never_ran_is_not_within_and_different() -> None:
    rows = [row(64, 1000), row(128, 500)]
    j = A.judge(rows, None, row(512, 9999))
    assert (j.ratio, j.within, j.agreement) == (None, False, A.DIFFERENT)
    assert "never ran" in j.line()


def test_the_grids_rounds_judge_a_pick_they_re_measured() -> None:
    # rows say B=128 is faster; the grid's interleaved rounds say B=64 is, by 1.25x
    rows = [row(64, 1000, ci=0.2), row(128, 1100, ci=0.2), row(256, 100)]
    rec = record(rows[:2][::-1], [[800.0] * 6, [1000.0] * 6])
    j = A.judge(rows, rec, rows[1])
    assert j.source == A.ROUNDS and j.ratio == pytest.approx(0.8)
    assert j.agreement == A.DIFFERENT and j.grid_best.endswith("B=64")


def test_recorded_cnn_clear_grid_winner_and_tunes_three_way_tie_do_not_agree() -> None:
    """The published CNN case: the grid's confirmation named B=256 over B=512 (x1.19); tune's
    answer was a tie of 3 led by B=128, which the old script counted as agreement."""
    grid_dir = DATA / "cnn2" / "grid-cnn"
    (j,) = A.judge_runs(grid_dir, DATA / "cnn2" / "tune-cnn")
    decision = json.loads((grid_dir / "confirm.json").read_text())["partitions"][0]["decision"]
    assert decision["winner"] is not None and len(j.grid_answer) == 1
    assert j.pick.endswith("B=128 (compiled)") and j.agreement == A.DIFFERENT
    rows = [r for r in read_rows(grid_dir) if r["status"] == "ok"]
    want = {"batch_size": 128, "precision": "bf16", "compile": "compile", "threads": 2}
    mine = [r["samples_per_s"] for r in rows if all(r[k] == v for k, v in want.items())]
    assert j.source == A.ROWS
    assert j.ratio == pytest.approx(mine[0] / max(r["samples_per_s"] for r in rows))
    assert not j.within


def test_recorded_transformer_grid_tie_of_many_is_not_agreement() -> None:
    (j,) = A.judge_runs(DATA / "tvg2" / "grid-transformer", DATA / "tvg2" / "tune-transformer")
    assert len(j.grid_answer) > A.MAX_TIE and j.agreement == A.UNTOLD and not j.agrees


def test_recorded_mlp_pick_in_the_grids_rounds_is_judged_by_them() -> None:
    grid_dir = DATA / "tvg2" / "grid-mlp"
    (j,) = A.judge_runs(grid_dir, DATA / "tvg2" / "tune-mlp")
    part = json.loads((grid_dir / "confirm.json").read_text())["partitions"][0]
    medians = part["decision"]["median_samples_per_s"]
    assert j.source == A.ROUNDS and j.agreement == A.TIED
    lead = part["decision"]["leader"]
    assert j.ratio in [pytest.approx(m / medians[lead]) for m in medians]


def test_two_ties_sharing_a_member_with_different_leaders_disagree() -> None:
    rows = grid_rows(3)
    first = A.Answer(rows[0], (rows[1],))
    second = A.Answer(rows[2], (rows[1],))
    assert A.agreement(first, second) == A.DIFFERENT  # the old script: "tie, consistent"
    assert A.agreement(first, A.Answer(rows[1], (rows[0],))) == A.BOTH_TIED
    assert A.agreement(A.Answer(rows[0], ()), A.Answer(rows[0], ())) == A.SAME
    many = A.Answer(rows[0], tuple(rows[1:4]))
    assert A.agreement(many, many) == A.UNTOLD


def target_row(batch: int, seed: int, t: float | None, rule: str = "sqrt") -> dict[str, Any]:
    return row(batch, 1000, seed=seed, lr_scaling=rule, time_to_target_s=t)


def test_time_to_target_is_judged_by_the_grids_median_for_the_pick() -> None:
    rows = [target_row(64, s, t) for s, t in enumerate([1.0, 1.1, 1.2])]
    rows += [target_row(128, s, t) for s, t in enumerate([1.3, 1.4, 0.5])]
    pick = {"batch_size": 128, "lr_scaling": "sqrt"}
    j = judge_target(rows, pick, tune_s=0.5)  # tune's own figure: its lucky seed
    assert j.pick_s == pytest.approx(1.3) and j.ratio == pytest.approx(1.3 / 1.1)
    assert j.within and not judge_target(rows, pick, tolerance=0.1).within
    rows.append(target_row(256, 0, None))
    missed = judge_target(rows, {"batch_size": 256, "lr_scaling": "sqrt"})
    assert missed.pick_s is None and not missed.within


def test_recorded_target_run_judged_by_the_grid_is_over_its_tolerance() -> None:
    """The published 0.95 run: tune's own median passed; the grid's figure for its pick does not."""
    grid_dir = DATA / "target95b" / "grid-target-cnn"
    j = judge_target_runs(grid_dir, DATA / "target95b" / "tune-target-cnn")
    summaries = summarise(read_rows(grid_dir))
    best = fastest(summaries)
    assert best is not None and j.grid_best_s == best.median_s
    assert j.tune_s is not None and j.tune_s <= (1 + j.tolerance) * j.grid_best_s
    assert j.ratio is not None and j.ratio > 1 + j.tolerance and not j.within


def test_a_busy_grid_row_still_judges_the_pick_and_says_it_was_busy() -> None:
    rows = [row(64, 1000, busy=True), row(128, 500)]
    j = A.judge(rows, None, rows[0])
    assert j.ratio == 1.0 and "busy" in j.source and "busy" in j.line()
    assert A.judge(rows, None, rows[1]).ratio == pytest.approx(0.5)


def test_a_tune_that_measured_nothing_named_no_answer_and_is_not_within(tmp_path: Path) -> None:
    # on an H100 a tune given 25% of a 75 s grid spent it all in its set-up and wrote no rows:
    # it is judged, not a crash, and fails the margin
    grid = tmp_path / "grid"
    grid.mkdir()
    rows = [row(64, 1000.0), row(128, 600.0)]
    (grid / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "tune").mkdir()
    [j] = A.judge_runs(grid, tmp_path / "tune")
    assert (j.agreement, j.ratio, j.within, j.agrees) == (A.NO_ANSWER, None, False, False)
    assert "B=64" in j.grid_best and "nothing to judge" in j.line()
