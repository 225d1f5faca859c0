"""CPU package and DRAM energy from RAPL (/sys/class/powercap/intel-rapl:N/energy_uj: cumulative
microjoules per package, wrapping at `max_energy_range_uj`; the DRAM domain is a subzone
intel-rapl:N:M named "dram", or on some servers a top-level zone so named). Where there is none,
or it is unreadable (recent kernels: root only), energy is null and `unavailable_reason()` says
why: nothing stands in for a missing reading (issue 49), unless the user states the CPU's power
(`sweep --cpu-watts`, run.cpu_watts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.probes.probe import Probe

POWERCAP = Path("/sys/class/powercap")


def _zones(root: Path) -> list[Path]:
    return sorted(root.glob("intel-rapl:*")) if root.is_dir() else []


def packages(root: Path = POWERCAP) -> list[Path]:
    """The package-level RAPL domains (not their core/uncore/dram subzones)."""
    return [p for p in _zones(root) if p.name.count(":") == 1 and _name(p).startswith("package")]


def dram_domains(root: Path = POWERCAP) -> list[Path]:
    """The DRAM RAPL domains (subzones of a package, or top-level zones), [] where none."""
    return [p for p in _zones(root) if _name(p) == "dram"]


def unavailable_reason(root: Path = POWERCAP) -> str | None:
    """Why package energy cannot be read here, or None when it can."""
    if not root.is_dir():
        return f"{root} does not exist (no RAPL powercap driver on this machine)"
    found = packages(root)
    if not found:
        return f"{root} has no intel-rapl package domain"
    try:
        for p in found:
            int((p / "energy_uj").read_text())
    except (OSError, ValueError) as e:
        return f"cannot read {found[0] / 'energy_uj'}: {e}"
    return None


class PackageEnergy(Probe):
    """Reads every package's counter (and every DRAM domain's) on entry and exit; `joules` is
    the packages' energy spent between them, `dram_joules` the DRAM domains' (a wrap is undone
    with the domain's `max_energy_range_uj`). Each is None where RAPL (or a DRAM domain) is
    unavailable or a counter wrapped and its range cannot be read (the energy is then unknown,
    never negative), with `note` saying why in the latter case."""

    def __init__(self, root: Path = POWERCAP) -> None:
        usable = unavailable_reason(root) is None
        self._domains = packages(root) if usable else []
        self._dram = dram_domains(root) if usable else []
        self._start: list[int] = []
        self._dram_start: list[int] = []
        self.joules: float | None = None
        self.dram_joules: float | None = None
        self.note: str | None = None

    def start(self) -> None:
        self._start = [_read_uj(p) for p in self._domains]
        self._dram_start = _readable_uj(self._dram)

    def stop(self, failed: bool = False) -> None:
        if not self._domains or failed:
            return
        spent = self._spent(self._domains, self._start)
        if isinstance(spent, str):
            self.note = spent
            return
        self.joules = spent
        if self._dram and len(self._dram_start) == len(self._dram):
            dram = self._spent(self._dram, self._dram_start)
            if isinstance(dram, str):
                self.note = dram
            else:
                self.dram_joules = dram

    def columns(self, steps: int, batch_size: int) -> dict[str, Any]:
        """A row's CPU energy columns for `steps` steps of `batch_size` samples: the packages'
        where they read (`cpu_energy_method = rapl`), else {} or the note saying why their
        reading is null."""
        if self.joules is None:
            return {} if self.note is None else {"cpu_energy_note": self.note}
        per_step = self.joules / steps
        dram = None if self.dram_joules is None else self.dram_joules / steps
        return dict(
            cpu_energy_method="rapl",
            cpu_energy_j_per_step=per_step,
            cpu_samples_per_j=batch_size / per_step if per_step > 0 else None,
            cpu_dram_energy_j_per_step=dram,
        )

    @staticmethod
    def _spent(domains: list[Path], starts: list[int]) -> float | str:
        """The joules the domains' counters moved since `starts`, or why that is unknown."""
        total = 0
        for p, start in zip(domains, starts, strict=True):
            delta = _read_uj(p) - start
            if delta < 0:  # the counter wrapped: it restarted from 0 after its range
                span = _wrap_range(p)
                if isinstance(span, str):
                    return f"{p / 'energy_uj'} wrapped and its range is unknown: {span}"
                delta += span
            total += delta
        return total / 1e6


def _readable_uj(domains: list[Path]) -> list[int]:
    """Every domain's counter, or [] when one cannot be read (a DRAM domain is optional: its
    being unreadable leaves the DRAM energy null, not the package's)."""
    try:
        return [_read_uj(p) for p in domains]
    except (OSError, ValueError):
        return []


def _wrap_range(domain: Path) -> int | str:
    """The domain's counter range in microjoules, or why it cannot be read."""
    path = domain / "max_energy_range_uj"
    try:
        span = int(path.read_text())
    except (OSError, ValueError) as e:
        return f"cannot read {path}: {e}"
    return span if span > 0 else f"{path} reads {span}"


def _read_uj(domain: Path) -> int:
    return int((domain / "energy_uj").read_text())


def _name(domain: Path) -> str:
    try:
        return (domain / "name").read_text().strip()
    except OSError:
        return ""
