"""Issue 41, item 4: bottleneck labels that earn their names. Memory-bound only at a third of the
bandwidth roof or more, compute-bound only at a third of the matmul roof or more, overhead where
the step does not grow with the batch, and no label that flips between two calibrations of one
machine. Checked on the published rows (H100 and CPU) as the verdict judges them: each row
among the rows of its folder (its batch-size series)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpubench import load_results
from gpubench.science import bottleneck as B
from gpubench.science.verdict import verdicts

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data" / "h100"
# The published H100 rows (results/ and the fixtures copied into tests/data/h100 from
# ../shared/fixtures/h100-20261124) and the published CPU rows.
H100 = [
    ROOT / "results" / "20261125-h100-quick" / "run" / "results.jsonl",
    ROOT / "results" / "20261122-h100-gpu" / "results.jsonl",
    ROOT / "results" / "20261122-h100-mfu" / "results.jsonl",
    ROOT / "results" / "20261122-h100-cpu" / "results.jsonl",
    DATA / "quick1" / "results.jsonl",
    DATA / "effbatch" / "results.jsonl",
    DATA / "tune" / "results.jsonl",
    DATA / "bottleneck_rows.jsonl",
]
CPU = [
    ROOT / "results" / "20261123-cpu-quick-confirmed" / "results.jsonl",
    ROOT / "results" / "20261122-cpu-quick" / "results.jsonl",
]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fractions(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """The row's fraction of the matmul roof and of the bandwidth roof (None: unknown)."""
    roof = bw = None
    if row.get("tflops") is not None and row.get("peak_tflops"):
        roof = row["tflops"] / row["peak_tflops"]
    if row.get("achieved_gb_per_s") is not None and row.get("peak_bandwidth_gb_per_s"):
        bw = row["achieved_gb_per_s"] / row["peak_bandwidth_gb_per_s"]
    return roof, bw


def _earns(kind: str | None, row: dict[str, Any]) -> bool:
    roof, bw = _fractions(row)
    if kind == "memory":
        return bw is not None and bw >= 1 / 3
    if kind == "compute":
        return roof is not None and roof >= 1 / 3
    return True


