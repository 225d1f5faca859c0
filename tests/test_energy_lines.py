"""Issue 41, items 6 and 7: energy lines that help (measured energy breaking a tie on speed; the
"charts not drawn" list agreeing with the charts drawn; issue 49: a CPU without RAPL said once
per run, not per model) and a cross-device ratio that compares like with like."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from report_fixture import env, speed_row, write_run

from gpubench.config.spec import Point
from gpubench.report.build import build_report
from gpubench.run import cpu_watts
from gpubench.science import devices
from gpubench.science.devices import DeviceLead, energy_lines, same_batch
from gpubench.store.results import load_results

ROOT = Path(__file__).parent.parent
H100_QUICK = ROOT / "results" / "20261125-h100-quick" / "run" / "results.jsonl"


def _published() -> list[dict[str, Any]]:
    return [json.loads(line) for line in H100_QUICK.read_text().splitlines()]


def test_old_rows_with_a_tdp_estimate_load_and_say_once_that_the_cpu_was_not_measured() -> None:
    """The H100 host's CPU has no RAPL: its rows (written before issue 49) hold a TDP estimate,
    which each model's verdict said ("estimated 24.6 samples/J from the CPU's TDP ..."). Now
    the estimate is read by nothing: no CPU line per row, one line for the run."""
    frame = load_results(H100_QUICK.parent)
    assert "cpu_samples_per_j_estimate" in frame  # an old column, kept as it was written
    cpu = [r for r in _published() if r["device"] == "cpu" and r["status"] == "ok"]
    assert cpu and all(r.get("cpu_samples_per_j_estimate") for r in cpu)
    assert all(devices.of(r) == "" for r in cpu)
    line = devices.cpu_unmeasured(cpu, "/sys/class/powercap does not exist")
    assert line == (
        "CPU energy: not measured (RAPL could not be read: /sys/class/powercap does not exist); "
        "give sweep --cpu-watts W to state the CPU's power"
    )
    assert devices.cpu_unmeasured([r for r in _published() if r["device"] != "cpu"], None) is None


def _row(precision: str, batch: int, **energy: Any) -> dict[str, Any]:
    return {
        "model": "mlp",
        "model_size": "base",
        "device": "cuda",
        "precision": precision,
        "optimizer": "adamw",
        "batch_size": batch,
        "samples_per_s": 1000.0,
        "status": "ok",
        **energy,
    }


def test_the_users_stated_watts_are_no_measured_energy() -> None:
    bf16 = _row("bf16", 256, samples_per_j=1308.0)
    stated = _row("fp32", 256) | {"device": "cpu", "cpu_samples_per_j": 5000.0}
    stated |= {"cpu_energy_method": "stated", "cpu_watts": 65.0}
    assert devices.measured_samples_per_j(stated) is None
    assert devices.measured_samples_per_j(bf16) == 1308.0


def test_measured_energy_is_said_between_tied_configurations() -> None:
    tf32 = _row("tf32", 256, samples_per_j=954.0, energy_method="counter")
    bf16 = _row("bf16", 256, samples_per_j=1308.0, energy_method="counter")
    lead = DeviceLead(
        "cuda",
        "cuda tf32 B=256",
        1000.0,
        {},
        [{"label": "cuda bf16 B=256", "identity": bf16, "samples_per_s": 990.0}],
        "",
        {"rows": 2, "busy": 0, "noisy": 0, "clean": 2},
        tf32,
    )
    lines = energy_lines(tf32, [lead], [tf32, bf16], ["precision"])
    assert lines == [
        "the fastest (cuda tf32 B=256): 954 samples/J (NVML energy counter)",
        "tied on speed on cuda, cuda bf16 B=256 trains the most per joule: 1,308 samples/J "
        "(NVML energy counter) against 954 (cuda tf32 B=256)",
    ]  # and not again as "most samples/J of any cuda row"


def test_a_cross_device_ratio_compares_like_with_like() -> None:
    """results/20261125-h100-quick, mlp/small sgd: "cuda 1,051.63x cpu" set the GPU at
    B=65536 against the CPU's largest, B=64. At B=64, where both ran, the fastest of each."""
    ok = [
        r
        for r in _published()
        if r["status"] == "ok" and (r["model"], r["optimizer"]) == ("mlp", "sgd")
    ]
    at = same_batch("cuda", "cpu", ok, ["precision"])
    assert at is not None and at.batch_size == 64
    assert (at.faster_label, at.slower_label) == ("cuda fp32 B=64", "cpu bf16 B=64")
    assert round(at.ratio, 2) == 1.26
    fastest = {
        d: max((r for r in ok if r["device"] == d), key=lambda r: r["samples_per_s"])
        for d in ("cuda", "cpu")
    }
    leads = [
        DeviceLead(
            d,
            f"{d} B={int(r['batch_size'])}",
            r["samples_per_s"],
            {},
            [],
            "",
            {"rows": 1, "busy": 0, "noisy": 0, "clean": 1},
            r,
        )
        for d, r in fastest.items()
    ]
    (a,) = devices.across(leads, ok)
    line = a.line()
    assert line.startswith("cuda x1.26 cpu at B=64, the largest batch both ran: the fastest of ")
    assert "the fastest on each, at different batches, x1,052: cuda B=65536" in line
    assert a.to_dict()["same_batch"]["batch_size"] == 64
    # the two fastest at one batch: the line as before, leader against leader
    at_64 = [r for r in ok if r["batch_size"] == 64]
    top_64 = {
        d: max((r for r in at_64 if r["device"] == d), key=lambda r: r["samples_per_s"])
        for d in ("cuda", "cpu")
    }
    leads_64 = [
        DeviceLead(
            d,
            f"{d} B=64",
            r["samples_per_s"],
            {},
            [],
            "",
            {"rows": 1, "busy": 0, "noisy": 0, "clean": 1},
            r,
        )
        for d, r in top_64.items()
    ]
    (plain,) = devices.across(leads_64, at_64)
    assert plain.line().startswith("cuda x1.26 cpu: the fastest on each, cuda B=64")


def test_charts_not_drawn_agree_with_the_charts_drawn(tmp_path: Path) -> None:
    """Issue 41: the list of charts not drawn once said "no device energy was measured" under
    a drawn energy chart. A CPU without RAPL or --cpu-watts draws neither energy chart and
    lists both; with --cpu-watts it draws both, and lists neither."""
    rng = np.random.default_rng(0)
    rows = [
        speed_row(Point("mlp", "small", "cpu", "fp32", "sgd", b), 1e-3, 1e-5, rng) for b in (4, 16)
    ]
    page = build_report([write_run(tmp_path / "none", rows, env())]).read_text()
    assert "plots/efficiency.png" not in page and "plots/energy.png" not in page
    assert "Energy: no energy figure (no NVML or RAPL reading, no --cpu-watts)" in page
    assert "Energy and cost efficiency: no energy figure in these rows." in page
    for r in rows:
        r.update(cpu_watts.columns(r, 65.0))
    page = build_report([write_run(tmp_path / "stated", rows, env())]).read_text()
    assert "plots/efficiency.png" in page and "plots/energy.png" in page
    assert "no energy figure" not in page
