"""CPU energy wherever it can be had (issue 32): RAPL's package and DRAM domains on fake powercap
trees (wrap-around undone with each domain's range), and where RAPL is missing the TDP estimate
in columns of its own, labelled `tdp_estimate`, with its stated error."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
from test_why_probes import _domain  # a fake powercap domain

from gpubench.config.spec import Budget, Point
from gpubench.harness.point import measure_point
from gpubench.probes import cpu_power, rapl
from gpubench.probes.cpu_energy import CpuEnergy
from gpubench.store.row import COLUMNS

ESTIMATE_COLUMNS = ["cpu_energy_estimate_j_per_step", "cpu_samples_per_j_estimate"]


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
    assert not set(ESTIMATE_COLUMNS) & set(cols)  # a measurement is never also an estimate


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


def test_without_powercap_the_estimate_is_labelled_and_never_a_measurement(
    tmp_path: Path,
) -> None:
    with CpuEnergy(tmp_path / "powercap") as energy:
        sum(i * i for i in range(200_000))  # CPU time for the estimate to see
    cols = energy.columns(steps=2, batch_size=10, cpu_model="Intel(R) Xeon(R) Gold 6248")
    assert cols["cpu_energy_method"] == "tdp_estimate"
    assert "cpu_energy_j_per_step" not in cols and "cpu_samples_per_j" not in cols
    t = energy.cpu_time
    assert t is not None and t.cpu_s is not None and t.wall_s is not None and t.cpu_s > 0
    assert cols["cpu_tdp_per_core_w"] == pytest.approx(150 / 20)  # the table's Xeon Gold 6248
    assert cols["cpu_tdp_model"] == "Xeon Gold 6248"
    assert cols["cpu_energy_estimate_j_per_step"] == pytest.approx(t.cpu_s * 7.5 / 2)
    assert cols["cpu_busy_cores"] == pytest.approx(t.cpu_s / t.wall_s)
    assert cols["cpu_energy_estimate_error_rel"] == pytest.approx(cpu_power.error_rel())


def test_a_wrapped_counter_with_an_unknown_range_gives_no_estimate_in_its_place(
    tmp_path: Path,
) -> None:
    pkg = _domain(tmp_path, "intel-rapl:0", "package-0", 9_000_000, 0)
    with CpuEnergy(tmp_path) as energy:
        _set(pkg, 1_000)
    cols = energy.columns(steps=1, batch_size=1)
    assert "wrapped" in cols["cpu_energy_note"] and "cpu_energy_method" not in cols


@pytest.mark.parametrize(
    ("model", "entry", "per_core"),
    [
        ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "Xeon Gold 6248", 7.5),
        ("AMD EPYC 7552 48-Core Processor", "EPYC 7552", 200 / 48),
        ("Intel(R) Core(TM) i9-10900KF CPU @ 3.70GHz", "Core i9-10900KF", 10.5),
        ("Intel(R) Core(TM) i9-10900K CPU @ 3.70GHz", "Core i9-10900K", 12.5),
    ],
)
def test_a_known_model_gets_its_entry(model: str, entry: str, per_core: float) -> None:
    tdp = cpu_power.tdp_for(model)
    assert (tdp.model, tdp.per_core_w) == (entry, pytest.approx(per_core))
    assert tdp.source.startswith("https://")


@pytest.mark.parametrize("model", ["Intel(R) Xeon(R) Processor", "AMD EPYC", None, ""])
def test_an_unknown_model_gets_the_stated_default(model: str | None) -> None:
    tdp = cpu_power.tdp_for(model)
    t = cpu_power.table()
    assert tdp.model is None and tdp.per_core_w == t.default_w
    assert "green-algorithms" in tdp.source


def test_every_table_entry_is_sourced_and_the_error_is_the_tables_spread() -> None:
    data = tomllib.loads(cpu_power.TABLE.read_text())
    assert data["cpu"] and all(e["source"].startswith("https://") for e in data["cpu"])
    t = cpu_power.table()
    spread = [abs(e["tdp_w"] / e["cores"] - t.default_w) / t.default_w for e in data["cpu"]]
    assert cpu_power.error_rel() == pytest.approx(max(spread))


def test_a_bad_table_entry_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "t.toml"
    bad.write_text(
        '[default]\ntdp_per_core_w = 10\nsource = "s"\n'
        '[[cpu]]\nmodel = "X 1"\ntdp_w = 0\ncores = 4\nsource = "s"\n'
    )
    with pytest.raises(ValueError, match="X 1"):
        cpu_power.table(bad)


def test_estimate_is_cpu_seconds_times_tdp_per_core() -> None:
    tdp = cpu_power.Tdp(10.0, None, "s")
    est = cpu_power.estimate(cpu_s=3.0, wall_s=2.0, tdp=tdp)
    assert (est.joules, est.busy_cores) == (30.0, 1.5)
    with pytest.raises(ValueError, match="wall_s"):
        cpu_power.estimate(cpu_s=1.0, wall_s=0.0, tdp=tdp)


def test_a_cpu_row_carries_one_method_and_its_columns_are_in_the_schema() -> None:
    new = ["cpu_energy_method", "cpu_dram_energy_j_per_step", *ESTIMATE_COLUMNS]
    assert set(new) <= set(COLUMNS)
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4)
    row = measure_point(point, dataclasses.replace(Budget.fixed(4, 2), profile_steps=0))
    assert row["status"] == "ok"
    if rapl.unavailable_reason() is None:
        assert row["cpu_energy_method"] == "rapl" and row["cpu_energy_estimate_j_per_step"] is None
    else:
        assert row["cpu_energy_method"] == "tdp_estimate"
        assert row["cpu_energy_j_per_step"] is None and row["cpu_samples_per_j"] is None
        assert row["cpu_energy_estimate_j_per_step"] > 0
        assert row["cpu_samples_per_j_estimate"] == pytest.approx(
            4 / row["cpu_energy_estimate_j_per_step"]
        )


def test_the_verdict_says_an_estimate_is_one_and_states_its_error() -> None:
    from gpubench.science.devices import of

    row = {"device": "cpu", "cpu_samples_per_j_estimate": 1234.5}
    row["cpu_energy_estimate_error_rel"] = 0.98
    said = of(row, "no RAPL here")
    # issue 41: said once, as an estimate, with its error; no "not measured" beside it
    assert said == (
        "estimated 1,234.5 samples/J from the CPU's TDP: may be off by up to 98%; "
        "RAPL: no RAPL here"
    )
    assert of({"device": "cpu"}, "no RAPL here") == "no CPU energy figure (no RAPL here)"
