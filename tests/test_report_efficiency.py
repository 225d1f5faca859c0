"""The report's samples per joule and per dollar against batch size (issue 32): GPU and CPU on
one chart, measured energy with filled marks and the CPU's TDP estimate with hollow ones, keyed
as an estimate. Real H100 rows (tests/data/h100/quick1: NVML energy; its CPU rows have no RAPL),
the CPU's estimate and the prices added as a sweep with --price would add them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

from gpubench.config.prices import Prices
from gpubench.report import build, build_report, efficiency, figure
from gpubench.report.runs import combine, load_runs
from gpubench.run import cost

DATA = Path(__file__).resolve().parent / "data" / "h100" / "quick1"


def _frame(tmp_path: Path, estimate: bool = True, prices: bool = True) -> pd.DataFrame:
    run = tmp_path / "quick1"
    shutil.copytree(DATA, run)
    frame = combine(load_runs([run]))
    cpu = frame["device"] == "cpu"
    assert frame.loc[cpu, "cpu_energy_j_per_step"].isna().all()  # the H100 machine had no RAPL
    assert frame.loc[~cpu & (frame["status"] == "ok"), "energy_j_per_step"].notna().any()
    if estimate:  # as the TDP estimate would give: 12 W per busy core, one busy core
        frame.loc[cpu, "cpu_energy_estimate_j_per_step"] = frame.loc[cpu, "step_time_s"] * 12.0
    if prices:
        p = Prices({"cpu": 0.10, "cuda": 2.50})
        for column in ("usd_per_million_samples",):
            frame[column] = [cost.columns(r, p).get(column) for r in frame.to_dict("records")]
    return frame


def _drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    kept: dict[str, Any] = {}

    def keep(fig: Figure, plots_dir: Path, file: str, *args: Any, **kwargs: Any) -> None:
        kept["fig"], kept["keys"] = fig, kwargs.get("keys") or {}
        figure.save(fig, plots_dir, file, *args, **kwargs)

    monkeypatch.setattr(efficiency, "save", keep)
    return kept


def test_measured_and_estimated_energy_are_drawn_differently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = _frame(tmp_path)
    kept = _drawn(monkeypatch)
    chart = efficiency.efficiency(frame, tmp_path)
    assert chart is not None and (tmp_path / efficiency.FILE).is_file()
    assert "estimate, not a measurement" in chart.caption and "per US dollar" in chart.caption
    assert efficiency.ESTIMATED in kept["keys"]
    fig: Figure = kept["fig"]
    energy_axes = [ax for ax in fig.axes if ax.get_ylabel().startswith("samples per joule")]
    dollar_axes = [ax for ax in fig.axes if ax.get_ylabel().startswith("samples per US dollar")]
    assert energy_axes and len(dollar_axes) == len(energy_axes)  # a row of each per model
    lines = [line for ax in energy_axes for line in ax.get_lines() if len(line.get_xdata())]
    estimated = [line for line in lines if line.get_label() == efficiency.ESTIMATED]
    measured = [line for line in lines if line.get_label() != efficiency.ESTIMATED]
    assert estimated and measured
    assert all(line.get_markerfacecolor() == "none" for line in estimated)
    assert all(line.get_markerfacecolor() != "none" for line in measured)
    # one estimated line per CPU series of each panel, and the GPU's NVML figures as measured
    cpu_series = frame[(frame["device"] == "cpu") & (frame["status"] == "ok")]
    assert len(estimated) == cpu_series.groupby(["panel", "series"]).ngroups


def test_without_prices_the_chart_has_no_dollar_row_and_without_an_estimate_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = _frame(tmp_path, estimate=False, prices=False)
    kept = _drawn(monkeypatch)
    chart = efficiency.efficiency(frame, tmp_path)
    assert chart is not None and "per US dollar" not in chart.caption
    fig: Figure = kept["fig"]
    assert not [ax for ax in fig.axes if "dollar" in ax.get_ylabel()]
    assert efficiency.ESTIMATED not in kept["keys"]


def test_the_report_draws_the_efficiency_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "quick1"
    shutil.copytree(DATA, run)
    monkeypatch.setattr(build, "CHART_PROCESSES", 1)
    page = build_report([run]).read_text()
    assert "Energy and cost efficiency" in page and efficiency.FILE in page
