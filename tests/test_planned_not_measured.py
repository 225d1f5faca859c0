"""Issue 41 item 7 and issue 42 item 3: a run that stopped early says what it planned and did not
reach, in the verdict, the report and `explain --json`, and the verdict never calls a batch "the
largest" or a setting "not measured" against points that were planned and not measured. The
cross-device ratio compares like with like (the same batch where both ran, each named)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_fixture import env, speed_row, write_run

from gpubench.cli.main import main
from gpubench.config.keys import identity_dict
from gpubench.config.spec import Point, SweepSpec
from gpubench.report.explain import explain_runs
from gpubench.report.verdict_section import verdict_section
from gpubench.run import shard
from gpubench.run.folder import as_saved
from gpubench.science import levers, plan
from gpubench.science.verdict import ModelVerdict
from gpubench.store.growth_record import GrowthRecord, Unmeasured

H100_QUICK = Path(__file__).parents[1] / "results" / "20261125-h100-quick" / "run"
BATCHES = (4, 16, 64)
OVER = "B=64 would take about 12.0 s, 3.1 s of its series' 8 s left"


def _point(precision: str, batch: int) -> Point:
    return Point("mlp", "tiny", "cpu", precision, "sgd", batch)


def _spec() -> SweepSpec:
    return SweepSpec(
        name="t",
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=BATCHES,
        precisions=("fp32", "bf16"),
        optimizers=("sgd",),
    )


def _suite() -> dict[str, Any]:
    return as_saved(_spec())


def _folder(root: Path, measured: list[Point], **files: Any) -> Path:
    """A run folder of the plan _suite() with rows for `measured` only (throughput rising with
    the batch: the largest measured is the fastest)."""
    rng = np.random.default_rng(0)
    rows = [speed_row(p, 2e-3, 1e-5, rng) for p in measured]
    return write_run(root / "run", rows, env(), suite=_suite(), **files)


def _verdict(run: Path) -> ModelVerdict:
    (v,) = explain_runs([run])[0]
    return v


def _item(v: ModelVerdict, heading: str) -> list[str]:
    return [t for k, t in v.items() if k == heading]


def test_a_run_killed_outright_names_what_it_did_not_reach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no growth.json (kill -9): the plan in suite.json against the rows
    measured = [_point(p, b) for p in ("fp32", "bf16") for b in BATCHES if (p, b) != ("bf16", 64)]
    run = _folder(tmp_path, measured)
    v = _verdict(run)
    assert _item(v, "planned, not measured") == [
        "cpu bf16 B=64 (not reached: the run ended before it)"
    ]
    assert v.next_experiment == (
        f"measure what was planned and not reached: gpubench sweep --resume {run}"
    )
    # the report draws the same line from the same items
    assert "planned, not measured</b>: cpu bf16 B=64 (not reached" in verdict_section([v])
    assert main(["explain", str(run), "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert d["planned_not_measured"]["text"] == v.planned
    (point,) = d["planned_not_measured"]["points"]
    assert (point["reason"], point["label"]) == ("not reached", "cpu bf16 B=64")
    assert point["identity"]["batch_size"] == 64 and point["identity"]["precision"] == "bf16"


def test_a_run_that_measured_its_whole_plan_says_nothing_of_it(tmp_path: Path) -> None:
    run = _folder(tmp_path, [_point(p, b) for p in ("fp32", "bf16") for b in BATCHES])
    v = _verdict(run)
    assert v.planned is None and v.unmeasured == []
    assert not _item(v, "planned, not measured")
    assert "--resume" not in (v.next_experiment or "")


def test_growth_json_says_why_a_point_was_not_measured(tmp_path: Path) -> None:
    # B=64 of fp32 left out for its series' budget; bf16 B=64 stopped (Ctrl-C)
    measured = [_point(p, b) for p in ("fp32", "bf16") for b in (4, 16)]
    record = GrowthRecord(
        unmeasured=(
            Unmeasured(_point("fp32", 64).to_dict(), "over budget", OVER),
            Unmeasured(_point("bf16", 64).to_dict(), "stopped", "the sweep was stopped"),
        )
    )
    run = _folder(tmp_path, measured)
    record.write(run)
    v = _verdict(run)
    assert v.planned == (
        f"cpu fp32 B=64 (over its series' time budget: {OVER}); "
        "cpu bf16 B=64 (the sweep was stopped before it)"
    )
    # the stopped point is finished by resuming; the one over budget alone would not be
    assert v.next_experiment is not None and "--resume" in v.next_experiment


def test_a_point_over_budget_alone_is_measured_on_its_own_not_resumed(tmp_path: Path) -> None:
    measured = [_point(p, b) for p in ("fp32", "bf16") for b in BATCHES if (p, b) != ("fp32", 64)]
    run = _folder(tmp_path, measured)
    GrowthRecord(unmeasured=(Unmeasured(_point("fp32", 64).to_dict(), "over budget", OVER),)).write(
        run
    )
    (u,) = plan.unreached([], [], [Unmeasured(_point("fp32", 64).to_dict(), "over budget", OVER)])
    assert plan.resume([u]) is None
    v = _verdict(run)
    assert v.planned == f"cpu fp32 B=64 (over its series' time budget: {OVER})"
    assert "--resume" not in (v.next_experiment or "")


def test_a_point_recorded_as_stopped_and_measured_since_is_not_listed(tmp_path: Path) -> None:
    # a resumed sweep measured B=64; growth.json still names it (nothing rewrote it)
    run = _folder(tmp_path, [_point(p, b) for p in ("fp32", "bf16") for b in BATCHES])
    stopped = Unmeasured(_point("bf16", 64).to_dict(), "stopped", "the sweep was stopped")
    GrowthRecord(unmeasured=(stopped,)).write(run)
    assert _verdict(run).planned is None


def test_a_tune_folder_plans_no_grid(tmp_path: Path) -> None:
    # a tune's suite.json is the space it searched, not points it meant to measure
    run = _folder(tmp_path, [_point("fp32", 16)], tune={"rounds": []})
    assert _verdict(run).planned is None


def _rows(precision: str, batches: tuple[int, ...]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    return [speed_row(_point(precision, b), 2e-3, 1e-5, rng) for b in batches]


def test_a_larger_batch_planned_is_never_the_largest_measured() -> None:
    rows = _rows("fp32", (4, 16))
    best = rows[-1]
    over = plan.Unreached(identity_dict(_point("fp32", 64).to_dict()), "over budget", OVER)
    line, todo = levers._larger_batch(best, rows, rows, "sweep", [over])
    assert line == (
        f"a larger batch: B=16 is the fastest measured; B=64 planned, not measured (over its "
        f"series' time budget: {OVER})"
    )
    assert "largest" not in line
    assert todo == "measure B=64: --batch-sizes 64"
    # without the plan, the same rows read as the largest measured
    assert "is the largest measured" in levers._larger_batch(best, rows, rows)[0]
    # a stopped run is resumed to measure it
    stopped = plan.Unreached(over.point, "stopped", folder="results/x")
    _, todo = levers._larger_batch(best, rows, rows, "sweep", [stopped])
    assert todo == "measure what was planned and not reached: gpubench sweep --resume results/x"


def test_no_faster_is_said_of_the_measured_batches_only() -> None:
    rows = _rows("fp32", (4, 16))
    rows[1]["samples_per_s"] = rows[0]["samples_per_s"] / 2  # B=16 slower than B=4
    gone = plan.Unreached(identity_dict(_point("fp32", 64).to_dict()), "not reached")
    line, todo = levers._larger_batch(rows[0], rows, rows, "sweep", [gone])
    assert line == (
        "a larger batch: measured up to B=16, no faster there; B=64 planned, not measured "
        "(not reached: the run ended before it)"
    )
    assert todo is None


def test_the_h100_quick_run_says_its_transformer_bf16_was_never_reached() -> None:
    """results/20261125-h100-quick was cut at 230 s by a timeout (no growth.json entry): its
    transformer verdicts said "a lower precision (bf16): not measured; next: measure bf16"."""
    found = {v.model: v for v in explain_runs([H100_QUICK])[0]}
    for heading in ("transformer/small, adamw", "transformer/small, sgd"):
        v = found[heading]
        assert v.planned == "cuda bf16 B=4, 16, 64 (not reached: the run ended before it)"
        assert [lv for lv in v.levers if lv.startswith("a lower precision")] == [
            "a lower precision (bf16): planned, not measured (not reached: the run ended before it)"
        ]
        assert v.next_experiment == (
            f"measure what was planned and not reached: gpubench sweep --resume {H100_QUICK}"
        )
    # the models it finished have nothing unreached
    assert found["mlp/small, adamw"].planned is None
    # like with like across devices: the largest batch both ran, the fastest of each there
    # named, then the fastest of each, said to be at different batches
    (across,) = found["mlp/small, adamw"].across
    assert across.at_batch is not None and across.at_batch.batch_size == 64
    assert across.line().startswith(
        "cuda x2.02 cpu at B=64, the largest batch both ran: the fastest of each there, "
        "cuda fp32 B=64 (32,769 samples/s) over cpu bf16 B=64 (16,205); the fastest on each, "
        "at different batches, x1,809: cuda bf16 B=65536"
    )


def test_a_point_another_folder_measured_is_measured(tmp_path: Path) -> None:
    # folder a planned bf16 B=64 and never reached it; folder b measured it
    every = [_point(p, b) for p in ("fp32", "bf16") for b in BATCHES]
    a = _folder(tmp_path / "a", every[:-1])
    b = _folder(tmp_path / "b", every[-1:])
    assert _verdict(a).planned is not None
    (v,) = explain_runs([a, b])[0]
    assert v.planned is None


def test_a_shard_plans_only_its_own_points(tmp_path: Path) -> None:
    spec = _spec()
    mine = shard.select(list(spec.points()), 1, 2, spec)
    assert 0 < len(mine) < len(spec.points())
    run = _folder(tmp_path, mine, shard={"index": 1, "count": 2})
    assert _verdict(run).planned is None  # the other shard's points are its own to measure
    run = _folder(tmp_path / "short", mine[:-1], shard={"index": 1, "count": 2})
    last = mine[-1]
    assert _verdict(run).planned == (
        f"cpu {last.precision} B={last.batch_size} (not reached: the run ended before it)"
    )


def test_a_sweep_still_running_calls_its_remaining_points_not_measured_yet(
    tmp_path: Path,
) -> None:
    # explain on a folder whose sweep holds its lock: the rest of the plan is still to come,
    # not "not reached: the run ended before it", and there is nothing to resume yet
    from gpubench.run import folder

    measured = [_point(p, b) for p in ("fp32", "bf16") for b in BATCHES if (p, b) != ("bf16", 64)]
    run = _folder(tmp_path, measured)
    assert not folder.in_use(run)
    with folder.locked(run):
        assert folder.in_use(run)
        v = _verdict(run)
    assert _item(v, "planned, not measured") == [
        "cpu bf16 B=64 (not measured yet: the sweep is still running)"
    ]
    assert "--resume" not in (v.next_experiment or "")
    assert not folder.in_use(run)  # the lock went with its holder
    assert _item(_verdict(run), "planned, not measured") == [
        "cpu bf16 B=64 (not reached: the run ended before it)"
    ]
