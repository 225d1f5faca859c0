"""Issue 42, item 5: a setting tune measured and dropped says so, with why ("dropped: compile
took 14 s of a 60 s budget"), never "not measured". Synthetic trial records."""

from __future__ import annotations

from typing import Any

from gpubench.cli.tune_command import dropped_lines
from gpubench.store import tune_record as T


def _trial(n: int, compile_mode: str, **fields: Any) -> T.TrialRecord:
    config = {"precision": "fp32", "compile": compile_mode, "batch_size": 16}
    base: dict[str, Any] = {
        "number": n,
        "round": 0,
        "config": config,
        "budget_s": 0.1,
        "status": "ok",
        "samples_per_s": 7000.0,
        "compile_time_s": None,
        "point_time_s": 1.0,
        "elapsed_s": float(n),
        "outcome": "pruned",
        "best_so_far_samples_per_s": 7000.0,
        "best_so_far_config": config,
    }
    return T.TrialRecord(**(base | fields))


def test_a_compiled_setting_cut_by_the_deadline_is_dropped_with_its_compile_time() -> None:
    trials = (
        _trial(0, "eager"),
        _trial(1, "compile", samples_per_s=None, compile_time_s=14.2, cut=True, outcome="cut"),
        _trial(2, "compile", samples_per_s=None, fixed_s=9.0, cut=True, outcome="cut"),
    )
    record = T.TuneRecord(
        request={"budget_s": 60.0},
        space={},
        trials=trials,
        plan={"dropped": ["precision=fp16 dropped: it read 90 samples/s, under 1/10 of the best"]},
    )
    assert dropped_lines(record) == [
        "precision=fp16 dropped: it read 90 samples/s, under 1/10 of the best",
        "dropped: fp32 (compiled): compile took 14.2 s of a 60.0 s budget (2 trials, "
        "cut by the deadline: measured, not ranked)",
    ]


def test_a_ranked_compiled_setting_is_not_dropped() -> None:
    trials = (_trial(0, "eager"), _trial(1, "compile", compile_time_s=14.0))
    record = T.TuneRecord(request={"budget_s": None}, space={}, trials=trials)
    assert dropped_lines(record) == []
