"""The NVML sampler's logic against injected readings, and the path where NVML is missing."""

from __future__ import annotations

import threading
import warnings

import gpu_alone
import pytest

from gpubench.probes import nvml, nvml_readings
from gpubench.probes.nvml import Sampler
from gpubench.probes.nvml_readings import Reading, summarise


def _readings(energy: list[float | None], power: list[float | None]) -> list[Reading]:
    return [
        Reading(
            t_s=10.0 + i * 0.5,
            used_bytes=1000 + 10 * i,
            process_used_bytes=900 + 10 * i,
            power_w=p,
            energy_j=e,
            util_pct=50.0 + i,
            sm_clock_mhz=1500.0,
            temperature_c=60.0 + (i % 2),
            throttle_reasons=0x4 if i == 1 else 0,
        )
        for i, (e, p) in enumerate(zip(energy, power, strict=True))
    ]


def test_no_energy_where_neither_method_can_bound_it() -> None:
    # Too few readings to time the counter's updates, or to bound the power integral: no
    # energy, and the reason of each method.
    s = summarise(_readings([100.0, 150.0, 200.0], [100.0, 100.0, 100.0]))
    assert s.energy_method is None and s.energy_j is None
    assert s.energy_note is not None and "error bound" in s.energy_note
    assert "too few" in s.energy_note
    assert s.avg_power_w == pytest.approx(100.0)
    assert s.duration_s == pytest.approx(1.0) and s.sample_hz == pytest.approx(2.0)
    assert s.peak_used_bytes == 1020 and s.peak_process_used_bytes == 920
    assert s.util_pct == pytest.approx(51.0) and s.temperature_c == 61.0
    assert s.throttle_reasons == "sw_power_cap"


def test_energy_integrates_power_without_a_counter() -> None:
    power = [200.0 + (5.0 if i % 2 else -5.0) for i in range(12)]  # 0.5 s apart
    s = summarise(_readings([None] * 12, power))
    assert s.energy_method == "power_integral" and s.energy_note is None
    assert s.energy_j == pytest.approx(200.0 * 5.5)  # each gap's trapezoid is 0.5 s x 200 W
    assert s.avg_power_w == pytest.approx(200.0)
    # its bound: 3 sigma, sigma^2 half the mean squared step (10 W), weights 0.25, 10 x 0.5, 0.25
    sigma = (10.0**2 / 2) ** 0.5
    bound = 3 * sigma * (2 * 0.25**2 + 10 * 0.5**2) ** 0.5 / s.energy_j
    assert s.energy_error_rel == pytest.approx(bound)


def test_a_counter_that_did_not_move_is_not_a_zero_energy() -> None:
    s = summarise(_readings([100.0, 100.0, 100.0], [80.0, 80.0, 80.0]))
    assert s.energy_method is None and s.energy_j is None
    assert s.energy_note is not None and "moved 0 time(s)" in s.energy_note
    none = summarise(_readings([None, None, None], [None, None, None]))
    assert none.energy_j is None and none.energy_method is None and none.avg_power_w is None


def test_throttle_reason_names() -> None:
    assert nvml_readings.throttle_names(0) == "none"
    assert nvml_readings.throttle_names(0x4 | 0x40) == "sw_power_cap,hw_thermal_slowdown"
    assert nvml_readings.throttle_names(0x10000) == "0x10000"


def test_sampler_reads_on_entry_on_its_thread_and_on_exit() -> None:
    main = threading.get_ident()
    threads: list[int] = []
    step = threading.Event()
    count = 0

    def read() -> Reading:
        nonlocal count
        count += 1
        threads.append(threading.get_ident())
        if count >= 4:
            step.set()
        return Reading(t_s=float(count), power_w=100.0, energy_j=10.0 * count, used_bytes=count)

    with Sampler(read, interval_s=0.001) as sampler:
        assert step.wait(timeout=30)  # the thread has read at least three times
    assert threads[0] == main and threads[-1] == main
    assert any(t != main for t in threads[1:-1])
    summary = sampler.summary
    assert summary is not None and summary.samples == len(threads) >= 5
    assert summary.peak_used_bytes == len(threads)


def test_sampler_raises_what_its_reading_function_raised() -> None:
    calls = 0
    failed = threading.Event()

    def read() -> Reading:
        nonlocal calls
        calls += 1
        if calls > 1:
            failed.set()
            raise OSError("device fell off the bus")
        return Reading(t_s=0.0)

    with pytest.raises(RuntimeError, match="fell off the bus"), Sampler(read, 0.001):
        assert failed.wait(timeout=30)


