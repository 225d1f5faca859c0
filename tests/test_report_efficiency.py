"""The report's samples per joule and per dollar against batch size (issue 32): GPU and CPU on
one chart, the CPU's drawn only where it has an energy figure (issue 49: RAPL, or the watts the
user stated, which the caption says). Real H100 rows (tests/data/h100/quick1: NVML energy; its
CPU rows have no RAPL), the stated watts and the prices added as a sweep with --cpu-watts and
--price would add them."""

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
from gpubench.run import cost, cpu_watts

DATA = Path(__file__).resolve().parent / "data" / "h100" / "quick1"


def _frame(tmp_path: Path, stated: bool = True, prices: bool = True) -> pd.DataFrame:
    run = tmp_path / "quick1"
    shutil.copytree(DATA, run)
    frame = combine(load_runs([run]))
    cpu = frame["device"] == "cpu"
    assert frame.loc[cpu, "cpu_energy_j_per_step"].isna().all()  # the H100 machine had no RAPL
    assert frame.loc[~cpu & (frame["status"] == "ok"), "energy_j_per_step"].notna().any()
    if stated:  # as a sweep with --cpu-watts 65 adds them
        added = pd.DataFrame([cpu_watts.columns(r, 65.0) for r in frame.to_dict("records")])
        for column in ("cpu_energy_j_per_step", "cpu_energy_method"):
            frame[column] = frame[column].where(added[column].isna(), added[column])
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


def test_the_cpus_stated_energy_is_drawn_and_said_to_be_stated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = _frame(tmp_path)
    kept = _drawn(monkeypatch)
    chart = efficiency.efficiency(frame, tmp_path)
    assert chart is not None and (tmp_path / efficiency.FILE).is_file()
    assert "stated by --cpu-watts" in chart.caption and "per US dollar" in chart.caption
    fig: Figure = kept["fig"]
    energy_axes = [ax for ax in fig.axes if ax.get_ylabel().startswith("samples per joule")]
    dollar_axes = [ax for ax in fig.axes if ax.get_ylabel().startswith("samples per US dollar")]
    assert energy_axes and len(dollar_axes) == len(energy_axes)  # a row of each per model
    drawn = [ln for ax in energy_axes for ln in ax.get_lines() if pd.notna(ln.get_ydata()).any()]
    ok = frame[frame["status"] == "ok"]
    # every series of each panel with a figure: the GPU's NVML ones and the CPU's at its watts
    groups = [g for _, g in ok.groupby(["panel", "series"])]
    assert len(drawn) == sum(efficiency.samples_per_j(g).notna().any() for g in groups)
    cpu = ok[ok["device"] == "cpu"]
    assert {g["series"].iloc[0] for g in groups if (g["device"] == "cpu").all()} <= {
        g["series"].iloc[0] for g in groups if efficiency.samples_per_j(g).notna().all()
    }
    assert (cpu["batch_size"] / cpu["cpu_energy_j_per_step"]).round(6).tolist() == (
        (cpu["samples_per_s"] / 65.0).round(6).tolist()
    )


def test_without_prices_or_watts_only_the_gpu_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = _frame(tmp_path, stated=False, prices=False)
    kept = _drawn(monkeypatch)
    chart = efficiency.efficiency(frame, tmp_path)
    assert chart is not None and "per US dollar" not in chart.caption
    assert "--cpu-watts" not in chart.caption
    fig: Figure = kept["fig"]
    assert not [ax for ax in fig.axes if "dollar" in ax.get_ylabel()]
    drawn = [ln for ax in fig.axes for ln in ax.get_lines() if pd.notna(ln.get_ydata()).any()]
    ok = frame[frame["status"] == "ok"]
    gpu = [g for _, g in ok.groupby(["panel", "series"]) if (g["device"] != "cpu").all()]
    assert len(drawn) == sum(efficiency.samples_per_j(g).notna().any() for g in gpu)


def test_the_report_draws_the_efficiency_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "quick1"
    shutil.copytree(DATA, run)
    monkeypatch.setattr(build, "CHART_PROCESSES", 1)
    page = build_report([run]).read_text()
    assert "Energy and cost efficiency" in page and efficiency.FILE in page
