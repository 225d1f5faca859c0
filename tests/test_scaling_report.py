"""Issue 23: the Parallel table (an optimizer column, the baseline once, noisy efficiencies
marked), the scaling chart's lines and legend, and the console's efficiency column."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pandas as pd

from gpubench.cli import results_table
from gpubench.config.spec import SweepSpec
from gpubench.report import build_report
from gpubench.report import scaling as R
from gpubench.store.results import ResultStore, load_results
from gpubench.store.row import make_row

RATE = {1: 100.0, 2: 150.0, 4: 250.0}


def _run(tmp_path: Path, **axes: tuple[object, ...]) -> Path:
    """A run folder of made-up parallel rows (rate per process count in RATE); the B=64 rows at
    one process are noisy."""
    spec = SweepSpec(
        "s", models=("mlp",), size="tiny", devices=("cpu",), batch_sizes=(16, 64),
        optimizers=("adamw",), parallel=("ddp", "fsdp"), nproc=(1, 2), scaling=("weak", "strong"),
    )  # fmt: skip
    spec = SweepSpec(**{**spec.__dict__, **axes})
    store = ResultStore(tmp_path / "run")
    store.write_json("env.json", {"cpu": {"model": "A Long CPU Name @ 2.90GHz"}})
    for p in spec.points():
        store.append(
            make_row(
                p,
                "ok",
                step_time_s=p.batch_size / RATE[p.nproc],
                samples_per_s=RATE[p.nproc],
                world_size=p.nproc,
                collective_fraction=0.1,
                rank_model_state_bytes=1000,
                noisy=p.batch_size == 64 and p.nproc == 1,
            )
        )
    return tmp_path / "run"


def _parallel_table(page: str) -> list[list[str]]:
    section = page[page.index("<h2>Parallel points") :]
    table = section[section.index("<table") : section.index("</table>")]
    return [
        [unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r)]
        for r in re.findall(r"<tr>(.*?)</tr>", table)
    ]


def test_the_parallel_table_names_the_optimizer_and_marks_noisy_efficiencies(
    tmp_path: Path,
) -> None:
    page = build_report([_run(tmp_path)]).read_text()
    head, *rows = _parallel_table(page)
    assert "optimizer" in head
    cell = dict(zip(head, zip(*rows, strict=True), strict=True))
    assert set(cell["optimizer"]) == {"adamw"}
    assert cell["scaling"].count("one process") == 4  # ddp, fsdp at B=16 and B=64: once each
    # the B=64 baseline is noisy: every efficiency against it says so, the B=16 ones do not
    assert sum(e.endswith("(noisy)") for e in cell["efficiency"]) == 6
    assert "75%" in cell["efficiency"] and "75% (noisy)" in cell["efficiency"]


def test_the_baseline_is_the_first_point_of_both_the_weak_and_the_strong_line(
    tmp_path: Path,
) -> None:
    rows = R.parallel_rows(load_results(_run(tmp_path)).assign(device_name="cpu (A Long CPU)"))
    lines = R.chart_lines(rows[rows["parallel"] == "ddp"])
    assert [(line.label, list(line.rows["processes"])) for line in lines] == [
        ("ddp B=16 strong", [1, 2]),
        ("ddp B=16 weak", [1, 2]),
        ("ddp B=64 strong", [1, 2]),
        ("ddp B=64 weak", [1, 2]),
    ]
    # the legend names what tells lines apart; the device every line shares is said once
    assert R.shared_fields(rows) == "cpu (A Long CPU) fp32 adamw"


def test_weak_and_strong_of_a_layout_share_a_colour_told_apart_by_style(tmp_path: Path) -> None:
    run = _run(tmp_path, precisions=("fp32", "bf16"), optimizers=("sgd", "adamw"))
    rows = R.parallel_rows(load_results(run).assign(device_name="cpu"))
    lines = R.chart_lines(rows)
    assert len(lines) == 32 and len({line.layout for line in lines}) == 16
    assert len({(line.layout, line.style) for line in lines}) == 32
    build_report([run])
    assert (run / "plots" / "scaling.png").stat().st_size > 0


def test_the_console_summary_shows_each_parallel_rows_efficiency(tmp_path: Path) -> None:
    frame = load_results(_run(tmp_path, parallel=("ddp",), batch_sizes=(64,)))
    text = _printed(frame)
    assert "efficiency" in text
    lines = [line for line in text.splitlines() if "ddp x" in line]
    assert ["100% (noisy)" in lines[0], "75% (noisy)" in lines[2]] == [True, True]
    assert "ddp x1 " in lines[0] and "None" not in text  # the baseline has no scaling


def _printed(frame: pd.DataFrame) -> str:
    from rich.console import Console

    out = Console(width=200, record=True, markup=False)
    out.print(results_table.summary_table(frame, width=200))
    return out.export_text()
