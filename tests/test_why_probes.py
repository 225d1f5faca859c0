"""Issue 15's probes on the CPU: the minimum-bytes counter (exact on known operators), the
profiler breakdown of a tiny real step, the bandwidth calibration and RAPL package energy."""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

import pytest
import torch

from gpubench import models
from gpubench.config.spec import Budget, Point
from gpubench.harness.observation import SLOW_STEP_S, profile_after
from gpubench.harness.point import measure_point
from gpubench.harness.step import prepare
from gpubench.harness.timing import Measurement, Stats
from gpubench.probes import bandwidth, rapl
from gpubench.probes.profile import CATEGORIES, category_of, profile_steps
from gpubench.probes.step_count import CountStep

F32 = 4


def _count(fn) -> int:  # type: ignore[no-untyped-def]
    with torch.no_grad(), CountStep() as c:
        fn()
    assert c.result is not None
    return c.result.bytes.total


def test_bytes_of_a_matmul_are_both_operands_and_the_product() -> None:
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    assert _count(lambda: a @ b) == F32 * (8 * 16 + 16 * 4 + 8 * 4)


def test_bytes_of_a_convolution_are_input_weight_bias_and_output() -> None:
    x, conv = torch.randn(2, 3, 8, 8), torch.nn.Conv2d(3, 5, 3)
    out = 2 * 5 * 6 * 6
    assert _count(lambda: conv(x)) == F32 * (x.numel() + 5 * 3 * 3 * 3 + 5 + out)


def test_bytes_of_an_elementwise_op_read_each_tensor_once_and_views_move_nothing() -> None:
    a, b = torch.randn(100), torch.randn(100)
    assert _count(lambda: a + b) == 3 * 100 * F32
    assert _count(lambda: a + a) == 2 * 100 * F32  # one tensor passed twice is read once
    assert _count(lambda: a.view(10, 10).t()) == 0
    expanded = torch.randn(1, 100).expand(50, 100)  # stores 100 elements, not 5000
    assert _count(lambda: expanded.exp()) == (100 + 5000) * F32


def test_category_of_operator_and_autograd_names() -> None:
    assert category_of("aten::addmm") == "matmul"
    assert category_of("autograd::engine::evaluate_function: AddmmBackward0") == "matmul"
    assert category_of("aten::convolution_backward") == "conv"
    assert category_of("aten::native_layer_norm") == "norm"
    assert category_of("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention"
    assert category_of("aten::nll_loss_forward") == "loss_reduction"
    assert category_of("aten::_foreach_mul_") == "optimizer"
    assert category_of("aten::copy_") == "copy"
    assert category_of("aten::gelu") == "elementwise"
    assert category_of("aten::empty") == "other"
    assert category_of("ncclDevKernel_AllReduce_Sum_f32") == "collective"


def test_profile_of_a_tiny_step_attributes_its_time_by_category() -> None:
    point = Point("mlp", "tiny", "cpu", "fp32", "adamw", 8)
    prepared = prepare(point, models.build("mlp", "tiny"))
    prof = profile_steps(prepared.step, torch.device("cpu"), steps=2)
    assert set(prof.category_s) == set(CATEGORIES)
    for cat in ("matmul", "loss_reduction", "optimizer"):
        assert prof.category_s[cat] > 0, cat
    assert prof.category_s["conv"] == 0 and prof.category_s["attention"] == 0
    assert sum(prof.category_s.values()) == pytest.approx(prof.busy_s)
    assert 0 < prof.busy_s <= prof.step_time_s
    assert prof.dispatch_s is None  # on the CPU dispatch is not told apart from the work
    assert prof.top_ops and all(s > 0 for _, s in prof.top_ops)


def test_row_carries_the_breakdown_roofline_and_no_profile_when_off() -> None:
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 8)
    budget = dataclasses.replace(Budget.fixed(30, 1), profile_steps=2)
    bandwidth.memory_bandwidth("cpu")  # a sweep calibrates it at its start; a point only reads it
    row = measure_point(point, budget)
    slow = row["step_time_s"] >= SLOW_STEP_S  # a busy machine: a slow step is profiled once
    assert row["profile"]["steps"] == (1 if slow else 2)
    assert 0 < row["busy_fraction"] <= 1
    assert row["top_category"] in CATEGORIES
    assert row["bytes_per_step"] > 0
    assert row["intensity_flop_per_byte"] == pytest.approx(
        row["flops_per_step"] / row["bytes_per_step"]
    )
    assert row["peak_bandwidth_gb_per_s"] > 0
    off = measure_point(point, dataclasses.replace(budget, profile_steps=0))
    assert off.get("profile") is None and off["busy_fraction"] is None
    assert off["bytes_per_step"] == row["bytes_per_step"]  # counted on the warm-up step anyway


def _measured(step_s: float, steps: int, warmup_s: float) -> Measurement:
    times = [step_s] * steps
    return Measurement(2, warmup_s, times, sum(times), Stats.of(times), False, [], "perf_counter")


def test_profiling_is_skipped_where_it_would_cost_more_than_its_share() -> None:
    calls: list[int] = []
    step, cpu, budget = (lambda: calls.append(1)), torch.device("cpu"), Budget(profile_steps=1)
    # 1 s steps, 0.5 s of warm-up and 3 s of windows: one more step would add 29%.
    skipped = profile_after(step, cpu, budget, _measured(1.0, 3, 0.5))
    assert isinstance(skipped, str) and skipped.startswith("skipped: 1 step(s) of 1.00 s")
    assert not calls
    # 10 ms steps over 2 s: one more step adds 0.5%.
    assert profile_after(step, cpu, budget, _measured(0.01, 200, 0.1)) is not None and calls
    assert profile_after(step, cpu, Budget(profile_steps=0), _measured(0.01, 200, 0.1)) is None


