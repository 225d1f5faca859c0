"""CPU energy only where it is measured (issues 32, 49): RAPL's package and DRAM domains on fake
powercap trees (wrap-around undone with each domain's range), or the watts the user states
(`sweep --cpu-watts W`: W x the measured time, said as stated); otherwise the row's CPU energy is
null and the verdict says once why."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from report_fixture import env, speed_row, write_run
from test_why_probes import _domain  # a fake powercap domain

from gpubench.cli import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point
from gpubench.config.suite import load_suite
from gpubench.harness.point import measure_point
from gpubench.probes import rapl
from gpubench.probes.rapl import PackageEnergy as CpuEnergy
from gpubench.run import cpu_watts
from gpubench.run.folder import as_saved, spec_from_saved
from gpubench.science import devices
from gpubench.store.row import COLUMNS
from gpubench.store.wording import number

ENERGY = ["cpu_energy_j_per_step", "cpu_samples_per_j", "cpu_energy_method", "cpu_watts"]


def _set(domain: Path, uj: int) -> None:
    (domain / "energy_uj").write_text(f"{uj}\n")


def test_rapl_reads_package_and_dram_and_undoes_each_domains_wrap(tmp_path: Path) -> None:
    pkg = _domain(tmp_path, "intel-rapl:0", "package-0", 9_000_000, 10_000_000)
    dram = _domain(tmp_path, "intel-rapl:0:1", "dram", 250_000_000, 262_143_328_850)
    core = _domain(tmp_path, "intel-rapl:0:0", "core", 0, 10_000_000)
    assert rapl.dram_domains(tmp_path) == [dram]
    with CpuEnergy(tmp_path) as energy:
        _set(pkg, 1_000_000)  # wrapped at 10 J: +2 J
        _set(dram, 250_500_000)  # +0.5 J
        _set(core, 5_000_000)  # a subzone of the package: not counted again
    cols = energy.columns(steps=4, batch_size=8)
    assert cols["cpu_energy_method"] == "rapl"
    assert cols["cpu_energy_j_per_step"] == pytest.approx(0.5)
    assert cols["cpu_samples_per_j"] == pytest.approx(16.0)
    assert cols["cpu_dram_energy_j_per_step"] == pytest.approx(0.125)
    assert devices.of({"device": "cpu", **cols}) == "16 samples/J (RAPL package)"


def test_a_dram_wrap_uses_the_dram_domains_own_range(tmp_path: Path) -> None:
    _domain(tmp_path, "intel-rapl:0", "package-0", 0, 10_000_000)
    dram = _domain(tmp_path, "intel-rapl:1", "dram", 3_900_000, 4_000_000)  # top-level DRAM
    with rapl.PackageEnergy(tmp_path) as energy:
        _set(dram, 100_000)  # wrapped at its own 4 J range, not the package's 10 J: +0.2 J
    assert energy.joules == 0.0
    assert energy.dram_joules == pytest.approx(0.2)


def test_a_machine_without_dram_domains_has_null_dram_energy(tmp_path: Path) -> None:
    pkg = _domain(tmp_path, "intel-rapl:0", "package-0", 0, 10_000_000)
    with CpuEnergy(tmp_path) as energy:
        _set(pkg, 3_000_000)
    cols = energy.columns(steps=1, batch_size=1)
    assert cols["cpu_energy_j_per_step"] == pytest.approx(3.0)
    assert cols["cpu_dram_energy_j_per_step"] is None


def test_a_wrapped_counter_with_an_unknown_range_gives_no_estimate_in_its_place(
    tmp_path: Path,
) -> None:
    pkg = _domain(tmp_path, "intel-rapl:0", "package-0", 9_000_000, 0)
    with CpuEnergy(tmp_path) as energy:
        _set(pkg, 1_000)
    cols = energy.columns(steps=1, batch_size=1)
    assert "wrapped" in cols["cpu_energy_note"] and "cpu_energy_method" not in cols
    # the row's own note is said in its verdict line; the user's watts do not stand in for it
    # on a machine whose RAPL reads (the note is RAPL's, not a missing driver's)
    assert devices.of({"device": "cpu", **cols}).startswith("no CPU energy figure (")


def test_a_tiny_cpu_point_has_energy_only_where_measured_or_stated() -> None:
    """Issue 49: no RAPL and no watts: the row's CPU energy is null (no estimate); with
    --cpu-watts 65 its energy is 65 W x its measured step time, said as stated."""
    assert set(ENERGY) <= set(COLUMNS)
    assert not {c for c in COLUMNS if "estimate" in c or "tdp" in c}
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4)
    row = measure_point(point, dataclasses.replace(Budget.fixed(4, 2), profile_steps=0))
    assert row["status"] == "ok" and row["step_time_s"] > 0
    assert row["energy_j_per_step"] is None and row["avg_power_w"] is None  # no NVML on a CPU
    if rapl.unavailable_reason() is None:
        assert row["cpu_energy_method"] == "rapl" and row["cpu_energy_j_per_step"] > 0
        assert cpu_watts.columns(row, 65.0) == {}  # measured beats stated
        row = {**row, "cpu_energy_method": None}  # as on a machine without RAPL
    else:
        assert all(row[c] is None for c in ENERGY)
        assert devices.of(row) == ""  # said once per run, not in the row's line
    stated = cpu_watts.columns(row, 65.0)
    assert stated["cpu_energy_method"] == "stated" and stated["cpu_watts"] == 65.0
    assert stated["cpu_energy_j_per_step"] == pytest.approx(65.0 * row["step_time_s"])
    assert stated["cpu_samples_per_j"] == pytest.approx(row["samples_per_s"] / 65.0)
    assert stated["cpu_samples_per_j"] == pytest.approx(4 / stated["cpu_energy_j_per_step"])
    assert stated["cpu_energy_to_target_j"] is None  # a speed row reaches no target
    said = devices.of({**row, **stated})
    assert said == (
        f"{number(stated['cpu_samples_per_j'])} samples/J (stated: 65 W (--cpu-watts) x its step "
        "time)"
    )
    # one power for every configuration ranks them as speed does: it breaks no tie
    assert devices.measured_samples_per_j({**row, **stated}) is None
    assert cpu_watts.columns(row, None) == {}
    assert cpu_watts.columns({**row, "device": "cuda"}, 65.0) == {}


def _cpu_run(root: Path, name: str, watts: float | None = None) -> Path:
    """Two models' CPU rows on a machine without RAPL, with the sweep's --cpu-watts applied."""
    rng = np.random.default_rng(0)
    rows = [
        speed_row(Point(m, "small", "cpu", "fp32", "sgd", b), 1e-3, 1e-5, rng)
        for m in ("mlp", "cnn")
        for b in (4, 16)
    ]
    for r in rows:
        r.update(cpu_watts.columns(r, watts))
    no_rapl = {**env(), "rapl": {"unavailable_reason": "/sys/class/powercap does not exist"}}
    return write_run(root / name, rows, no_rapl)


def test_without_rapl_or_watts_the_verdict_says_once_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _cpu_run(tmp_path, "plain")
    assert main(["explain", str(run)]) == 0
    out = capsys.readouterr().out
    line = (
        "CPU energy: not measured (RAPL could not be read: /sys/class/powercap does not exist); "
        "give sweep --cpu-watts W to state the CPU's power"
    )
    assert out.count("CPU energy: not measured") == 1 and line in out.splitlines()
    assert "samples/J" not in out.replace("samples/J  ", "")  # the answer's heading alone
    assert main(["explain", str(run), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["cpu_energy"] == line and len(said["verdicts"]) == 2
    assert all(v["energy"] == [] for v in said["verdicts"])
    # stated watts: each model's line says so, and nothing is said as not measured
    stated = _cpu_run(tmp_path, "stated", 65.0)
    assert main(["explain", str(stated)]) == 0
    out = capsys.readouterr().out
    assert "CPU energy: not measured" not in out
    assert out.count("samples/J (stated: 65 W (--cpu-watts) x its step time)") == 2


@pytest.mark.parametrize("bad", ["0", "-5", "abc", "inf", "nan"])
def test_a_bad_cpu_watts_is_one_line_and_exit_2(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["sweep", "--cpu-watts", bad, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"gpubench: error: argument --cpu-watts: invalid power '{bad}'; allowed: a finite "
        "number of watts above 0, e.g. 65"
    )
    assert not out.exists()


def test_a_suites_cpu_watts_loads_and_survives_suite_json(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('models = ["mlp"]\ndevices = ["cpu"]\ncpu_watts = 65\n')
    spec = load_suite(path)
    assert spec.cpu_watts == 65.0 and spec_from_saved(as_saved(spec)).cpu_watts == 65.0
    path.write_text('models = ["mlp"]\ndevices = ["cpu"]\ncpu_watts = -5\n')
    with pytest.raises(ConfigError, match="line 3: invalid power -5; allowed: a finite"):
        load_suite(path)
