"""Energy to target (issue 32): convergence rows carry the joules their training spent until the
target was first met (GPU and CPU), and the verdict names the least-energy configuration beside
the least-time one where they differ."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
import torch

from gpubench.config.convergence import Convergence
from gpubench.config.spec import Point
from gpubench.probes import rapl, stretch_energy
from gpubench.probes.nvml_readings import Reading
from gpubench.run import cpu_watts
from gpubench.science import economy
from gpubench.science.convergence import train_point
from gpubench.science.verdict import verdicts
from gpubench.store.row import make_row


def test_a_convergence_row_carries_the_cpus_joules_to_target() -> None:
    conv = Convergence(max_steps=150, eval_every_steps=50, noise_every_steps=0, eval_rel_gap=0.0)
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 32, 0, "device", lr_scaling="none")
    row = train_point(point, conv)
    assert row["status"] == "ok" and row["steps_to_target"] is not None
    assert row["energy_to_target_j"] is None  # a CPU run has no GPU energy
    if rapl.unavailable_reason() is not None:  # issue 49: no RAPL, no figure
        assert row["cpu_energy_method"] is None and row["cpu_energy_to_target_j"] is None
        assert all(c["cpu_energy_j"] is None for c in row["curve"])
        # the user's stated watts: W x the training time to the target, said as stated
        stated = cpu_watts.columns(row, 65.0)
        assert stated["cpu_energy_method"] == "stated" and stated["cpu_watts"] == 65.0
        assert stated["cpu_energy_to_target_j"] == pytest.approx(65.0 * row["time_to_target_s"])
        return
    reached = next(c for c in row["curve"] if c["step"] == row["steps_to_target"])
    assert row["cpu_energy_method"] == "rapl"
    assert row["cpu_energy_to_target_j"] == reached["cpu_energy_j"]
    assert cpu_watts.columns(row, 65.0) == {}  # RAPL measured it: stated watts do not replace it
    joules = [c["cpu_energy_j"] for c in row["curve"]]
    assert joules[0] == 0 and joules == sorted(joules)  # cumulative over the stretches


class _FakeGpu:
    """An NVML reader whose energy counter moves 10 J per reading."""

    def __init__(self) -> None:
        self.counter = 1000.0

    def read(self) -> Reading:
        self.counter += 10.0
        return Reading(t_s=0.0, energy_j=self.counter)


def test_gpu_energy_sums_the_stretches_and_leaves_the_evaluations_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = _FakeGpu()
    monkeypatch.setattr(stretch_energy, "_gpu_reader", lambda device: gpu)
    energy = stretch_energy.StretchEnergy(torch.device("cuda"))
    assert energy.curve_entry()["gpu_energy_j"] == 0.0
    for _ in range(3):
        energy.start()  # reads 1010, 1030, 1050
        energy.stop()  # reads 1020, 1040, 1060
        gpu.read()  # an evaluation between stretches moves the counter: not counted
    assert energy.curve_entry()["gpu_energy_j"] == pytest.approx(30.0)
    assert energy.totals.stretches == 3
    got = stretch_energy.to_target({"gpu_energy_j": 30.0, "cpu_energy_j": 2.0})
    assert got["energy_to_target_j"] == 30.0 and got["cpu_energy_method"] == "rapl"
    assert stretch_energy.to_target(None) == {}


def _run(b: int, seed: int, time_s: float, joules: float, device: str = "cuda") -> dict[str, Any]:
    p = Point("mlp", "tiny", device, "fp32", "sgd", b, seed, "device", lr_scaling="linear")
    column = "energy_to_target_j" if device != "cpu" else "cpu_energy_to_target_j"
    stated = {"cpu_energy_method": "stated", "cpu_watts": 200.0} if device == "cpu" else {}
    return make_row(
        p,
        "ok",
        **stated,
        steps_to_target=10,
        time_to_target_s=time_s,
        step_time_s=0.01,
        samples_per_s=b / 0.01,
        dataset="digits",
        target_metric="eval_accuracy",
        target=0.9,
        **{column: joules},
    )


def test_the_least_energy_configuration_is_named_beside_the_fastest() -> None:
    rows = [_run(256, s, 1.0, 900.0) for s in (0, 1)]  # fastest, power-hungry
    rows += [_run(32, s, 2.0, 400.0 + s) for s in (0, 1)]
    rows += [_run(8, 0, 1.5, 100.0), _run(8, 1, 9.9, 50.0)]
    rows[-1]["time_to_target_s"] = None  # a seed that missed: B=8 cannot be named
    lines = economy.target_lines(rows)
    assert lines == [
        "least energy to target: cuda fp32 B=32, 400 J median; "
        "the fastest to target, cuda fp32 B=256: 900 J"
    ]
    (v,) = verdicts(pd.DataFrame(rows))
    assert lines[0] in "\n".join(v.lines()) and v.to_dict()["economy"] == lines


def test_the_fastest_with_the_least_energy_is_said_once() -> None:
    rows = [_run(256, 0, 1.0, 100.0), _run(32, 0, 2.0, 400.0)]
    assert economy.target_lines(rows) == [
        "least energy to target: the fastest to target too, 100 J median"
    ]


def test_a_stated_cpu_figure_is_said_to_be_one() -> None:
    rows = [_run(256, 0, 1.0, 900.0), _run(32, 0, 2.0, 400.0, device="cpu")]
    (line,) = economy.target_lines(rows)
    assert line.startswith("least energy to target: cpu fp32 B=32, 400 J median")
    assert line.endswith("(the CPU's at its stated --cpu-watts)")
