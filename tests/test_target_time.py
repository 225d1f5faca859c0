"""Issue 21 item 6: one notion of fastest to target, over seeds with their spread, shared by the
verdict and the batch analysis (synthetic rows: nothing is trained)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from gpubench.cli.convergence_table import batch_table, comparisons, points_table
from gpubench.config.spec import Point
from gpubench.science import target_time as T
from gpubench.science.batch_analysis import analyse
from gpubench.science.verdict import verdicts
from gpubench.store import wording
from gpubench.store.row import make_row


def conv_row(
    b: int, seed: int, time_s: float | None, step_s: float = 0.01, status: str = "ok", **point: Any
) -> dict[str, Any]:
    """A convergence row that reached its target after `time_s` s of training (None: missed)."""
    p = Point("mlp", "tiny", "cpu", "fp32", "sgd", b, seed, "device", lr_scaling="linear", **point)
    steps = None if time_s is None else round(time_s / step_s)
    return make_row(
        p,
        status,
        steps_to_target=steps,
        samples_to_target=None if steps is None else steps * b,
        time_to_target_s=time_s,
        step_time_s=step_s,
        samples_per_s=b / step_s,
        dataset="digits",
        target_metric="eval_accuracy",
        target=0.9,
        lr=0.01,
    )


def test_seeds_of_a_configuration_are_summarised_together() -> None:
    rows = [conv_row(32, s, t) for s, t in ((0, 0.95), (1, 0.22), (2, 0.41))]
    rows += [conv_row(32, 0, 0.5, threads=1)]  # another configuration: one thread
    rows += [make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", 32), "ok", samples_per_s=1.0)]
    by_threads = {s.row["threads"]: s for s in T.summarise(rows)}  # the speed row is no run
    assert set(by_threads) == {None, 1}
    s = by_threads[None]
    assert (s.runs, s.reached, s.complete) == (3, 3, True)
    assert s.median_s == 0.41 and (s.min_s, s.max_s) == (0.22, 0.95)
    assert s.spread == pytest.approx(0.95 / 0.22) and s.disagree
    assert s.median_steps == 41  # the median of the seeds' 95, 22 and 41 steps, said beside
    assert s.describe() == (
        "0.410 s median over 3 seeds, 41 steps (0.220-0.950 s, spread x4.32: seeds disagree)"
    )
    assert by_threads[1].describe() == "0.500 s median over 1 seed, 50 steps"


def test_a_target_searchs_rung_runs_count_once_per_seed() -> None:
    # tune --target trains the same configuration again at each rung it survives: the runs
    # cut short at a rung's limit (seed 0, runs 0 and 3) are not misses; the last run counts
    rows = [
        conv_row(32, 0, None) | {"tune_run": 0},
        conv_row(32, 0, None) | {"tune_run": 3},
        conv_row(32, 0, 0.5) | {"tune_run": 7},
        conv_row(32, 1, 0.6) | {"tune_run": 8},
        conv_row(32, 2, 0.7) | {"tune_run": 9},
    ]
    (s,) = T.summarise(rows)
    assert (s.runs, s.reached, s.complete) == (3, 3, True)
    assert s.median_s == 0.6
    assert T.fastest([s]) is s


def test_a_spread_within_the_limit_is_not_flagged() -> None:
    (s,) = T.summarise([conv_row(128, 0, 1.0), conv_row(128, 1, 1.9)])
    assert s.spread == pytest.approx(1.9) and not s.disagree
    assert s.describe().endswith("(1.00-1.90 s, spread x1.90)")


def test_a_configuration_that_missed_in_one_seed_is_never_the_fastest() -> None:
    rows = [conv_row(512, 0, 0.1), conv_row(512, 1, None)]  # quick once, missed once
    rows += [conv_row(8, 0, None, status="diverged"), conv_row(8, 1, 0.05)]
    rows += [conv_row(32, 0, 0.3), conv_row(32, 1, 0.4)]
    summaries = {s.batch_size: s for s in T.summarise(rows)}
    assert (summaries[512].reached, summaries[512].runs) == (1, 2)
    assert not summaries[512].complete and not summaries[8].complete
    assert "only 1 of 2 seeds" in summaries[512].describe()
    best = T.fastest(summaries.values())
    assert best is not None and best.batch_size == 32 and best.median_s == pytest.approx(0.35)
    assert T.fastest([summaries[512], summaries[8]]) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0432, "0.0432 s"),
        (0.41, "0.410 s"),
        (0.0049, "0.00490 s"),
        (12.34, "12.3 s"),
        (1234.4, "1,234 s"),
        (0.0, "0 s"),
        (None, ""),
    ],
)
def test_times_print_at_a_precision_that_suits_their_scale(seconds: float, text: str) -> None:
    assert wording.seconds(seconds) == text


def test_the_verdict_and_the_recommendation_name_the_same_configuration() -> None:
    # B=32 reached the target once in 0.2 s (a lucky seed) and twice in about 4 s; B=128 in
    # 1.0-1.2 s every time. The verdict used to name B=32 "in 0.2 s" beside a recommendation
    # of B=128.
    rows = [conv_row(32, s, t, step_s=0.01) for s, t in ((0, 0.2), (1, 4.0), (2, 4.4))]
    rows += [conv_row(128, s, t, step_s=0.02) for s, t in ((0, 1.0), (1, 1.1), (2, 1.2))]
    frame = pd.DataFrame(rows)
    (entry,) = analyse(frame)
    (v,) = verdicts(frame)
    assert entry["recommended_batch_size"] == 128
    assert v.time_to_target is not None and "B=128: 1.10 s median over 3 seeds" in v.time_to_target
    assert "B=32" not in v.time_to_target
    per = {p["batch_size"]: p for p in entry["per_batch"]}
    assert per[32]["time_to_target_s"]["seeds_disagree"]  # 4.4 / 0.2 = 22x
    assert (
        "B=128 reaches the target in the least training time, 1.10 s median over 3 seeds"
        in entry["comparison"]
    )


def test_the_verdict_flags_seeds_that_disagree_and_counts_failed_seeds() -> None:
    rows = [conv_row(32, s, t) for s, t in ((0, 0.22), (1, 0.95), (2, 0.41))]
    rows += [conv_row(128, 0, 0.1), conv_row(128, 1, None, status="diverged")]
    (v,) = verdicts(pd.DataFrame(rows))
    assert v.time_to_target == (
        "cpu fp32 B=32: 0.410 s median over 3 seeds, 41 steps (0.220-0.950 s, spread x4.32: "
        "seeds disagree)"
    )
    rows = [conv_row(32, 0, None), conv_row(128, 0, 0.1), conv_row(128, 1, None)]
    (v,) = verdicts(pd.DataFrame(rows))
    assert v.time_to_target is not None and "no configuration reached" in v.time_to_target


def test_the_convergence_tables_print_sub_second_times_and_the_spread() -> None:
    rows = [conv_row(32, 0, 0.0432), conv_row(32, 1, 0.0951), conv_row(128, 0, None)]
    rows += [conv_row(128, 1, 0.01)]
    console = Console(width=250, record=True)
    console.print(points_table(pd.DataFrame(rows)))
    groups = analyse(pd.DataFrame(rows))
    console.print(batch_table(groups))
    text = console.export_text()
    assert "0.0432 s" in text and "0.0951 s" in text and "0.0100 s" in text
    assert "0.0692 s" in text and "2, x2.20 (disagree)" in text  # B=32's median and spread
    (line,) = comparisons(groups)
    assert "least training time, 0.0692 s median over 2 seeds, 7 steps (" in line  # 4 and 10
    assert "its steps→target" in text and groups[0]["recommended_time_to_target_s"][
        "median_steps"
    ] == pytest.approx(7)
    assert "spread x2.20: seeds disagree" in line
