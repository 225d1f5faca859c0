"""Issue 28, items 1, 6, 9 and 10: a verdict over several devices answers per device and across
them; a filter on rows (busy) never decides between devices; the energy line describes the
winner. Decided on the real H100 rows of the default sweep (tests/data/h100/quick1), where
every CUDA row was marked busy, and on synthetic rows for each branch."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from report_fixture import speed_row

from gpubench.cli.main import main
from gpubench.config.spec import Point
from gpubench.report.explain import explain_runs
from gpubench.report.runs import combine, load_runs
from gpubench.science import devices, leaders, levers
from gpubench.science.partition import device_of, label
from gpubench.science.verdict import ModelVerdict, verdicts
from gpubench.store.wording import number, times

QUICK1 = Path(__file__).resolve().parent / "data" / "h100" / "quick1"
CPU = Point("mlp", "small", "cpu", "fp32", "sgd", 64)
CUDA = dataclasses.replace(CPU, device="cuda")


def _rows(*specs: tuple[Point, float], **extra: Any) -> list[dict[str, Any]]:
    """Rows whose step time is about `seconds`, known to within 1%."""
    rng = np.random.default_rng(0)
    out = []
    for point, seconds in specs:
        r = speed_row(point, seconds, 0.0, rng, n=40, **extra)
        r["step_time_ci_rel"] = 0.01
        out.append(r)
    return out


def _quick1() -> tuple[list[ModelVerdict], pd.DataFrame]:
    found, _ = explain_runs([QUICK1])
    return found, combine(load_runs([QUICK1]))


def _partition(frame: pd.DataFrame, v: ModelVerdict) -> pd.DataFrame:
    ok = frame[(frame["status"] == "ok") & frame["samples_per_s"].notna()]
    return ok[(ok["model"] == v.identity["model"]) & (ok["optimizer"] == v.identity["optimizer"])]


def test_the_default_sweep_on_an_h100_names_cuda_for_every_model_and_optimizer() -> None:
    found, frame = _quick1()
    pairs = {(m, o) for m, o in frame[["model", "optimizer"]].itertuples(index=False)}
    assert {(v.identity["model"], v.identity["optimizer"]) for v in found} == pairs
    for v in found:
        rows = _partition(frame, v)
        cuda, cpu = rows[rows["device"] == "cuda"], rows[rows["device"] == "cpu"]
        # the fastest (or every configuration tied with it) is a CUDA one
        assert v.device == "cuda" and all(t["identity"]["device"] == "cuda" for t in v.ties)
        assert v.lines()[0].startswith((f"{v.model}: fastest cuda", f"{v.model}: tie: cuda"))
        # per device: cuda first (the faster), each leader one of its own device's rows
        assert [d.device for d in v.devices] == ["cuda", "cpu"]
        top = cuda.loc[cuda["samples_per_s"].idxmax()]
        assert v.devices[0].samples_per_s == pytest.approx(top["samples_per_s"])
        assert v.devices[1].identity["device"] == "cpu"
        # across: leader over leader, and over every configuration measured on both, as the
        # speedup chart takes them (CPU step time over CUDA step time)
        (a,) = v.across
        assert (a.faster.device, a.slower.device) == ("cuda", "cpu")
        assert a.ratio == pytest.approx(v.devices[0].samples_per_s / v.devices[1].samples_per_s)
        assert a.ratio > 1
        key = [c for c in ("precision", "batch_size") if c in rows]
        steps = cpu.set_index(key)["step_time_s"] / cuda.set_index(key)["step_time_s"]
        assert (a.low, a.high) == pytest.approx((steps.min(), steps.max()))
        assert a.configurations == len(steps)
        same = steps[(top["precision"], top["batch_size"])]
        assert a.same == pytest.approx(same)
        assert v.cpu_speedup is not None and f"{times(same)} the same configuration" in (
            v.cpu_speedup
        )
        assert any(k == "across devices" and t.startswith("cuda ") for k, t in v.device_items())


def test_busy_rows_are_left_out_within_their_device_and_a_wholly_busy_device_is_kept() -> None:
    found, frame = _quick1()
    for v in found:
        rows = _partition(frame, v)
        cuda, cpu = rows[rows["device"] == "cuda"], rows[rows["device"] == "cpu"]
        assert cuda["busy"].all()  # the H100's sampler made every CUDA row busy
        gpu = v.devices[0]
        assert gpu.contended and gpu.counts == {
            "rows": len(cuda),
            "busy": len(cuda),
            "noisy": int(cuda["noisy"].sum()),
            "clean": 0,
        }
        said = v.stands_on or ""
        assert f"every one of {len(cuda)} cuda rows was contended (busy), all kept" in said
        # the CPU had rows on cores of their own: its busy ones are left out of its answer
        busy_cpu = cpu[cpu["busy"] == True]  # noqa: E712
        if len(busy_cpu):
            assert f"{len(busy_cpu)} of {len(cpu)} cpu rows contended (busy), left out" in said
            leader = cpu[
                (cpu["precision"] == v.devices[1].identity["precision"])
                & (cpu["batch_size"] == v.devices[1].identity["batch_size"])
            ]
            assert not leader["busy"].iloc[0]


def test_a_confirmation_of_one_device_decides_only_that_device() -> None:
    found, _ = _quick1()
    record = json.loads((QUICK1 / "confirm.json").read_text())["partitions"]
    assert all(c["device"] == "cpu" for p in record for c in p["candidates"])
    for v in found:
        # the rounds re-measured CPU rows: they say nothing of the CUDA leader
        assert "not re-measured (the confirmation re-measured cpu" in v.confidence
        # ... and decide the CPU's own answer: its leader is the rounds' leader
        (p,) = [
            p
            for p in record
            if p["fixed"]["optimizer"] == v.identity["optimizer"]
            and p["fixed"]["model"] == v.identity["model"]
        ]
        # (decided again from its rounds: their per-round ratios pick the leader, issue 52)
        leader = p["candidates"][leaders.recorded(p).leader]
        assert "interleaved rounds" in v.devices[1].confidence
        cpu = v.devices[1].identity
        assert (cpu["precision"], cpu["batch_size"]) == (leader["precision"], leader["batch_size"])


def test_explain_json_keeps_its_keys_and_adds_one_entry_per_device(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", str(QUICK1), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    for v in answer["verdicts"]:
        for key in ("winner", "leader", "ties", "confidence", "stands_on", "cpu_speedup"):
            assert key in v
        assert v["leader"]["identity"]["device"] == "cuda"
        assert [d["device"] for d in v["devices"]] == ["cuda", "cpu"]
        assert v["devices"][0]["contended"] is True and v["devices"][1]["contended"] is False
        (a,) = v["across_devices"]
        ratio = (
            v["devices"][0]["leader"]["samples_per_s"] / v["devices"][1]["leader"]["samples_per_s"]
        )
        assert (a["faster"], a["slower"]) == ("cuda", "cpu") and a["ratio"] == pytest.approx(ratio)


def test_the_console_answers_per_device_and_across(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(QUICK1)]) == 0
    out = capsys.readouterr().out
    headlines = [line for line in out.splitlines() if line.split(":")[0].endswith(("sgd", "adamw"))]
    assert len(headlines) == 6
    assert all(": fastest cuda" in line or ": tie: cuda" in line for line in headlines)
    assert not any("cpu" in line for line in headlines)
    assert out.count("  on cuda: fastest cuda") == 6 and out.count("  on cpu: fastest cpu") == 6
    assert out.count("  across devices: cuda ") == 6


def test_synthetic_busy_rows_on_either_device() -> None:
    # the GPU's rows all busy, the CPU's clean: the GPU is kept, compared, and wins
    gpu_busy = _rows((CUDA, 0.001), busy=True, other_load_cores=0.45)
    cpu_clean = _rows((CPU, 0.006))
    (v,) = verdicts(pd.DataFrame(gpu_busy + cpu_clean))
    assert v.device == "cuda" and v.across[0].ratio == pytest.approx(6, rel=0.05)
    assert "every one of 1 cuda row was contended (busy), all kept" in (v.stands_on or "")
    # the other way round: the CPU's rows all busy, the GPU's clean, the CPU faster
    (w,) = verdicts(pd.DataFrame(_rows((CPU, 0.001), busy=True) + _rows((CUDA, 0.004))))
    assert w.device == "cpu" and [d.device for d in w.devices] == ["cpu", "cuda"]
    assert w.cpu_speedup is None and w.across[0].line().startswith("cpu x4.00 cuda")
    # within one device a busy row is left out where that device has clean ones
    b16 = dataclasses.replace(CUDA, batch_size=16)
    rows = _rows((b16, 0.0001), busy=True) + _rows((CUDA, 0.001)) + cpu_clean
    (x,) = verdicts(pd.DataFrame(rows))
    assert x.fastest == "cuda fp32 B=64" and x.devices[0].fastest == "cuda fp32 B=64"
    assert "1 of 2 cuda rows contended (busy), left out (cuda fp32 B=16)" in (x.stands_on or "")


def test_one_device_has_no_per_device_lines() -> None:
    (v,) = verdicts(
        pd.DataFrame(_rows((CPU, 0.001), (dataclasses.replace(CPU, batch_size=16), 0.002)))
    )
    assert len(v.devices) == 1 and v.across == [] and v.device_items() == []
    assert not any(line.startswith(("  on ", "  across")) for line in v.lines())


def test_the_energy_line_describes_the_winner_or_says_why_it_has_none() -> None:
    found, frame = _quick1()
    (v,) = [x for x in found if x.model == "transformer/small, sgd"]
    rows = _partition(frame, v)
    winner = rows[(rows["device"] == "cuda")].sort_values("samples_per_s").iloc[-1]
    measured = rows[rows["samples_per_j"].notna()]
    assert len(measured) and pd.isna(winner["samples_per_j"])  # another row had energy
    first = v.energy[0]
    assert first == f"the fastest ({v.fastest}): no energy figure ({winner['energy_note']})"
    # another row's figure is said as that row's, never under the winner
    other = measured.sort_values("samples_per_j").iloc[-1]
    figure = number(float(other["samples_per_j"]))
    (line,) = [e for e in v.energy if figure in e]
    assert "not the fastest on cuda" in line and label(other.to_dict()) in line
    # a winner with a figure has it on the first line (synthetic rows, both devices' branches)
    gpu = _rows((CUDA, 0.001), samples_per_j=12.5, energy_method="counter")
    cpu = _rows((CPU, 0.004), cpu_samples_per_j=3.25, cpu_energy_method="rapl")
    (w,) = verdicts(pd.DataFrame(gpu + cpu))
    assert w.energy[:2] == [
        "the fastest (cuda fp32 B=64): 12.5 samples/J (NVML energy counter)",
        "the fastest on cpu (cpu fp32 B=64): 3.25 samples/J (RAPL package)",
    ]


def test_the_energy_wording_of_each_device() -> None:
    of = devices.of
    assert of({"device": "cpu"}) == ""  # issue 49: said once per run (devices.cpu_unmeasured)
    assert (
        of({"device": "cpu", "cpu_energy_note": "too short"}) == "no CPU energy figure (too short)"
    )
    stated = {"device": "cpu", "cpu_samples_per_j": 3.25, "cpu_energy_method": "stated"}
    assert of({**stated, "cpu_watts": 65.0}) == (
        "3.25 samples/J (stated: 65 W (--cpu-watts) x its step time)"
    )
    gpu = {"device": "cuda", "avg_power_w": 100.0}
    assert of(gpu) == "no energy figure (its row has no NVML energy reading)"
    assert of({"device": "cuda"}) == "no energy figure (no NVML reading in its row)"
    assert of(gpu | {"samples_per_j": 2.0, "energy_method": "power_integral"}) == (
        "2 samples/J (NVML sampled power, integrated)"
    )


def test_measure_larger_batches_names_the_device_only_where_several_ran() -> None:
    one = _rows((CPU, 0.001), (dataclasses.replace(CPU, batch_size=16), 0.002))
    line, todo = levers._larger_batch(one[0], one, one)
    assert todo == "measure larger batches: --batch-sizes auto"
    both = one + _rows((CUDA, 0.0005))
    line, todo = levers._larger_batch(both[-1], both, both)
    assert todo == "measure larger batches on cuda: --devices cuda --batch-sizes auto"
    assert "largest measured on cuda" in line


def test_a_one_process_ddp_row_read_back_from_a_frame_has_no_nan_in_its_label() -> None:
    # the scaling suite's DDP x1 rows have no scaling mode (None), which a frame reads back as
    # NaN: their verdict line read "cpu fp32 ddp x1 nan B=64"
    import math

    row = {"device": "cpu", "precision": "fp32", "parallel": "ddp", "nproc": 1.0,
           "scaling": math.nan, "batch_size": 64.0}  # fmt: skip
    assert label(row) == "cpu fp32 ddp x1 B=64"
    assert label({**row, "nproc": 2, "scaling": "weak"}) == "cpu fp32 ddp x2 weak B=64"


def test_a_pool_of_two_gpu_models_keeps_each_its_own_name() -> None:
    """Issue 53: pooled rows of one partition on an A100 and on an H100 (both `cuda`) are two
    devices of the verdict, each named from its row's device_name, never one `cuda`."""
    a100 = dict(pool_devices="0", device_name="NVIDIA A100-SXM4-80GB")
    h100 = dict(pool_devices="1", device_name="NVIDIA H100 80GB HBM3")
    rows = [
        *_rows((CUDA, 0.004), (dataclasses.replace(CUDA, batch_size=32), 0.003), **a100),
        *_rows((CUDA, 0.002), (dataclasses.replace(CUDA, batch_size=32), 0.0016), **h100),
    ]
    (v,) = verdicts(pd.DataFrame(rows))
    names = [d.device for d in v.devices]
    assert names == ["cuda (NVIDIA H100 80GB HBM3)", "cuda (NVIDIA A100-SXM4-80GB)"]
    assert v.device == names[0]
    (a,) = v.across
    assert a.ratio == pytest.approx(2.0, rel=0.05) and a.configurations == 2
    # a row no pool measured keeps its bare device, as before; so does a pooled CPU row
    assert device_of({k: val for k, val in rows[0].items() if k != "pool_devices"}) == "cuda"
    assert device_of({**rows[0], "device": "cpu"}) == "cpu"
    assert device_of({**rows[0], "device_name": "cuda (NVIDIA H100 80GB HBM3)"}) == names[0]
