"""Issue 25's memory answer: the largest micro-batch that fits per checkpoint mode, and from it the
fewest accumulation steps for a target effective batch, confirmed by a full measurement (the plan
on synthetic searches; `max-batch --target-batch` on a tiny real model)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from isolation import memory_cap

from gpubench.cli import main
from gpubench.config.spec import Point
from gpubench.run import batch_plan
from gpubench.run.accumulation_plan import (
    divisors,
    fewest_steps,
    micro_point,
    plan,
)
from gpubench.run.maxbatch import MaxBatch


def test_the_fewest_equal_micro_batches_that_fit() -> None:
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert fewest_steps(512, 512) == 1
    assert fewest_steps(512, 96) == 8  # 64 fits; 128 does not
    assert fewest_steps(96, 40) == 3  # equal parts: 32, not 48
    assert fewest_steps(7, 3) == 7  # a prime splits only into ones
    assert fewest_steps(512, 0) is None


POINT = Point("transformer", "tiny", "cpu", "fp32", "adamw", 1)


def test_auto_batch_sizes_at_accumulate_k_are_k_times_the_micro_batches_that_fit() -> None:
    four = Point("mlp", "tiny", "cpu", "fp32", "sgd", 1, accumulate=4, checkpoint="blocks")
    assert micro_point(four) == Point("mlp", "tiny", "cpu", "fp32", "sgd", 1, checkpoint="blocks")
    # batch_sizes = "auto" searches the micro-batch (accumulate 1) and scales it by k
    assert batch_plan.rank_layout(four).probe.accumulate == 1
    assert batch_plan.batch_sizes(four, 100) == [4, 8, 16, 32, 64, 128, 256]
    assert batch_plan.batch_sizes(four, 0) == [4]


def test_the_plan_searches_each_mode_at_accumulate_1_and_steps_past_a_full_run_oom() -> None:
    largest = {"none": 96, "blocks": 300}
    searched: list[Point] = []
    measured: list[tuple[int, int, str]] = []

    def search(p: Point) -> MaxBatch:
        searched.append(p)
        return MaxBatch(p, largest[p.checkpoint])

    def measure(p: Point) -> dict[str, Any]:
        measured.append((p.batch_size, p.accumulate, p.checkpoint))
        # the whole step holds more than the micro-batch alone: 8 x 64 fails, 16 x 32 fits
        fits = p.batch_size // p.accumulate <= (32 if p.checkpoint == "none" else 256)
        return {"status": "ok" if fits else "oom", "samples_per_s": 100.0 if fits else None}

    found = plan(POINT, 512, ["none", "blocks"], search, measure)
    assert [(p.accumulate, p.checkpoint) for p in searched] == [(1, "none"), (1, "blocks")]
    assert measured == [(512, 8, "none"), (512, 16, "none"), (512, 2, "blocks")]
    none, blocks = found.ways
    assert none.largest_micro_batch == 96 and none.answer is not None
    assert (none.answer.accumulate, none.answer.micro_batch) == (16, 32)
    assert blocks.answer is not None and blocks.answer.accumulate == 2
    assert found.fewest is blocks
    summary = found.to_dict()
    assert summary["fewest"] == {"checkpoint": "blocks", "accumulate": 2}
    assert [a["status"] for a in summary["ways"][0]["attempts"]] == ["oom", "ok"]


def test_a_failure_other_than_oom_stops_that_mode_and_none_fitting_is_said() -> None:
    found = plan(
        POINT,
        64,
        ["none"],
        lambda p: MaxBatch(p, 16),
        lambda p: {"status": "timeout", "error": "ran past 60 s"},
    )
    (way,) = found.ways
    assert [(a.accumulate, a.status) for a in way.attempts] == [(4, "timeout")]
    assert way.answer is None and found.fewest is None
    nothing = plan(POINT, 64, ["none"], lambda p: MaxBatch(p, 0), lambda p: {"status": "ok"})
    assert nothing.ways[0].attempts == [] and nothing.fewest is None


def test_max_batch_target_batch_names_both_modes_and_the_fewest_steps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["max-batch", "--model", "transformer", "--size", "tiny", "--device", "cpu"]
    args += ["--max-memory", str(memory_cap()), "--ceiling", "8", "--steps", "2"]
    assert main([*args, "--target-batch", "32", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["target_batch"] == 32
    ways = {w["checkpoint"]: w for w in result["ways"]}
    assert set(ways) == {"none", "blocks"}
    for w in ways.values():
        # the ceiling bounds the micro-batch: 8 fits, so 32 = 4 x 8, measured fully
        assert w["largest_micro_batch"] == 8 and w["search"]["accumulate"] == 1
        assert (w["accumulate"], w["micro_batch"]) == (4, 8)
        assert w["attempts"][-1]["status"] == "ok" and w["samples_per_s"] > 0
    assert result["fewest"] == {"checkpoint": "none", "accumulate": 4}
    assert main([*args, "--target-batch", "16", "--checkpoint", "blocks"]) == 0
    printed = capsys.readouterr().out
    assert "checkpoint blocks: largest micro-batch that fits: 8" in printed
    assert "fewest accumulation steps: B=16 as 2 x 8, checkpoint blocks" in printed


def test_checkpointing_a_model_without_blocks_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["max-batch", "--model", "mlp", "--size", "tiny", "--device", "cpu", "--ceiling", "4"]
    assert main([*argv, "--max-memory", "4G", "--checkpoint", "blocks"]) == 2
    err = capsys.readouterr().err
    assert "checkpoint blocks" in err and "mlp has none" in err
