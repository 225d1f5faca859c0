"""CPU package energy from RAPL (/sys/class/powercap/intel-rapl:N/energy_uj: cumulative microjoules
per package, wrapping at `max_energy_range_uj`). Where there is none, or it is unreadable (recent
kernels: root only), energy is null and `unavailable_reason()` says why.
"""

from __future__ import annotations

from pathlib import Path

from gpubench.probes.probe import Probe

POWERCAP = Path("/sys/class/powercap")


def packages(root: Path = POWERCAP) -> list[Path]:
    """The package-level RAPL domains (not their core/uncore/dram subzones)."""
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.glob("intel-rapl:*")
        if p.name.count(":") == 1 and _read_text(p / "name", "").startswith("package")
    )


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
    """Reads every package's counter on entry and exit; `joules` is the
    energy spent between them (a wrap is undone with the domain's `max_energy_range_uj`), None
    where RAPL is unavailable or a counter wrapped and its range cannot be read (the energy is
    then unknown, never negative), with `note` saying why in the latter case."""

    def __init__(self, root: Path = POWERCAP) -> None:
        self._domains = packages(root) if unavailable_reason(root) is None else []
        self._start: list[int] = []
        self.joules: float | None = None
        self.note: str | None = None

    def start(self) -> None:
        self._start = [_read_uj(p) for p in self._domains]

    def stop(self, failed: bool = False) -> None:
        if not self._domains or failed:
            return
        total = 0
        for p, start in zip(self._domains, self._start, strict=True):
            delta = _read_uj(p) - start
            if delta < 0:  # the counter wrapped: it restarted from 0 after its range
                span = _wrap_range(p)
                if isinstance(span, str):
                    self.note = f"{p / 'energy_uj'} wrapped and its range is unknown: {span}"
                    return
                delta += span
            total += delta
        self.joules = total / 1e6


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


def _read_text(path: Path, default: str) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default
