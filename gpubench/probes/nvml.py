"""NVML: a GPU's memory, power, energy, utilisation, clocks, temperature and throttle reasons
(Device), read by probes.sampler in a process of its own (probes.sampler_process). The only module
that imports pynvml: where NVML is missing (package, driver or permission) `unavailable_reason()`
says why and every NVML field stays None; nothing here raises for that.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from gpubench.probes.nvml_readings import Reading
from gpubench.probes.sampler import DEFAULT_INTERVAL_S, Sampler

__all__ = ["DEFAULT_INTERVAL_S", "Device", "NvmlWarning", "Sampler"]


class NvmlWarning(UserWarning):
    """NVML is missing: the GPU memory, power and energy fields of the rows are null."""


# --- NVML itself -------------------------------------------------------------------------------

_state: dict[str, Any] = {}


def _nvml() -> Any:
    """The initialised pynvml module, or None (the reason is in `unavailable_reason()`)."""
    if "module" not in _state:
        try:
            import pynvml

            pynvml.nvmlInit()
            _state["module"], _state["reason"] = pynvml, None
        except ImportError:
            _state["module"], _state["reason"] = None, "nvidia-ml-py (pynvml) is not installed"
        except Exception as e:  # pynvml.NVMLError and its subclasses: no driver, no permission
            _state["module"], _state["reason"] = None, f"{type(e).__name__}: {e}"
    return _state["module"]


def unavailable_reason() -> str | None:
    """Why NVML cannot be used here (no package, no driver, no permission), or None."""
    _nvml()
    return _state["reason"]


def warn_if_unavailable(devices: Iterable[str]) -> str | None:
    """Warn (once per sweep) that NVML is missing and why, only where `devices` name a CUDA
    device (NVML fields exist only on CUDA rows); the reason, None where NVML works."""
    reason = unavailable_reason()
    if reason is not None and any(d.startswith("cuda") for d in devices):
        warnings.warn(
            f"NVML unavailable ({reason}): GPU memory, power, energy, utilisation, clock and "
            "temperature fields are null",
            NvmlWarning,
            stacklevel=2,
        )
    return reason


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """An NVML query, or None where this GPU or driver does not support it."""
    nvml = _nvml()
    try:
        return fn(*args, **kwargs)
    except nvml.NVMLError:
        return None


def _handle(cuda_index: int) -> Any:
    """The NVML handle of torch's CUDA device `cuda_index`: by UUID, else PCI bus id (immune to
    CUDA_VISIBLE_DEVICES reordering), else by index where CUDA_VISIBLE_DEVICES is unset."""
    import torch

    nvml = _nvml()
    props = torch.cuda.get_device_properties(cuda_index)
    uuid = str(getattr(props, "uuid", ""))
    handle = None
    if uuid:
        handle = _call(nvml.nvmlDeviceGetHandleByUUID, uuid if "-" in uuid[:4] else "GPU-" + uuid)
    if handle is None and hasattr(props, "pci_bus_id"):
        bus = (
            f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:"
            f"{getattr(props, 'pci_device_id', 0):02X}.0"
        )
        handle = _call(nvml.nvmlDeviceGetHandleByPciBusId_v2, bus)
    if handle is None and "CUDA_VISIBLE_DEVICES" not in os.environ:
        handle = nvml.nvmlDeviceGetHandleByIndex(cuda_index)
    if handle is None:
        raise RuntimeError(f"no NVML device matches CUDA device {cuda_index} (uuid {uuid})")
    return handle


class Device:
    """Reads one GPU through NVML. Which queries the GPU supports is found once, here, so a
    reading makes only calls that can answer."""

    def __init__(self, cuda_index: int, uuid: str | None = None, pid: int | None = None) -> None:
        """Torch's CUDA device `cuda_index`, or (without torch) NVML's `uuid`; process memory is
        `pid`'s (default: this process's)."""
        nvml = _nvml()
        if nvml is None:
            raise RuntimeError(f"NVML unavailable: {unavailable_reason()}")
        self.nvml = nvml
        self.handle = _handle(cuda_index) if uuid is None else nvml.nvmlDeviceGetHandleByUUID(uuid)
        self.pid = os.getpid() if pid is None else pid
        # Memory info v2 (its `used` leaves out memory the driver reserves), where the
        # driver and nvidia-ml-py have it.
        self._memory_v2 = getattr(nvml, "nvmlMemory_v2", None)
        v2 = self._memory_v2 is not None and _call(self._v2_info) is not None
        self.memory_info_version = "v2" if v2 else "v1"
        self.energy_counter = (
            _call(nvml.nvmlDeviceGetTotalEnergyConsumption, self.handle) is not None
        )
        instant = hasattr(nvml, "nvmlDeviceGetFieldValues") and _call(self._instant_power_w)
        self.power_reading = "instant" if instant else "average"
        self._queries: dict[str, Callable[[], Any]] = {}
        reasons = getattr(
            nvml,
            "nvmlDeviceGetCurrentClocksEventReasons",
            getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None),
        )
        # power and energy first: Device.read stamps the time before the queries
        candidates: dict[str, Callable[[], Any]] = {
            "power_w": self._power_w,
            "energy_j": lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1e3,
            "used_bytes": self._used,
            "util_pct": lambda: float(nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu),
            "sm_clock_mhz": lambda: float(
                nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM)
            ),
            "temperature_c": lambda: float(
                nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU)
            ),
        }
        if reasons is not None:
            candidates["throttle_reasons"] = lambda: int(reasons(self.handle))
        for name, query in candidates.items():
            if _call(query) is not None:
                self._queries[name] = query
        # Listed even when it has no figure yet: the process may show up once it allocates.
        if _call(nvml.nvmlDeviceGetComputeRunningProcesses, self.handle) is not None:
            self._queries["process_used_bytes"] = self._process_used

    def _instant_power_w(self) -> float:
        (field,) = self.nvml.nvmlDeviceGetFieldValues(
            self.handle, [self.nvml.NVML_FI_DEV_POWER_INSTANT]
        )
        if field.nvmlReturn != self.nvml.NVML_SUCCESS:
            raise self.nvml.NVMLError(field.nvmlReturn)
        return float(field.value.uiVal) / 1e3

    def _power_w(self) -> float:
        """Power draw in watts: the instantaneous reading where the driver has it. On Ampere
        and newer, nvmlDeviceGetPowerUsage is a one-second moving average, which lags a
        window that starts from idle and makes the power integral undershoot the energy."""
        if self.power_reading == "instant":
            return self._instant_power_w()
        return float(self.nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1e3

    def _v2_info(self) -> Any:
        try:
            return self.nvml.nvmlDeviceGetMemoryInfo(self.handle, version=self._memory_v2)
        except TypeError:  # an nvidia-ml-py without the version argument
            return None

    def _used(self) -> int:
        if self.memory_info_version == "v2":
            return int(self._v2_info().used)
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def _process_used(self) -> int | None:
        """This process's device memory; None where NVML lists it without a figure or under
        another PID (a container's PID namespace)."""
        for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
            if proc.pid == self.pid and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory)
        return None

    def uuid(self) -> str:
        """NVML's UUID of this GPU (what another process opens it by)."""
        value = self.nvml.nvmlDeviceGetUUID(self.handle)
        return value.decode() if isinstance(value, bytes) else str(value)

    def supported(self) -> list[str]:
        return list(self._queries)

    def read(self) -> Reading:
        """One reading, stamped as it starts: power and energy are queried first, so their time
        is the stamp's to within one query, not the reading's 4-8 ms (H100)."""
        t = time.perf_counter()
        values = {name: _call(query) for name, query in self._queries.items()}
        return Reading(t_s=t, **values)

    def info(self) -> dict[str, Any]:
        """Static facts for env.json: power limits (W), clocks (MHz), memory (bytes)."""
        nvml, h = self.nvml, self.handle
        mem = _call(nvml.nvmlDeviceGetMemoryInfo, h)
        power_limit = _call(nvml.nvmlDeviceGetPowerManagementLimit, h)
        enforced = _call(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
        return {
            "name": _call(nvml.nvmlDeviceGetName, h),
            "memory_total_bytes": None if mem is None else int(mem.total),
            "power_limit_w": None if power_limit is None else power_limit / 1e3,
            "enforced_power_limit_w": None if enforced is None else enforced / 1e3,
            "max_sm_clock_mhz": _call(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM),
            "max_memory_clock_mhz": _call(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM),
            "applications_sm_clock_mhz": _call(
                nvml.nvmlDeviceGetApplicationsClock, h, nvml.NVML_CLOCK_SM
            ),
            "sm_clock_mhz_now": _call(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
            "persistence_mode": _call(nvml.nvmlDeviceGetPersistenceMode, h),
            "memory_info_version": self.memory_info_version,
            "energy_counter": self.energy_counter,
            "power_reading": self.power_reading,
            "sampled_fields": self.supported(),
        }


def device_reader(uuid: str, pid: int) -> Callable[[], Reading]:
    """The reading function of the GPU with NVML `uuid`, for process `pid`'s memory: what the
    sampling process (probes.sampler_process) samples."""
    return Device(0, uuid=uuid, pid=pid).read


def system_info() -> dict[str, Any]:
    """NVML's availability (with the reason when missing) and the driver's versions."""
    nvml = _nvml()
    if nvml is None:
        return {"available": False, "reason": unavailable_reason()}
    return {
        "available": True,
        "reason": None,
        "driver_version": _call(nvml.nvmlSystemGetDriverVersion),
        "nvml_version": _call(nvml.nvmlSystemGetNVMLVersion),
        "cuda_driver_version": _call(nvml.nvmlSystemGetCudaDriverVersion_v2),
    }


# --- issue 32: the GPU power limit as an axis (harness.power_limit sets and restores it) -------


def _of_device(query: str, cuda_index: int) -> Any:
    """NVML's `query` of torch's CUDA device `cuda_index`, None where NVML cannot tell."""
    nvml = _nvml()
    return None if nvml is None else _call(getattr(nvml, query), _handle(cuda_index))


def power_limit_w(cuda_index: int) -> float | None:
    """The GPU's power management limit in watts, None where NVML cannot tell."""
    milliwatts = _of_device("nvmlDeviceGetPowerManagementLimit", cuda_index)
    return None if milliwatts is None else milliwatts / 1e3


def power_limit_range_w(cuda_index: int) -> tuple[float, float] | None:
    """The lowest and highest power limit (watts) the GPU accepts, None where NVML cannot tell."""
    found = _of_device("nvmlDeviceGetPowerManagementLimitConstraints", cuda_index)
    return None if found is None else (found[0] / 1e3, found[1] / 1e3)


def set_power_limit_w(cuda_index: int, watts: float) -> str | None:
    """Set the GPU's power limit to `watts`; None where it was set, else why not (NVML's
    words: most often no permission, which needs root, and VMs that do not allow it)."""
    nvml = _nvml()
    if nvml is None:
        return f"NVML unavailable: {unavailable_reason()}"
    try:
        nvml.nvmlDeviceSetPowerManagementLimit(_handle(cuda_index), round(watts * 1e3))
    except nvml.NVMLError as e:
        return f"{type(e).__name__}: {e}"
    return None