def test_default_interval_is_100_hz() -> None:
    # the rate the sampler's grid keeps (test_sampler_grid); the H100's reading takes 4-8 ms
    assert round(1 / nvml.DEFAULT_INTERVAL_S) == 100


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> str:
    reason = "NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    monkeypatch.setattr(nvml, "_state", {"module": None, "reason": reason})
    return reason


def test_missing_nvml_is_a_reason_and_one_warning_not_a_crash(no_nvml: str) -> None:
    assert nvml.unavailable_reason() == no_nvml
    assert nvml.system_info() == {"available": False, "reason": no_nvml}
    with pytest.warns(nvml.NvmlWarning, match="Library Not Found") as caught:
        assert nvml.warn_if_unavailable(["cpu", "cuda"]) == no_nvml
    assert len(caught) == 1
    with pytest.raises(RuntimeError, match="NVML unavailable"):
        nvml.Device(0)


def test_nvml_here_answers_or_says_why() -> None:
    reason = nvml.unavailable_reason()
    info = nvml.system_info()
    assert info["available"] == (reason is None)
    if reason is None:
        assert info["driver_version"]
    else:
        with warnings.catch_warnings(record=True):
            assert nvml.warn_if_unavailable(["cuda"]) == reason


def test_missing_nvml_is_silent_where_no_cuda_device_is_asked_for(no_nvml: str) -> None:
    """A CPU-only sweep on a machine without an NVIDIA driver: no row has NVML fields, so no
    warning (issue 30: every sweep there started with one); the reason is still returned."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        assert nvml.warn_if_unavailable(["cpu"]) == no_nvml
        assert nvml.warn_if_unavailable([]) == no_nvml
    with pytest.warns(nvml.NvmlWarning):
        nvml.warn_if_unavailable(["cpu", "cuda:1"])


@pytest.mark.gpu
def test_real_nvml_sampler_keeps_its_rate(request: pytest.FixtureRequest) -> None:
    import time

    import torch

    if nvml.unavailable_reason() is not None:
        pytest.skip(nvml.unavailable_reason())
    if gpu_alone.workers(request.config) > 1:
        # its rate beside other workers' samplers and points is their load's (tests/gpu_alone.py)
        pytest.skip("a real sampler's rate is measured with the GPU to itself: pytest -m gpu")
    device = nvml.Device(torch.cuda.current_device())
    with Sampler(device.read) as sampler:
        time.sleep(1.0)
    s = sampler.summary
    # one reading per slot over 1 s, the first and last on entry and exit: 101 readings at
    # most; a reading that overran its slot skips one, so 90% of the rate is the floor
    assert s is not None and s.sample_hz is not None
    assert s.sample_hz >= 0.9 / nvml.DEFAULT_INTERVAL_S
    assert s.peak_used_bytes and s.avg_power_w and s.avg_power_w > 0


class FakeNvml:
    """A stand-in for pynvml: an H100-like device whose process list shows this process, and
    that does not support the total-energy counter."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0
    nvmlMemory_v2 = 0x02000028

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def nvmlDeviceGetMemoryInfo(self, handle: object, version: int | None = None) -> object:
        used = 5 * 2**30 if version else 6 * 2**30  # v2 leaves out reserved memory
        return type("Mem", (), {"used": used, "total": 80 * 2**30})()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list[object]:
        proc = type("Proc", (), {})
        other, me = proc(), proc()
        other.pid, other.usedGpuMemory = self.pid + 1, 2**30
        me.pid, me.usedGpuMemory = self.pid, 3 * 2**30
        return [other, me]

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        return 350_000  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> object:
        return type("Util", (), {"gpu": 97})()

    def nvmlDeviceGetClockInfo(self, handle: object, clock: int) -> int:
        return 1980

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> int:
        return 0x4


def test_device_reads_what_the_gpu_supports_in_si_units(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    fake = FakeNvml(os.getpid())
    monkeypatch.setattr(nvml, "_state", {"module": fake, "reason": None})
    monkeypatch.setattr(nvml, "_handle", lambda index: f"handle{index}")
    device = nvml.Device(0)
    assert device.memory_info_version == "v2" and not device.energy_counter
    assert "energy_j" not in device.supported()
    r = device.read()
    assert r.used_bytes == 5 * 2**30 and r.process_used_bytes == 3 * 2**30
    assert r.power_w == 350.0 and r.energy_j is None and r.util_pct == 97.0
    assert r.sm_clock_mhz == 1980.0 and r.temperature_c == 61.0 and r.throttle_reasons == 0x4
    with Sampler(device.read, interval_s=0.001) as sampler:
        pass
    assert sampler.summary is not None and sampler.summary.throttle_reasons == "sw_power_cap"
    fake.pid = -1  # another PID namespace: this process is not in NVML's list
    assert nvml.Device(0).read().process_used_bytes is None