@pytest.mark.parametrize("path", H100 + CPU, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_published_row_is_memory_or_compute_bound_under_a_third_of_that_roof(
    path: Path,
) -> None:
    rows = _rows(path)
    ok = [r for r in rows if r.get("status") == "ok"]
    assert ok, path
    labelled = 0
    for r in ok:
        b = B.classify(r, rows)
        if b is None:
            continue
        labelled += 1
        assert _earns(b.kind, r), (r["model"], r["device"], r["batch_size"], b)
    assert labelled, path  # a check never passes on nothing


def test_the_old_labels_broke_the_rule() -> None:
    """The labels the published rows recorded (intensity against the ridge) named memory- and
    compute-bound under a third of that roof: the test above fails on them."""
    wrong = [
        r
        for path in H100 + CPU
        for r in _rows(path)
        if r.get("status") == "ok" and not _earns(r.get("bottleneck"), r)
    ]
    assert {r["bottleneck"] for r in wrong} == {"memory", "compute"}
    # H100 cnn/small: "memory-bound" at 7% of the bandwidth roof, 0.6% of the matmul roof
    assert any(r["model"] == "cnn" and r["device"] == "cuda" for r in wrong)


def test_the_h100_mlp_small_is_launch_bound_with_the_overhead_levers() -> None:
    """results/20261125-h100-quick: mlp/small's step time stays at 2.2-2.6 ms from B=4 to
    B=65536 in bf16: a fixed per-step cost, whatever fraction of the bandwidth roof the largest
    batch reaches (49-55%); its verdict offers the CUDA graph."""
    rows = _rows(H100[0])
    bf16 = [
        r
        for r in rows
        if r["model"] == "mlp" and r["device"] == "cuda" and r["precision"] == "bf16"
    ]
    assert len(bf16) >= 20
    kinds = {r["batch_size"]: B.classify(r, rows) for r in bf16}
    assert {None if b is None else b.kind for b in kinds.values()} == {"launch"}
    largest = kinds[65536]
    assert largest is not None
    assert "from B=4 to B=65536: a fixed per-step cost" in largest.evidence
    assert "54.8% of the bandwidth roof" in largest.evidence
    found = [v for v in verdicts(load_results(H100[0].parent)) if v.model.startswith("mlp")]
    assert found
    for v in found:
        assert v.bottleneck == "launch", (v.model, v.fastest, v.evidence)
        assert any("CUDA graph" in line for line in v.levers), v.levers


BASE = {
    "status": "ok",
    "model": "mlp",
    "device": "cuda",
    "precision": "bf16",
    "optimizer": "sgd",
    "data": "device",
    "peak_tflops": 800.0,
    "peak_bandwidth_gb_per_s": 3000.0,
}


def _point(step_ms: float, batch: int, tflops: float, gb_per_s: float) -> dict[str, Any]:
    """A row busy all its step at `tflops` and `gb_per_s`."""
    profile = {"category_s": {"matmul": 1.0}, "busy_s": step_ms / 1e3}
    return BASE | {
        "batch_size": batch,
        "step_time_s": step_ms / 1e3,
        "tflops": tflops,
        "achieved_gb_per_s": gb_per_s,
        "profile": profile,
    }


def _series(
    times_ms: list[float], batches: list[int], flop_per_sample: float, byte_per_sample: float
) -> list[dict[str, Any]]:
    """One configuration at several batches: its FLOPs and bytes per sample over each step."""
    return [
        _point(t, b, flop_per_sample * b / (t / 1e3) / 1e12, byte_per_sample * b / (t / 1e3) / 1e9)
        for t, b in zip(times_ms, batches, strict=True)
    ]


def test_a_step_that_does_not_grow_with_the_batch_is_overhead_bound() -> None:
    # H100 mlp/small bf16: at B=65536, 29% of the matmul roof and 55% of the bandwidth roof:
    # by the roofs alone "memory"; at B=4 the same step time, far under both roofs
    rows = _series([2.39, 2.30, 2.24], [4, 1024, 65536], 7.86e6, 5.64e4)
    alone = B.classify(rows[-1])
    assert alone is not None and alone.kind == "memory"
    judged = B.classify(rows[-1], rows)
    assert judged is not None and judged.kind == "launch", judged
    assert judged.evidence.startswith(
        "step time 2.39 -> 2.24 ms (x0.937) from B=4 to B=65536: a fixed per-step cost"
    )
    assert "overhead-bound at B=4" in judged.evidence
    assert "55% of the bandwidth roof" in judged.evidence
    # the step time grows with the batch: the work, not a fixed cost, sets it
    grows = _series([2.39, 40.0], [4, 65536], 1.4e8, 1.0e6)
    kept = B.classify(grows[-1], grows)
    assert kept is not None and kept.kind == "memory", kept
    assert "(batch x16,384): a fixed per-step cost holds about 5.97% of the step" in kept.evidence
    # H100 cnn/small bf16 B=512: 5.41 -> 7.4 ms over x128: about 73% of the step is fixed
    cnn = _series([5.41, 7.4], [4, 512], 7.37e7, 2.96e6)
    fixed = B.classify(cnn[-1], cnn)
    assert fixed is not None and fixed.kind == "launch", fixed
    assert "a fixed per-step cost (about 72.9% of the step" in fixed.evidence
    # the smallest batch of a series has nothing to grow from
    first = B.classify(rows[0], rows)
    assert first is not None and "step time" not in first.evidence


def test_a_fixed_cost_that_is_device_work_is_not_overhead() -> None:
    """CPU mlp/small bf16 AdamW (results/20261123-cpu-quick-confirmed): 7.70 -> 9.57 ms from
    B=4 to B=64, yet at B=4 already 64% of the bandwidth roof: the optimizer's update moves
    the same bytes at every batch. Memory-bound, not overhead."""
    rows = [
        r
        for r in _rows(CPU[0])
        if (r["model"], r["precision"], r["optimizer"]) == ("mlp", "bf16", "adamw")
    ]
    (b64,) = [r for r in rows if r["batch_size"] == 64]
    judged = B.classify(b64, rows)
    assert judged is not None and judged.kind == "memory", judged
    assert "a fixed per-step cost (about 79.3% of the step" in judged.evidence


def test_far_under_both_roofs_is_overhead_between_is_mixed() -> None:
    def kind(tflops: float, gb_per_s: float) -> str | None:
        b = B.classify(_point(2.0, 64, tflops, gb_per_s))
        return None if b is None else b.kind

    assert kind(8.0, 60.0) == "launch"  # 1% and 2%
    assert kind(8.0, 210.0) == "mixed"  # 7% of the bandwidth roof: not far under both
    assert kind(8.0, 1050.0) == "memory"  # over a third of it
    assert kind(280.0, 60.0) == "compute"  # over a third of the matmul roof
    assert kind(280.0, 1080.0) == "mixed"  # over a third of both, within the band


def _recalibrated(row: dict[str, Any], factor: float) -> dict[str, Any]:
    """`row` as another calibration of its machine would have read it: the bandwidth roof
    `factor` times the one measured (the ridge moves by 1 / factor)."""
    bw = row.get("peak_bandwidth_gb_per_s")
    return row if bw is None else row | {"peak_bandwidth_gb_per_s": bw * factor}


# Pairs of labels that one operating point must never read under two calibrations.
APART = [{"memory", "compute"}, {"launch", "memory"}, {"launch", "compute"}]


# The published files whose rows carry a bandwidth roof (older ones have none to move).
CALIBRATED = [H100[0], *H100[4:], CPU[0]]


@pytest.mark.parametrize("path", CALIBRATED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_label_does_not_flip_between_two_calibrations_of_one_machine(path: Path) -> None:
    """Two calibrations within the spread measured on one machine (an H100: RIDGE_SPREAD; the
    2-core CPU: CPU_RIDGE_SPREAD) read one row as at most two neighbouring labels."""
    rows = _rows(path)
    compared = 0
    for r in rows:
        if r.get("status") != "ok" or r.get("peak_bandwidth_gb_per_s") is None:
            continue
        spread = B.CPU_RIDGE_SPREAD if r["device"] == "cpu" else B.RIDGE_SPREAD
        for pair in ((1.0, 1 + spread), (1 / (1 + spread), 1.0)):
            found = {B.classify(_recalibrated(r, f), rows) for f in pair}
            kinds = {None if b is None else b.kind for b in found}
            assert not any(apart <= kinds for apart in APART), (r["model"], r["batch_size"], found)
        compared += 1
    assert compared, path


def test_the_cpu_calibrations_of_one_host_that_flipped_now_agree() -> None:
    """cnn/small bf16 B=64 read compute-bound under one CPU calibration and memory-bound under
    another at the same intensity and speed; under either calibration now it reads the same or
    a neighbour, never compute against memory."""
    rows = _rows(CPU[0])
    cnn = [
        r
        for r in rows
        if r["model"] == "cnn" and r["precision"] == "bf16" and r["batch_size"] == 64
    ]
    assert cnn
    for r in cnn:
        ridge = B.ridge(r)
        assert ridge is not None
        at_34 = _recalibrated(r, ridge / 34.0)  # the other host's ridge, 34 FLOP/B
        kinds = {k.kind for k in (B.classify(r, rows), B.classify(at_34, rows)) if k}
        assert kinds != {"memory", "compute"}, kinds


def test_a_lever_measured_only_at_other_batches_is_found_for_a_copy_of_the_fastest() -> None:
    """/tmp default sweep, mlp/small sgd: fp32 B=512 the fastest, bf16 measured at B=4-128; the
    verdict passes a copy of the fastest row (its own figure), and the lever said "a lower
    precision (bf16): not measured" (the copy counted as a row at the same batch)."""
    from gpubench.config.spec import Point
    from gpubench.science.levers import no_help
    from gpubench.store.row import make_row

    def row(precision: str, batch: int, rate: float) -> dict[str, Any]:
        p = Point.of(
            {"model": "mlp", "model_size": "small", "device": "cpu", "optimizer": "sgd"}
            | {"precision": precision, "batch_size": batch}
        )
        return make_row(p, "ok", samples_per_s=rate, step_time_s=batch / rate)

    rows = [row("fp32", 256, 15000.0), row("fp32", 512, 17000.0), row("bf16", 128, 1300.0)]
    best = dict(rows[1])
    said = no_help("compute", best, rows, ["precision", "batch_size"])
    assert any(line.startswith("a lower precision (bf16): x0.0765") for line in said), said