def test_bandwidth_is_measured_once_then_served_from_the_cache() -> None:
    bandwidth.clear_memo()
    first = bandwidth.memory_bandwidth("cpu", refresh=True)
    assert first.gb_per_s > 0 and first.source == "measured"
    bandwidth.clear_memo()
    again = bandwidth.memory_bandwidth("cpu")
    assert again.source == "cache" and again.gb_per_s == first.gb_per_s


def _domain(root: Path, name: str, label: str, uj: int, wrap: int) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(label + "\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{wrap}\n")
    return d


def test_rapl_sums_packages_and_handles_a_wrapped_counter(tmp_path: Path) -> None:
    p0 = _domain(tmp_path, "intel-rapl:0", "package-0", 1_000_000, 10_000_000)
    p1 = _domain(tmp_path, "intel-rapl:1", "package-1", 9_500_000, 10_000_000)
    _domain(tmp_path, "intel-rapl:0:0", "core", 0, 10_000_000)  # a subzone: not counted
    assert rapl.unavailable_reason(tmp_path) is None
    with rapl.PackageEnergy(tmp_path) as energy:
        (p0 / "energy_uj").write_text("3000000\n")  # +2 J
        (p1 / "energy_uj").write_text("500000\n")  # wrapped: +1 J
    assert energy.joules == pytest.approx(3.0)


def test_rapl_is_null_with_a_reason_where_the_machine_has_none(tmp_path: Path) -> None:
    missing = tmp_path / "powercap"
    assert "does not exist" in (rapl.unavailable_reason(missing) or "")
    with rapl.PackageEnergy(missing) as energy:
        pass
    assert energy.joules is None


def test_kineto_notices_stay_off_the_terminal_and_other_lines_stay_on(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from gpubench.probes.profile import _without_kineto_notices

    with _without_kineto_notices():
        os.write(2, b"USDT:2026-11-22 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a real warning\n")
    profile_steps(lambda: torch.ones(8).sum(), torch.device("cpu"), 1)
    assert capfd.readouterr().err == "a real warning\n"
    # torch 2.10-2.11's notice at every profile (as torch 2.11 words it), not another warning
    notice = (
        "Warning: Profiler clears events at the end of each cycle.Only events from the current "
        "cycle will be reported.To keep events across cycles, set acc_events=True."
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with _without_kineto_notices():
            warnings.warn(notice, UserWarning, stacklevel=1)
            warnings.warn("another warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["another warning"]


def test_views_the_schema_does_not_flag_move_no_bytes() -> None:
    """`_unsafe_view` (matmul's and reshape's), `_reshape_alias` and `alias` return their input's
    storage: they move nothing. In-place work on that storage still counts."""
    a = torch.randn(100)
    assert _count(lambda: torch.ops.aten._unsafe_view(a, (10, 10))) == 0
    assert _count(lambda: torch.ops.aten._reshape_alias(a, (10, 10), (10, 1))) == 0
    assert _count(lambda: torch.ops.aten.alias(a)) == 0
    assert _count(lambda: a.add_(1.0)) == 2 * 100 * F32
    assert _count(lambda: a.t().reshape(-1)) == 0  # a 1-d tensor reshapes as a view


def test_views_are_not_copies_and_broadcast_tensors_is_not_a_collective() -> None:
    assert category_of("aten::broadcast_tensors") != "collective"
    assert category_of("aten::_unsafe_view") == "other"
    for name in ("c10d::allreduce_", "c10d::broadcast_", "gloo:all_reduce", "record_param_comms"):
        assert category_of(name) == "collective", name
    assert category_of("ncclDevKernel_Broadcast_RING_LL") == "collective"


def test_a_real_profile_files_every_view_under_other_whoever_calls_it() -> None:
    from torch.profiler import ProfilerActivity, profile

    from gpubench.probes.profile import _category
    from gpubench.probes.profile_events import read

    x, w = torch.randn(4, 8, 16), torch.randn(16, 16)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ w).transpose(1, 2).reshape(-1).clone()  # matmul's _unsafe_view, reshape's copy
    events = read(prof.profiler.kineto_results)
    views = [e for e in events if e.name in ("aten::_unsafe_view", "aten::view")]
    assert views
    assert {_category(e) for e in views} == {"other"}


def test_bytes_are_counted_on_a_steady_step_not_the_one_that_creates_state() -> None:
    """AdamW's first step creates its moments (`zeros_like`): +26% bytes on mlp/small B=4."""
    point = Point("mlp", "tiny", "cpu", "fp32", "adamw", 4)
    row = measure_point(point, dataclasses.replace(Budget.fixed(6, 3), profile_steps=0))
    torch.manual_seed(point.seed)
    prepared = prepare(point, models.build("mlp", "tiny"))
    prepared.step()  # creates the optimizer's state
    inputs, targets = prepared.batches.next()
    with CountStep() as steady:
        prepared.trainer.step(inputs, targets)
    assert steady.result is not None
    assert not any("zeros_like" in op for op in steady.result.bytes.by_operator)
    assert row["bytes_per_step"] == steady.result.bytes.total


def test_busy_fraction_is_against_the_unprofiled_median_step() -> None:
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4)
    row = measure_point(point, dataclasses.replace(Budget.fixed(30, 1), profile_steps=2))
    prof = row["profile"]
    assert row["profile_step_time_s"] == prof["step_time_s"]  # recorded, out of the fraction
    assert row["busy_fraction"] == pytest.approx(min(prof["busy_s"] / row["step_time_s"], 1.0))
