"""RAPL package energy on a fake powercap folder: a counter that wrapped where its range
(`max_energy_range_uj`) cannot be read gives null energy with the reason, never a negative
number; one that did not wrap needs no range."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.probes import rapl


def _package(root: Path, uj: int, max_range: str | None) -> Path:
    d = root / "intel-rapl:0"
    d.mkdir(parents=True)
    (d / "name").write_text("package-0\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    if max_range is not None:
        (d / "max_energy_range_uj").write_text(max_range)
    return d


@pytest.mark.parametrize(
    ("max_range", "why"), [(None, "cannot read"), ("0\n", "reads 0"), ("n/a\n", "cannot read")]
)
def test_a_wrap_with_an_unknown_range_is_null_with_the_reason(
    tmp_path: Path, max_range: str | None, why: str
) -> None:
    package = _package(tmp_path, 9_500_000, max_range)
    with rapl.PackageEnergy(tmp_path) as energy:
        (package / "energy_uj").write_text("500000\n")  # wrapped
    assert energy.joules is None
    assert energy.note is not None and "wrapped and its range is unknown" in energy.note
    assert why in energy.note and "max_energy_range_uj" in energy.note


def test_no_wrap_needs_no_range_and_a_known_range_undoes_a_wrap(tmp_path: Path) -> None:
    package = _package(tmp_path / "a", 1_000_000, None)
    with rapl.PackageEnergy(tmp_path / "a") as energy:
        (package / "energy_uj").write_text("3000000\n")
    assert energy.joules == pytest.approx(2.0) and energy.note is None
    package = _package(tmp_path / "b", 9_500_000, "10000000\n")
    with rapl.PackageEnergy(tmp_path / "b") as energy:
        (package / "energy_uj").write_text("500000\n")
    assert energy.joules == pytest.approx(1.0) and energy.note is None
