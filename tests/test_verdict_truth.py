"""Issue 29, item 4: every line of the verdict is true of its rows. Each case seen false, on the
committed runs, the H100 fixtures or synthetic rows: one configuration left to compare where
several ran, a lever that slows the step, bf16 measured against fp16, advice a tune cannot
follow, and a larger batch for a fixed effective batch."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from report_fixture import env, speed_row, write_run

from gpubench.config.spec import Point
from gpubench.report.explain import explain_runs
from gpubench.run import confirm
from gpubench.science import standing
from gpubench.science.levers import levers, no_help
from gpubench.science.verdict import verdicts

ROOT = Path(__file__).resolve().parents[1]
BASE = Point("mlp", "small", "cpu", "fp32", "sgd", 64)


def _row(point: Point, seconds: float, **extra: Any) -> dict[str, Any]:
    return speed_row(point, seconds, 0.0, np.random.default_rng(0), **extra)


def test_one_configuration_left_to_compare_says_why_when_several_ran() -> None:
    clean = _row(BASE, 0.01)
    busy = [
        _row(dataclasses.replace(BASE, batch_size=b), 0.01, busy=True) for b in (4, 8, 16, 32, 128)
    ]
    # the pool is the one clean row: nothing to re-measure, and no runner is needed to say so
    record = confirm._confirm_partition([clean, *busy], None, None, 1.0)
    assert record is not None and record.status == "not needed"
    assert record.reason == (
        "one configuration to compare: 5 of the 6 that ran were contended (busy) and left out"
    )
    alone = confirm._confirm_partition([clean], None, None, 1.0)
    assert alone is not None and alone.reason == "a single configuration ran"


def test_a_setting_that_slows_the_step_is_not_a_lever() -> None:
    # the committed quick run: bf16 at 0.16x the samples/s of fp32 on this CPU
    found = {v.model: v for v in explain_runs([ROOT / "results" / "20261122-cpu-quick"])[0]}
    v = found["mlp/small, sgd"]
    assert not any("bf16" in line for line in v.levers)
    (slower,) = [line for line in v.not_levers if "bf16" in line]
    assert slower.endswith(": slower here") and "x0.158 the samples/s of cpu fp32 B=64" in slower
    assert any(line.startswith("  not a lever: ") for line in v.lines())


def _gpu(precision: str, samples_per_s: float) -> dict[str, Any]:
    base = {"model": "transformer", "device": "cuda", "optimizer": "adamw", "compile": "eager"}
    return base | {"precision": precision, "batch_size": 64, "samples_per_s": samples_per_s}


def test_a_lower_precision_is_measured_against_fp32_and_names_what_it_is_measured_against() -> None:
    best, fp16, fp32 = _gpu("bf16", 300.0), _gpu("fp16", 295.0), _gpu("fp32", 100.0)
    lines, _ = levers("compute", best, [best, fp16, fp32], [best, fp16, fp32], ["precision"])
    assert lines == [
        "a lower precision (bf16): in use, x3.00 the samples/s of cuda fp32 B=64 without it "
        "(at the same batch)"
    ]
    # no fp32 row (the H100 gpu-tf run): against fp16, said so; 1.02x is within the margin
    lines, _ = levers("compute", best, [best, fp16], [best, fp16], ["precision"])
    assert lines == []
    (same,) = no_help("compute", best, [best, fp16], ["precision"])
    assert "x1.02 the samples/s of cuda fp16 B=64 without it" in same
    assert same.endswith("no practical difference at the 3% margin")
    # not measured: the next experiment names the fastest's own precision beside bf16
    _, todo = levers("compute", fp16, [fp16], [fp16], ["precision"])
    assert todo == "measure a lower precision (bf16): --precisions fp16,bf16"


def test_a_compute_bound_fastest_still_rising_at_its_largest_batch_says_which_batch_is_open() -> (
    None
):
    # the default sweep's mlp/small SGD on the CPU: compute-bound, B=512 the fastest and the
    # largest measured, 1.11x B=256: the label's levers come first, the open batch after
    rows = [_gpu("bf16", 200.0) | {"batch_size": 32}, _gpu("bf16", 300.0)]
    lines, todo = levers("compute", rows[1], rows, rows, ["batch_size"])
    assert lines[-1].startswith("a larger batch: B=64 is the largest measured and the fastest")
    assert todo == "measure larger batches: --batch-sizes auto"
    # one batch measured: nothing says the series is still rising
    lines, _ = levers("compute", rows[1], rows[1:], rows[1:], ["batch_size"])
    assert not any(line.startswith("a larger batch") for line in lines)


def test_a_tunes_advice_is_one_tune_or_a_sweep_can_follow(tmp_path: Path) -> None:
    unprofiled = {
        "profile": None,
        "busy_fraction": None,
        "flops_per_step": None,
        "peak_tflops": None,
        "peak_bandwidth_gb_per_s": None,
    }
    rows = [_row(BASE, 0.01, **unprofiled), _row(dataclasses.replace(BASE, batch_size=16), 0.02)]
    rows[1] |= unprofiled
    (swept,) = verdicts(pd.DataFrame(rows))
    assert swept.next_experiment is not None and "--no-profile" in swept.next_experiment
    run = write_run(tmp_path / "tune", rows, env())
    (run / "tune.json").write_text(json.dumps({"space": {}}))
    (tuned,) = explain_runs([run])[0]
    assert tuned.bottleneck is None and "tune profiles only its last round" in str(
        tuned.unclassified
    )
    assert tuned.next_experiment == (
        "profile it with a sweep of it alone: gpubench sweep --models mlp --size small "
        "--devices cpu --precisions fp32 --optimizers sgd --batch-sizes 64 --compile eager"
    )


def test_no_larger_batch_for_a_fixed_effective_batch_of_which_one_way_ran() -> None:
    # H100: B=256 as 1 x 256 and with checkpointing ran out of memory; only 4 x 64 ran
    (v,) = explain_runs([ROOT / "tests" / "data" / "h100" / "effbatch"])[0]
    (larger,) = [line for line in v.levers if line.startswith("a larger batch")]
    assert larger == (
        "a larger batch: not searched, every row trains the effective batch B=256 "
        "(4 ways of reaching it, weighed below)"
    )
    assert "--batch-sizes" not in str(v.next_experiment)


def test_the_published_confirmed_run_reads_true() -> None:
    # it could not be explained at all (an empty `accumulate` read back as NaN), and its CPU
    # energy line read "CPU not measured (nan)"
    found = {
        v.model: v for v in explain_runs([ROOT / "results" / "20261123-cpu-quick-confirmed"])[0]
    }
    assert not any("(nan)" in line for v in found.values() for line in v.energy)
    # the rounds' own figures, the gap with its interval and the one reason that held (was
    # "within 20.0%", the interval's bound read as the gap)
    assert found["mlp/small, adamw"].headline() == (
        "tie: cpu bf16 B=64 and cpu fp32 B=64 (6,843 and 6,460 samples/s, re-measured): "
        "cpu bf16 B=64 x1.09 (95% CI 0.907-1.20) over cpu fp32 B=64: the interval reaches x1: "
        "the rounds cannot tell which is faster"
    )
    # the lever the rounds measured in the same minutes is judged by them: bf16 read 1.19x by
    # the rows while the headline could not tell the two apart
    tied = found["mlp/small, adamw"]
    assert not any(line.startswith("bf16") for line in tied.levers)
    assert any(
        "in the interleaved rounds (95% CI 0.907-1.20): not shown" in line
        for line in tied.not_levers
    )


def test_a_lever_measured_against_a_row_tied_with_the_leader_is_within_noise() -> None:
    # the published run, no rounds for transformer/adamw: its headline calls bf16 B=64 and
    # fp32 B=64 too noisy to tell apart, so bf16's 1.18x over fp32 B=64 is no lever's figure
    found = {
        v.model: v for v in explain_runs([ROOT / "results" / "20261123-cpu-quick-confirmed"])[0]
    }
    for model in ("transformer/small, adamw", "transformer/small, sgd"):
        v = found[model]
        assert "cpu fp32 B=64" in v.headline()
        assert not any("bf16" in line for line in v.levers)
        (noise,) = [line for line in v.not_levers if "bf16" in line]
        assert "the samples/s of cpu fp32 B=64 without it" in noise
        assert noise.endswith(": within noise, the rows cannot tell the two apart")
    # rows the verdict tells apart keep their figure: cnn's bf16 leads fp32 clearly
    assert found["cnn/small, sgd"].levers[0].startswith("a lower precision (bf16): in use, x2.22")


def test_a_tied_row_gives_no_lever_figure_either_way() -> None:
    best, fp32 = _gpu("bf16", 300.0), _gpu("fp32", 200.0)
    tied = frozenset({standing.identity(fp32)})
    # 1.5x by the figures, but the verdict cannot tell the two rows apart
    lines, _ = levers("compute", best, [best, fp32], [best, fp32], ["precision"], tied=tied)
    assert lines == []
    (noise,) = no_help("compute", best, [best, fp32], ["precision"], tied=tied)
    assert noise == (
        "a lower precision (bf16): in use, x1.50 the samples/s of cuda fp32 B=64 without it "
        "(at the same batch): within noise, the rows cannot tell the two apart"
    )
    # the same rows told apart: a lever with its figure
    lines, _ = levers("compute", best, [best, fp32], [best, fp32], ["precision"])
    assert lines == [noise.removesuffix(": within noise, the rows cannot tell the two apart")]
    # the lever off at the fastest, its tied row slower by the figures: within noise, not slower
    (off,) = no_help("compute", fp32 | {"samples_per_s": 320.0}, [fp32, best], ["precision"])
    assert off.endswith(": slower here")
    (off,) = no_help(
        "compute",
        fp32 | {"samples_per_s": 320.0},
        [fp32, best],
        ["precision"],
        tied=frozenset({standing.identity(best)}),
    )
    assert off.endswith(": within noise, the rows cannot tell the two apart")


def test_one_configuration_under_several_seeds_is_one_tie_member_not_a_tie_with_itself() -> None:
    # a target tune's speed verdict listed B=128 under seeds 1 and 2 as two tie members
    lead = standing.lead

    def r(batch: int, seed: int, sps: float) -> dict[str, object]:
        return {
            "model": "cnn", "model_size": "tiny", "device": "cpu", "precision": "fp32",
            "optimizer": "adamw", "batch_size": batch, "seed": seed, "status": "ok",
            "samples_per_s": sps, "step_time_s": batch / sps, "step_time_ci_rel": 0.3,
        }  # fmt: skip

    rows = [r(256, 0, 29780.0), r(512, 0, 25921.0), r(128, 1, 25569.0), r(128, 2, 25106.0)]
    rows.append(r(256, 1, 29000.0))
    got = lead(rows, None, ["batch_size", "seed"])
    named = [(t["identity"]["batch_size"]) for t in got.ties]
    assert got.best["batch_size"] == 256 and sorted(named) == [128, 512]
    alone = lead([r(256, 0, 29780.0), r(256, 1, 29000.0), r(512, 0, 9000.0)], None, ["seed"])
    assert not alone.ties and "runner-up, cpu fp32 B=512 seed 0" in alone.confidence
