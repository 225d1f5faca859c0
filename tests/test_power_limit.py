"""The GPU power limit as an axis (issue 32): set through NVML for the point and restored after,
refused with the reason where it cannot be set (no permission, out of range, the CPU). NVML is
a fake here (monkeypatched); the real set and restore run through probes.nvml's own code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.harness import power_limit
from gpubench.probes import nvml
from gpubench.run.worker import run_point


class _NVMLError(Exception):
    pass


class _FakeNvml:
    """The few pynvml calls a power limit needs, on one GPU limited to 700 W (200-700 W)."""

    NVMLError = _NVMLError

    def __init__(self, allowed: bool = True) -> None:
        self.limit_mw = 700_000
        self.allowed = allowed
        self.set_calls: list[int] = []

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        return self.limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> tuple[int, int]:
        return (200_000, 700_000)

    def nvmlDeviceSetPowerManagementLimit(self, handle: Any, milliwatts: int) -> None:
        if not self.allowed:
            raise _NVMLError("Insufficient Permissions")
        self.set_calls.append(milliwatts)
        self.limit_mw = milliwatts


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> _FakeNvml:
    gpu = _FakeNvml()
    monkeypatch.setattr(nvml, "_nvml", lambda: gpu)
    monkeypatch.setattr(nvml, "unavailable_reason", lambda: None)
    monkeypatch.setattr(nvml, "_handle", lambda index: f"handle {index}")
    return gpu


def _point(device: str = "cuda:0", watts: int | None = 300) -> Point:
    return Point("mlp", "tiny", device, "fp32", "sgd", 4, power_limit_w=watts)


def test_the_limit_is_set_for_the_point_and_restored_after(fake: _FakeNvml) -> None:
    with power_limit.applied(_point()):
        assert fake.limit_mw == 300_000
    assert fake.limit_mw == 700_000 and fake.set_calls == [300_000, 700_000]


def test_the_limit_is_restored_when_the_point_fails(fake: _FakeNvml) -> None:
    with pytest.raises(ZeroDivisionError), power_limit.applied(_point(watts=450)):
        assert fake.limit_mw == 450_000
        _ = 1 / 0
    assert fake.limit_mw == 700_000


def test_no_limit_touches_nothing(fake: _FakeNvml) -> None:
    with power_limit.applied(_point(watts=None)):
        pass
    assert fake.set_calls == []


def test_without_permission_the_point_is_refused_with_the_reason(fake: _FakeNvml) -> None:
    fake.allowed = False
    with pytest.raises(power_limit.Refused) as e, power_limit.applied(_point()):
        pytest.fail("the block must not run under a limit it did not get")
    assert "Insufficient Permissions" in str(e.value) and "needs root" in str(e.value)
    assert fake.limit_mw == 700_000


def test_a_limit_outside_the_cards_range_is_refused_before_setting(fake: _FakeNvml) -> None:
    refused = pytest.raises(power_limit.Refused, match="outside this GPU's 200-700 W")
    with refused, power_limit.applied(_point(watts=900)):
        pass
    assert fake.set_calls == []


def test_a_cpu_point_with_a_limit_is_an_unsupported_row_with_the_reason() -> None:
    row = run_point(_point("cpu", 300), Budget.fixed(2, 1))
    assert row["status"] == "unsupported" and row["power_limit_w"] == 300
    assert "a GPU's limit, set through NVML; the cpu has none" in row["error"]


def test_power_limit_is_an_axis_of_the_sweep(tmp_path: Path) -> None:
    spec = SweepSpec("s", ("mlp",), devices=("cpu",), batch_sizes=(4,), power_limit=(None, 300))
    assert [p.power_limit_w for p in spec.points()] == [None, 300]
    assert spec.points()[1].label().endswith("B=4 300 W")
    suite = tmp_path / "s.toml"
    suite.write_text('models = ["mlp"]\npower_limit = [300, 500, "none"]\n')
    assert load_suite(suite).power_limit == (300, 500, None)
    suite.write_text('models = ["mlp"]\npower_limit = [0]\n')
    with pytest.raises(ConfigError, match="invalid power limit in watts 0"):
        load_suite(suite)


def test_a_parallel_point_with_a_limit_is_refused_not_measured_without_it() -> None:
    from gpubench.harness.parallel import unsupported_reason

    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4, parallel="ddp", nproc=2)
    assert unsupported_reason(point) is None
    limited = Point(
        "mlp", "tiny", "cpu", "fp32", "sgd", 4, parallel="ddp", nproc=2, power_limit_w=300
    )
    assert "single-process points only" in (unsupported_reason(limited) or "")
