"""Issue 28, item 10: the report rendered from real H100 rows (tests/data/h100) reads right: its
verdict names the GPU beside a speedup chart that shows it ahead, with the chart's own figures;
its memory chart shows each point's own memory, not the device-wide use that counted gpubench's
parent; and the effective-batch report leads with the charts that vary."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

from gpubench.report import analysis as A
from gpubench.report import build, build_report, figure, plots
from gpubench.report import effective_batch as EB
from gpubench.report.explain import run_verdicts
from gpubench.report.runs import combine, load_runs
from gpubench.store.wording import times

DATA = Path(__file__).resolve().parent / "data" / "h100"
GiB = 2**30


def _copy(name: str, tmp_path: Path) -> Path:
    """The fixture folder `name` copied where its report may be written."""
    run = tmp_path / name
    shutil.copytree(DATA / name, run)
    return run


def _figures(monkeypatch: pytest.MonkeyPatch, module: Any) -> dict[str, Figure]:
    """The figures `module` saves, by file name, kept for inspection (then saved as ever)."""
    kept: dict[str, Figure] = {}

    def keep(fig: Figure, plots_dir: Path, file: str, *args: Any, **kwargs: Any) -> None:
        kept[file] = fig
        figure.save(fig, plots_dir, file, *args, **kwargs)

    monkeypatch.setattr(module, "save", keep)
    monkeypatch.setattr(build, "CHART_PROCESSES", 1)  # drawn here, where they are kept
    return kept


@pytest.fixture(scope="module")
def quick1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Figure]]:
    """The default sweep's report, rendered once: its folder, its page, and the figures of
    report.plots."""
    with pytest.MonkeyPatch.context() as m:
        kept = _figures(m, plots)
        run = _copy("quick1", tmp_path_factory.mktemp("h100"))
        return run, build_report([run]).read_text(), kept


def _sections(page: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", page)


def test_the_verdict_names_the_gpu_with_the_speedup_charts_figures(
    quick1: tuple[Path, str, dict[str, Figure]],
) -> None:
    run, page, _ = quick1
    verdict = page[page.index("<h2>Verdict</h2>") : page.index("<h2>Throughput</h2>")]
    headlines = re.findall(r"<h3>(.*?)</h3><p><b>(.*?)</b>", verdict)
    assert len(headlines) == 6
    assert all(h.startswith(("fastest cuda", "tie: cuda")) for _, h in headlines)
    assert "fastest cpu" not in verdict.split("<b>on cpu</b>")[0]  # only per device, below
    # the speedup chart's table (CPU step time over GPU step time, per configuration) gives
    # the verdict's range per model and optimizer; the chart shows the GPU ahead at B=64
    runs = load_runs([run])
    frame = combine(runs)
    table = A.speedup_table(frame, {r.name: r.cpu_threads() for r in runs})
    assert (table[table["batch_size"] == 64]["speedup"] > 1).all()
    for v in run_verdicts(runs, frame):
        mine = table[
            (table["model"] == v.identity["model"])
            & (table["optimizer"] == v.identity["optimizer"])
        ]
        low, high = mine["speedup"].min(), mine["speedup"].max()
        (a,) = v.across
        assert (a.low, a.high) == pytest.approx((low, high))
        assert f"{times(low)} to {times(high)} ({len(mine)} configurations" in verdict
        assert f"<b>across devices</b>: cuda {times(a.ratio)} cpu" in verdict
    # the speedups stand on contended CUDA rows, and the section says so
    speedup = page[page.index("<h2>Speedup over the CPU</h2>") :]
    cuda = frame[(frame["device"] == "cuda") & (frame["status"] == "ok")]
    assert f"{len(cuda)} of {len(cuda)} cuda rows" in speedup.split("</p>")[0]


def test_the_memory_chart_shows_each_points_own_memory(
    quick1: tuple[Path, str, dict[str, Figure]],
) -> None:
    run, page, kept = quick1
    frame = combine(load_runs([run]))
    ok = frame[frame["status"] == "ok"]
    cuda = ok[ok["device"] == "cuda"]
    # the parent held gigabytes of the card: device-wide NVML is far above the point's process
    assert (cuda["nvml_peak_used_bytes"] - cuda["nvml_process_peak_used_bytes"]).min() > GiB
    own = set(cuda["nvml_process_peak_used_bytes"] / GiB) | set(ok["host_peak_rss_bytes"] / GiB)
    drawn = [
        y
        for ax in kept["memory.png"].axes
        for line in ax.get_lines()
        if line.get_label() == "_"  # a series' measured points (fits and the capacity aside)
        for y in line.get_ydata()
    ]
    assert len(drawn) == len(ok)
    assert all(any(y == pytest.approx(m) for m in own) for y in drawn)
    assert max(drawn) < cuda["nvml_peak_used_bytes"].min() / GiB
    # the summary's fit and prediction go by the same column, and the caption says which
    summary = A.series_summary(frame, {})
    gpu = summary[[str(s).startswith("cuda") for s in summary["series"]]]
    assert len(gpu) == 12 and set(gpu["memory_column"]) == {"nvml_process_peak_used_bytes"}
    assert "what NVML counts for the point" in page


def test_the_effective_batch_report_leads_with_the_ways_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _copy("effbatch", tmp_path)
    kept = _figures(monkeypatch, EB)
    page = build_report([run]).read_text()
    order = _sections(page)
    # one effective batch (B=256) in four ways: the ways lead; the charts against a batch
    # size that nothing varied come after the others
    # issue 41: the answer (its table and bullets) and the summary table first
    assert order[:3] == ["Verdict", "Summary", "Effective batch"]
    assert order.index("Roofline") < order.index("Throughput") < order.index("Memory")
    rows = pd.DataFrame(load_runs([run])[0].frame)
    assert rows["batch_size"].nunique() == 1
    speed, memory = kept[EB.CHART_FILE].axes
    ticks = [t.get_text() for t in speed.get_xticklabels()]
    assert ticks == [
        "as 1 micro-batch",
        "as 1 micro-batch, checkpoint blocks",
        "as 4 micro-batches",
        "as 4 micro-batches, checkpoint blocks",
    ]
    ran = rows[rows["status"] == "ok"]
    (sps,) = ran["samples_per_s"]
    heights = [p.get_height() for p in speed.patches]
    assert heights == [pytest.approx(sps)]
    (alloc,) = ran["torch_peak_allocated_bytes"]
    assert [p.get_height() for p in memory.patches] == [pytest.approx(alloc / 2**20)]
    failed = (rows["status"] == "oom").sum()
    assert [t.get_text() for t in speed.texts].count("oom") == failed == 3


def test_a_sweep_over_batch_sizes_keeps_its_charts_against_the_batch_first(
    quick1: tuple[Path, str, dict[str, Figure]],
) -> None:
    order = _sections(quick1[1])
    assert "Effective batch" not in order
    assert order[:4] == ["Verdict", "Summary", "Throughput", "Step time"]
    assert order.index("Memory") < order.index("Speedup over the CPU")
