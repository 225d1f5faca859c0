"""Issue 25's answer: for each effective batch measured several ways (accumulation steps x
micro-batch, with or without checkpointing) the verdict names the fastest way that fits and what
each other way costs in samples/s and saves in peak memory (synthetic rows; nothing is run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report_fixture import env, write_run

from gpubench.cli.main import main
from gpubench.config.spec import Point
from gpubench.science.effective_batch import effective_batches
from gpubench.science.verdict import verdicts
from gpubench.store.row import make_row

MiB = 2**20


def way(
    k: int, ck: str, sps: float | None, mem_mib: float | None, b: int = 512, **extra: Any
) -> dict[str, Any]:
    """A transformer row at effective batch `b` in `k` micro-batches with checkpoint `ck`:
    `sps` samples/s (None: out of memory) and `mem_mib` MiB allocator peak."""
    point = Point("transformer", "small", "cuda", "fp32", "adamw", b, accumulate=k, checkpoint=ck)
    if sps is None:
        return make_row(point, "oom", error="CUDA out of memory (synthetic)")
    return make_row(
        point,
        "ok",
        samples_per_s=sps,
        step_time_s=b / sps,
        step_time_ci_rel=0.01,
        torch_peak_allocated_bytes=None if mem_mib is None else int(mem_mib * MiB),
        host_peak_rss_bytes=int(3000 * MiB),
        **extra,
    )


def rows() -> list[dict[str, Any]]:
    return [
        way(1, "none", None, None),
        way(4, "none", 1000.0, 1000.0),
        way(2, "blocks", 830.0, 410.0),
        way(8, "none", 700.0, 600.0),
        way(1, "blocks", None, None),
    ]


def test_the_fastest_way_and_the_cost_of_each() -> None:
    (answer,) = effective_batches(rows())
    assert answer.batch_size == 512
    assert answer.fastest is not None and answer.fastest.name == "as 4 x 128"
    names = [c.name for c in answer.choices]
    # fastest first, the others by speed, those that did not run last
    assert names == [
        "as 4 x 128",
        "as 2 x 256, checkpoint blocks",
        "as 8 x 64",
        "as 1 x 512",
        "as 1 x 512, checkpoint blocks",
    ]
    ck = answer.choices[1]
    assert ck.ratio == pytest.approx(0.83) and ck.memory_ratio == pytest.approx(0.41)
    assert not ck.within_noise
    line = answer.line()
    assert line.startswith("cuda fp32 B=512: fastest as 4 x 128 (1,000 samples/s")
    assert "allocator peak 1000.0M" in line
    assert "as 2 x 256, checkpoint blocks: x0.830 the samples/s, 41% of the memory" in line
    assert "as 1 x 512: oom" in line and "as 1 x 512, checkpoint blocks: oom" in line


def test_ways_whose_intervals_overlap_are_said_to_be_within_noise() -> None:
    (answer,) = effective_batches([way(2, "none", 1000.0, 500.0), way(4, "none", 995.0, 400.0)])
    assert answer.choices[1].within_noise
    assert "x0.995 the samples/s (within noise of the fastest)" in answer.line()


def test_a_contended_way_says_so() -> None:
    busy = {**way(2, "none", 900.0, 500.0), "busy": True}
    (answer,) = effective_batches([way(4, "none", 1000.0, 400.0), busy])
    assert "as 2 x 256: x0.900 the samples/s (contended), 125% of the memory" in answer.line()


def test_without_an_allocator_the_ratios_use_the_peak_rss() -> None:
    cpu = [
        {**way(1, "none", 100.0, None), "host_peak_rss_bytes": 800 * MiB},
        {**way(2, "none", 90.0, None), "host_peak_rss_bytes": 600 * MiB},
    ]
    (answer,) = effective_batches(cpu)
    assert answer.memory == "peak RSS"
    assert "as 2 x 256: x0.900 the samples/s, 75% of the memory" in answer.line()


def test_each_effective_batch_is_answered_apart_and_single_ways_are_not() -> None:
    both = [*rows(), way(1, "none", 900.0, 300.0, b=64), way(2, "none", 800.0, 200.0, b=64)]
    both.append(way(1, "none", 100.0, 2000.0, b=4096))  # measured one way only: no answer
    assert [a.batch_size for a in effective_batches(both)] == [64, 512]


def test_seeds_give_one_answer_from_each_way_s_median_row() -> None:
    seeded = [
        {**way(k, "none", sps, 100.0 * k), "seed": s}
        for k, speeds in ((1, (900.0, 1000.0, 950.0)), (2, (800.0, 700.0, 990.0)))
        for s, sps in enumerate(speeds)
    ]
    (answer,) = effective_batches(seeded)
    assert [(c.accumulate, c.samples_per_s) for c in answer.choices] == [(1, 950.0), (2, 800.0)]
    assert "seed" not in answer.where


def test_a_run_without_the_axes_has_no_effective_batch_answer() -> None:
    plain = [way(1, "none", 900.0, 300.0, b=b) for b in (64, 128)]
    assert effective_batches(plain) == []
    (v,) = verdicts(pd.DataFrame(plain))
    assert v.effective_batch == [] and not any("effective batch" in x for x in v.lines())


def test_the_verdict_prints_it_and_explain_json_carries_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", rows(), env(), suite={"name": "accumulate"})
    assert main(["explain", str(run)]) == 0
    out = capsys.readouterr().out
    assert "effective batch: cuda fp32 B=512: fastest as 4 x 128" in out
    # the verdict's own labels tell the ways apart (they read 'cuda fp32 B=512' alike before)
    assert "fastest cuda fp32 B=512 as 4 x 128 (checkpoint none)," in out
    assert main(["explain", str(run), "--json"]) == 0
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    (eb,) = v["effective_batch"]
    assert eb["fastest"] == "as 4 x 128"
    assert v["leader"]["label"] == "cuda fp32 B=512 as 4 x 128 (checkpoint none)"
    assert [c["status"] for c in eb["choices"]] == ["ok", "ok", "ok", "oom", "oom"]
