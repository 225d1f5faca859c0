"""Issue 21, item 4: the bottleneck rules are not decided by the probes' own cost. Synthetic
rows: the figures are the audit's."""

from __future__ import annotations

from typing import Any

from gpubench.science import bottleneck as B

# ridge 100 FLOP/B; 10% of the matmul roof
ROOF = {"tflops": 10.0, "peak_tflops": 100.0, "peak_bandwidth_gb_per_s": 1000.0}


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
    assert "24% of the median step" in B.classify(idle).evidence  # type: ignore[union-attr]


def test_a_step_far_under_both_roofs_is_overhead_bound_whatever_busy_says() -> None:
    """On the CPU an operator's self time includes the dispatcher's: busy 100%, yet 1% of the
    matmul roof and 2% of the bandwidth roof."""
    row = _row({"matmul": 0.8, "elementwise": 0.2}, busy_s=1e-3, step_s=1e-3, tflops=1.0)
    verdict = B.classify(row)
    assert verdict is not None and verdict.kind == "launch"
    assert "1.0% of the matmul roof and 2.0% of the bandwidth roof" in verdict.evidence
    # 10% of the bandwidth roof: not far under both
    assert B.classify(row | {"achieved_gb_per_s": 100.0}).kind == "compute"  # type: ignore[union-attr]


def test_the_products_share_counts_only_products() -> None:
    """matmul 10%, collective 60%: not "products 90%" (all that is not memory work)."""
    collective = _row(
        {"matmul": 0.1, "collective": 0.6, "elementwise": 0.3}, busy_s=1e-3, step_s=1e-3
    )
    collective["achieved_gb_per_s"] = 500.0
    assert B.classify(collective) is None  # products hold the least: no kind names that
    mixed = _row(
        {"matmul": 0.4, "conv": 0.2, "elementwise": 0.3, "other": 0.1}, busy_s=1e-3, step_s=1e-3
    )
    mixed["achieved_gb_per_s"] = 500.0
    verdict = B.classify(mixed)
    assert verdict is not None and verdict.kind == "compute"
    assert "products 60% of busy time (memory-bound work 30%, other 10%)" in verdict.evidence
