"""Issue 21, item 4: the bottleneck rules are not decided by the probes' own cost. Synthetic
rows: the figures are the audit's."""

from __future__ import annotations

from typing import Any

from gpubench.science import bottleneck as B

# ridge 100 FLOP/B; 50% of the matmul roof
ROOF = {"tflops": 50.0, "peak_tflops": 100.0, "peak_bandwidth_gb_per_s": 1000.0}


def _row(shares: dict[str, float], busy_s: float, step_s: float, **values: Any) -> dict[str, Any]:
    return {
        "status": "ok",
        "data": "device",
        **ROOF,
        "intensity_flop_per_byte": 500.0,
        "achieved_gb_per_s": 20.0,  # 2% of the bandwidth roof
        "step_time_s": step_s,
        "profile": {"category_s": shares, "busy_s": busy_s, "step_time_s": 5.5e-3},
        **values,
    }


def test_busy_is_taken_against_the_unprofiled_median_step() -> None:
    """mlp B=4, one thread: median step 0.21 ms, profiled step 5.5 ms, busy 0.56 ms. Against
    the profiled step the device looked busy 10% of it: "launch-bound"."""
    row = _row({"matmul": 0.8, "elementwise": 0.2}, busy_s=0.56e-3, step_s=0.21e-3)
    row["busy_fraction"] = 0.56 / 5.5  # what the row used to carry
    assert B.busy_fraction(row) == (1.0, True)
    verdict = B.classify(row)
    assert verdict is not None and verdict.kind == "compute", verdict
    assert "capped" in verdict.evidence
    idle = _row({"matmul": 1.0}, busy_s=0.05e-3, step_s=0.21e-3)
    assert B.classify(idle).kind == "launch"  # type: ignore[union-attr]
    assert "23.8% of the median step" in B.classify(idle).evidence  # type: ignore[union-attr]


def test_a_step_far_under_both_roofs_is_overhead_bound_whatever_busy_says() -> None:
    """On the CPU an operator's self time includes the dispatcher's: busy 100%, yet 1% of the
    matmul roof and 2% of the bandwidth roof."""
    row = _row({"matmul": 0.8, "elementwise": 0.2}, busy_s=1e-3, step_s=1e-3, tflops=1.0)
    verdict = B.classify(row)
    assert verdict is not None and verdict.kind == "launch"
    assert "1% of the matmul roof" in verdict.evidence
    assert "2% of the bandwidth roof" in verdict.evidence
    # 10% of the bandwidth roof: not far under both, and under a third of both: no one roof
    # binds (issue 41: never "compute" at 1% of the matmul roof)
    assert B.classify(row | {"achieved_gb_per_s": 100.0}).kind == "mixed"  # type: ignore[union-attr]


def test_under_a_third_of_both_roofs_the_profile_is_quoted_not_a_label() -> None:
    """Issue 41: at 10% of the matmul roof and 5% of the bandwidth roof the products' share of
    the busy time names no roof; the label is mixed, the profile's split quoted."""
    mixed = _row(
        {"matmul": 0.4, "conv": 0.2, "elementwise": 0.3, "other": 0.1},
        busy_s=1e-3,
        step_s=1e-3,
        tflops=10.0,
        achieved_gb_per_s=50.0,
    )
    verdict = B.classify(mixed)
    assert verdict is not None and verdict.kind == "mixed"
    assert "products 60%, memory-bound work 30%, other 10%" in verdict.evidence
    assert "10% of the matmul roof" in verdict.evidence


# --- issue 28: near the ridge the class is "mixed", not a coin flip ---------------------------


