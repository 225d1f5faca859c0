"""Issue 21, the report: every series, chart and table by the whole identity; option bars side
by side; option columns; labelled axes; the MFU caption; the suite and commit; readable
legends; the matched rows' thread counts; contended and noisy points on the first screen."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from report_fixture import H100, cpu_gpu_runs, env, speed_row, write_run

from gpubench.config.spec import Point
from gpubench.report import analysis as A
from gpubench.report import build_report, plots
from gpubench.report import series as S
from gpubench.report.figure import labelled_ticks, legend_columns, log_y, panels
from gpubench.report.runs import combine, load_runs
from gpubench.report.series_style import SeriesStyles


def _mixed_run(path: Path) -> Path:
    """mlp tiny and small; small also with a model option and with threads=1: five series."""
    rng = np.random.default_rng(0)
    rows = []
    for b in (4, 16, 64):
        for point in (
            Point("mlp", "tiny", "cpu", "fp32", "sgd", b),
            Point("mlp", "small", "cpu", "fp32", "sgd", b),
            Point("mlp", "small", "cpu", "fp32", "sgd", b, model_options='{"hidden": 32}'),
            Point("mlp", "small", "cpu", "fp32", "sgd", b, threads=1),
            Point("mlp", "small", "cpu", "fp32", "sgd", b, lr_scaling="linear"),
        ):
            rows.append(speed_row(point, 1e-3, 1e-5, rng))
    return write_run(path, rows, env())


def test_a_series_is_the_whole_identity_and_its_label_names_what_differs(tmp_path: Path) -> None:
    frame = combine(load_runs([_mixed_run(tmp_path / "mixed")]))
    # No line zig-zags: a series holds one row per batch size.
    assert frame.groupby("series")["batch_size"].apply(lambda b: b.is_unique).all()
    assert frame["series"].nunique() == 5
    assert set(frame["panel"]) == {"mlp/tiny", "mlp/small"}
    small = frame[frame["panel"] == "mlp/small"]
    names = set(S.labels(small, exclude=("model", "model_size")).values())
    assert names == {
        "threads auto lr fixed default options",
        "1 thread lr fixed default options",
        "threads auto lr linear default options",
        "threads auto lr fixed hidden=32",
    }
    # Across both sizes the size is named; fields the same for all (CPU, fp32, sgd) are not.
    assert all("size=" in n and "fp32" not in n for n in S.labels(frame).values())
    # Every series of a panel has a style of its own.
    styles = SeriesStyles(frame)
    looks = {tuple(sorted(map(str, styles.line(s).items()))) for s in small["series"].unique()}
    assert len(looks) == 4


def _options_runs(root: Path, first_cpu_threads: int = 2) -> tuple[Path, Path]:
    """CPU and GPU runs of eager and compiled points; the CPU run's first row is a cnn point
    with no GPU twin, measured with `first_cpu_threads`."""
    rng = np.random.default_rng(0)
    cpu_rows = [
        speed_row(
            Point("cnn", "small", "cpu", "fp32", "sgd", 4),
            1e-3,
            1e-5,
            rng,
            torch_threads=first_cpu_threads,
        )
    ]
    gpu_rows = []
    for compile_mode in ("eager", "compile"):
        for b in (16, 64):
            cpu = Point("mlp", "small", "cpu", "fp32", "sgd", b, compile=compile_mode)
            gpu = Point("mlp", "small", "cuda", "fp32", "sgd", b, compile=compile_mode)
            cpu_rows.append(speed_row(cpu, 2e-3, 1e-4, rng, torch_threads=2))
            gpu_rows.append(speed_row(gpu, 3e-4, 1e-6, rng))
    return (
        write_run(root / "cpu", cpu_rows, env(threads=first_cpu_threads)),
        write_run(root / "gpu", gpu_rows, env([H100])),
    )


def test_speedup_bars_of_option_variants_stand_side_by_side(tmp_path: Path) -> None:
    runs = load_runs(_options_runs(tmp_path))
    table = A.speedup_table(combine(runs), {r.name: r.cpu_threads() for r in runs})
    assert len(table) == 4 and table["series"].nunique() == 2  # eager and compiled bars
    drawn = []
    real_bar = plt.Axes.bar

    def bar(ax: plt.Axes, x, *args, **kwargs):  # type: ignore[no-untyped-def]
        drawn.extend(x)
        return real_bar(ax, x, *args, **kwargs)

    plt.Axes.bar = bar  # type: ignore[method-assign]
    try:
        plots.speedup(table, tmp_path / "plots")
    finally:
        plt.Axes.bar = real_bar  # type: ignore[method-assign]
    assert len(drawn) == 4 and len(set(drawn)) == 4  # no bar drawn over another


def test_speedup_and_all_points_tables_have_option_columns(tmp_path: Path) -> None:
    page = build_report(list(_options_runs(tmp_path)), tmp_path / "out").read_text()
    start = page.index("<h2>Speedup over the CPU</h2>")
    speedup = page[start : page.index("<h2>", start + 1)]
    assert "<th>compile</th>" in speedup and "<td>compile</td>" in speedup
    assert "Same on every row:" in speedup and "threads asked auto" in speedup
    everything = page[page.index("<h2>All points</h2>") :]
    assert "<th>compile</th>" in everything and "channels last off" in everything


def test_the_speedup_caption_states_the_matched_rows_threads(tmp_path: Path) -> None:
    page = build_report(list(_options_runs(tmp_path, first_cpu_threads=1)), tmp_path / "o")
    text = page.read_text()
    assert "ran with 2 torch thread(s)" in text and "ran with 1 torch" not in text


def test_a_log_axis_under_a_decade_has_tick_labels() -> None:
    fig, axes = panels(["a"])
    ax = axes[0][0]
    for low, high in ((0.31, 0.45), (1.1, 1.6), (3, 7), (20, 90)):
        ax.cla()
        ax.plot([1, 2, 3], [low, (low + high) / 2, high])
        log_y(ax)
        fig.canvas.draw()
        assert len(labelled_ticks(ax.yaxis)) >= 2, (low, high)
    plt.close(fig)


def test_the_compute_caption_uses_the_datasheet_convention(tmp_path: Path) -> None:
    runs = load_runs(list(cpu_gpu_runs(tmp_path)))
    chart = plots.compute(combine(runs), tmp_path / "plots")
    assert chart is not None
    assert "datasheet dense peak" in chart.caption and "PaLM" in chart.caption
    mfu_sentence = chart.caption[chart.caption.index("MFU") :].split(";")[0]
    assert "measured" not in mfu_sentence


def test_the_header_names_each_runs_suite_and_commit(tmp_path: Path) -> None:
    page = build_report(list(cpu_gpu_runs(tmp_path)), tmp_path / "out").read_text()
    top = page[: page.index("<h2>Verdict</h2>")]
    assert "suite quick" in top and "suite gpu" in top and "gpubench commit abc123" in top


def test_a_legend_of_many_short_labels_takes_several_columns() -> None:
    labels = [f"seed={s} B={b}" for s in range(4) for b in (8, 32, 128, 512)]
    ncol = legend_columns(labels, 13.8)
    assert ncol >= 4 and (len(labels) + ncol - 1) // ncol <= 4
    assert legend_columns(["x" * 200], 9.5) == 1  # one long label: one column (never clipped)


def test_noisy_and_busy_points_are_named_after_the_answer(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [
        speed_row(
            Point("mlp", "small", "cpu", "fp32", "sgd", b),
            1e-3,
            1e-5,
            rng,
            noisy=b == 64,
            busy=b == 16,
            other_load_cores=1.5 if b == 16 else 0.0,
        )
        for b in (4, 16, 64)
    ]
    run = write_run(tmp_path / "run", rows, env() | {"load": {"cores": 2}})
    page = build_report([run]).read_text()
    verdict = page.index("<h2>Verdict</h2>")
    noisy = re.search(r"1 of 3 points noisy[^<]*B=64", page)
    busy = re.search(r"1 of 3 points measured while other processes[^<]*B=16", page)
    # issue 41: the answer first, its summary table right after; then what it stands on (the
    # verdict's own "stands on" line names them in the answer)
    summary = page.index("<h2>Summary</h2>")
    assert noisy and busy and verdict < summary < noisy.start() and summary < busy.start()
    assert "stands on" in page[verdict:summary]
