from __future__ import annotations

import json
import math

import pytest
from isolation import memory_cap

from gpubench.cli import main
from gpubench.config.spec import Budget, Point
from gpubench.run import maxbatch


def test_max_batch_finds_the_boundary_in_no_more_probes_than_needed() -> None:
    point = Point("fault_workloads:hungry", "tiny", "cpu", "fp32", "sgd", 1)
    # about 4 MiB a sample under 128 MiB of headroom: the boundary lies between 16 and 32
    found = maxbatch.find(point, memory_cap(128), start=4, confirm_budget=Budget.fixed(4, 2))
    doubled = [p for p in found.probes if p.phase == "double"]
    searched = [p for p in found.probes if p.phase == "search"]
    confirmed = [p for p in found.probes if p.phase == "confirm"]
    assert [p.batch_size for p in doubled] == [4 * 2**i for i in range(len(doubled))]
    assert all(p.fits for p in doubled[:-1]) and doubled[-1].status == "oom"
    assert "can't allocate memory" in (doubled[-1].error or "")
    gap = doubled[-1].batch_size - doubled[-2].batch_size
    assert len(searched) <= math.ceil(math.log2(gap)), "no more than binary search needs"
    # the answer fitted its probe and its full measurement, and one more sample did not fit
    assert found.stopped is None and not found.ceiling_reached
    assert confirmed[-1].batch_size == found.largest and confirmed[-1].fits
    fitted = {p.batch_size for p in found.probes if p.fits}
    failed = {p.batch_size for p in found.probes if p.status == "oom"}
    assert found.largest in fitted
    if len(confirmed) == 1:  # the confirming run agreed with the probes
        assert found.largest + 1 in failed


def test_doubling_stops_at_the_ceiling() -> None:
    point = Point("mlp", "tiny", "cpu", "fp32", "adamw", 1)
    found = maxbatch.find(point, memory_cap(), ceiling=6, binary=False)
    assert [p.batch_size for p in found.probes] == [1, 2, 4, 6]
    assert found.largest == 6 and found.ceiling_reached and found.best_batch is None
    assert maxbatch.powers_of_two(6) == [1, 2, 4] and maxbatch.powers_of_two(0) == [1]


def test_max_batch_command_times_the_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["max-batch", "--model", "mlp", "--size", "tiny", "--device", "cpu", "--ceiling", "4"]
    common = ["--max-memory", str(memory_cap()), "--steps", "3", "--time"]
    assert main([*args, *common, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["largest_batch"] == 4 and result["ceiling_reached"]
    phases = [(p["phase"], p["batch_size"]) for p in result["probes"]]
    assert phases == [
        ("double", 1),
        ("double", 2),
        ("double", 4),
        ("confirm", 4),
        ("time", 1),
        ("time", 2),
    ]
    timed = {
        p["batch_size"]: p["samples_per_s"] for p in result["probes"] if p["phase"] != "double"
    }
    assert result["best_batch"] == max(timed, key=timed.__getitem__)
    assert main([*args, *common]) == 0
    printed = capsys.readouterr().out
    assert "largest batch that fits: 4 (the --ceiling; more may fit)" in printed
    assert "throughput-optimal batch:" in printed


def test_max_batch_of_an_unsupported_point_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["max-batch", "--model", "mlp", "--size", "tiny", "--device", "cpu"]
    assert main([*argv, "--precision", "tf32", "--max-memory", "4G"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("gpubench: error: mlp/tiny cpu tf32") and "CUDA" in err
