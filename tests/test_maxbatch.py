from __future__ import annotations

import json

import pytest
from isolation import memory_cap

from gpubench.cli import main
from gpubench.config.spec import Budget, Point
from gpubench.run import maxbatch


def test_memory_model_search_brackets_the_boundary_in_few_probes() -> None:
    point = Point("fault_workloads:hungry", "tiny", "cpu", "fp32", "sgd", 1)
    # about 4 MiB a sample under 320 MiB of headroom: the boundary lies near 70 samples
    found = maxbatch.find(point, memory_cap(320), confirm_budget=Budget.fixed(2, 1))
    phases = [p.phase for p in found.probes]
    assert phases[0] == "fit" and "jump" in phases, phases
    assert len(found.search_probes) <= 6, [(p.phase, p.batch_size) for p in found.probes]
    assert found.stopped is None and not found.ceiling_reached and found.largest > 8
    # the answer fitted its probe and its full measurement; a batch within the resolution
    # above it did not fit
    confirmed = [p for p in found.probes if p.phase == "confirm"]
    assert confirmed[-1].batch_size == found.largest and confirmed[-1].fits
    failed = [p.batch_size for p in found.probes if p.status == "oom"]
    assert failed and found.smallest_failed == min(failed)
    assert found.resolution == min(failed) - found.largest <= max(8, int(0.02 * found.largest))
    assert all(p.memory_bytes for p in found.probes if p.fits), "probes measure their peak"
    summary = found.to_dict()
    assert summary["search_probe_count"] == len(found.search_probes)
    assert summary["search_seconds"] == pytest.approx(sum(p.seconds for p in found.search_probes))


def test_search_stops_at_the_ceiling() -> None:
    point = Point("mlp", "tiny", "cpu", "fp32", "adamw", 1)
    found = maxbatch.find(point, memory_cap(), ceiling=6)
    assert [p.batch_size for p in found.probes] == [1, 6]
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
        ("fit", 1),
        ("jump", 4),  # the first probe's estimate of a sample says 4 (the ceiling) fits
        ("confirm", 4),
        ("time", 1),
        ("time", 2),
    ]
    timed = {p["batch_size"]: p["samples_per_s"] for p in result["probes"] if p["phase"] != "fit"}
    assert result["best_batch"] == max(timed, key=timed.__getitem__)
    assert main([*args, *common]) == 0
    printed = capsys.readouterr().out
    # issue 42: a ceiling is a ceiling, with no resolution: nothing above it was tried
    assert (
        "largest batch that fits: at least 4, the --ceiling (nothing above it was tried; more "
        "may fit)"
    ) in printed
    assert "within" not in printed.partition("largest batch that fits")[2].splitlines()[0]
    assert "throughput-optimal batch:" in printed
    assert "probes: 2 to search (" in printed


def test_max_batch_of_an_unsupported_point_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["max-batch", "--model", "mlp", "--size", "tiny", "--device", "cpu"]
    assert main([*argv, "--precision", "tf32", "--max-memory", "4G"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("gpubench: error: mlp/tiny cpu tf32") and "CUDA" in err


def test_a_full_run_that_runs_out_of_memory_is_searched_down() -> None:
    """Probes of 4 steps fit batches whose full run of 21 steps does not (1 MiB per sample per
    step, tests/growing_workloads.py): the answer is a batch whose full run fitted, and the
    bracket it reports holds a failure within the resolution above it (issue 23: today's code
    fell back to the only smaller probe, B=1, "within 8")."""
    point = Point("growing_workloads:growing", "tiny", "cpu", "fp32", "sgd", 1)
    full = Budget.fixed(20, warmup_steps=1)
    found = maxbatch.find(point, memory_cap(320), ceiling=64, confirm_budget=full)
    confirms = [p for p in found.probes if p.phase == "confirm"]
    assert confirms[0].status == "oom", [(p.phase, p.batch_size, p.status) for p in found.probes]
    assert found.stopped is None and found.largest > 1
    assert any(p.batch_size == found.largest and p.fits for p in confirms)
    assert found.smallest_failed is not None
    assert found.resolution == found.smallest_failed - found.largest
    assert found.resolution <= max(8, int(0.02 * found.largest))
    failed = [p.batch_size for p in found.probes if p.status == "oom"]
    assert min(failed) == found.smallest_failed
    summary = found.to_dict()
    assert (summary["largest_batch"], summary["smallest_failed"]) == (
        found.largest,
        found.smallest_failed,
    )