def _at(intensity_over_ridge: float, roof_fraction: float) -> dict[str, Any]:
    """A fully busy step at `roof_fraction` of the matmul roof, its intensity
    `intensity_over_ridge` x the ridge (100 FLOP/B): the bytes it moves follow from both
    (achieved GB/s = TFLOP/s / intensity)."""
    intensity = 100.0 * intensity_over_ridge
    tflops = 100.0 * roof_fraction
    return _row(
        {"matmul": 0.7, "elementwise": 0.3},
        busy_s=1e-3,
        step_s=1e-3,
        tflops=tflops,
        intensity_flop_per_byte=intensity,
        achieved_gb_per_s=tflops * 1e3 / intensity,
    )


def _kind(row: dict[str, Any]) -> str | None:
    verdict = B.classify(row)
    return None if verdict is None else verdict.kind


def test_the_mixed_band_is_the_margin_on_either_side_of_the_ridge() -> None:
    m = B.MIXED_MARGIN
    for ratio in (1 / (1 + m), 0.99, 1.0, 1.01, 1 + m):  # both ends belong to the band
        verdict = B.classify(_at(ratio, 0.5))
        assert verdict is not None and verdict.kind == "mixed", ratio
        assert f"within x{1 + m:.3g} of each other" in verdict.evidence
        assert "ridge 100" in verdict.evidence
    assert _kind(_at(1 / (1 + m) * 0.999, 0.5)) == "memory"
    assert _kind(_at((1 + m) * 1.001, 0.5)) == "compute"


def test_under_the_band_is_memory_whatever_the_roof_fraction() -> None:
    # the H100's flip: one operating point at 50.2% and at 49.8% of the matmul roof, its
    # intensity 0.93 of the ridge: "compute" and "memory" before issue 28, "memory" both now
    under = 0.93
    assert {_kind(_at(under, f)) for f in (0.498, 0.502, 0.9)} == {"memory"}
    # a hair under the band: memory; a hair inside it: mixed
    edge = 1 / (1 + B.MIXED_MARGIN)
    assert _kind(_at(edge * 0.995, 0.5)) == "memory"
    assert _kind(_at(edge * 1.005, 0.5)) == "mixed"


def test_over_the_band_the_roof_and_the_profile_decide() -> None:
    edge = 1 + B.MIXED_MARGIN
    assert _kind(_at(edge * 1.005, 0.6)) == "compute"  # at least half the matmul roof
    assert _kind(_at(edge * 0.995, 0.6)) == "mixed"
    # under a third of both roofs neither binds, whatever the profile's split (issue 41)
    assert _kind(_at(edge * 1.005, 0.3)) == "mixed"
    memory_work = _at(edge * 1.005, 0.3) | {
        "profile": {"category_s": {"matmul": 0.3, "elementwise": 0.7}, "busy_s": 1e-3}
    }
    assert _kind(memory_work) == "mixed"


def test_a_class_cannot_jump_the_band_within_the_measured_spread() -> None:
    # from the band's lower edge, the measured run-to-run spread (ridge and bytes) cannot reach
    # past its upper edge: one operating point reads at most two neighbouring classes
    run_to_run = B.RIDGE_SPREAD + B.INTENSITY_SPREAD
    low = 1 / (1 + B.MIXED_MARGIN) * 0.999  # just memory
    assert _kind(_at(low * (1 + run_to_run) ** 2, 0.9)) != "compute"


def test_a_mixed_step_gets_the_memory_and_the_compute_levers() -> None:
    from gpubench.science.levers import levers

    base = {"model": "transformer", "device": "cuda", "optimizer": "adamw", "compile": "eager"}
    best = base | {"precision": "fp32", "batch_size": 64, "samples_per_s": 100.0}
    bf16 = best | {"precision": "bf16", "samples_per_s": 180.0}
    lines, todo = levers("mixed", best, [best, bf16], [best, bf16], [])
    assert any(line.startswith("a lower precision (bf16): x1.80 the samples/s") for line in lines)
    assert any(line.startswith("torch.compile: not measured") for line in lines), lines
    # B=64 is the largest measured and the fastest: a larger batch raises the intensity too
    assert any(line.startswith("a larger batch") for line in lines)
    assert todo == "measure larger batches: --batch-sizes auto"
