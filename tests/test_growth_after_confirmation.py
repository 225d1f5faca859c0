"""Issue 42: a series whose rows read it flat (a larger batch no faster than a smaller one) but
whose largest batch the confirmation's interleaved re-measurement names the fastest is not
bracketed: the sweep grows it once more after the confirmation and confirms that verdict
again, keeping the other verdicts' confirmations as they were."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.report.explain import explain_runs
from gpubench.run import batch_growth, confirm
from gpubench.run.sweep import run_sweep
from gpubench.store import confirmations
from gpubench.store.results import read_rows

ROOT = Path(__file__).resolve().parents[1] / "results"


@pytest.mark.parametrize(
    ("run", "grown"),
    [
        ("20261128-cpu-default-final/run-2", ["mlp/small cpu fp32 sgd B=1024"]),
        (
            "20261128-cpu-five-sweeps-b/run-5",
            ["mlp/small cpu fp32 adamw B=1024", "mlp/small cpu fp32 sgd B=2048"],
        ),
    ],
)
def test_a_largest_batch_the_rounds_found_ahead_grows_once_more(run: str, grown: list[str]) -> None:
    # real rows: the rows read the largest batch no faster than a smaller one ("flattened" in
    # growth.json), the interleaved rounds found it ahead of that one beyond the margin, and
    # the verdict said "larger batches not measured"
    folder = ROOT / run
    said = "\n".join(line for v in explain_runs([folder])[0] for line in v.lines())
    assert said.count("the fastest once re-measured; its row read it no faster") == len(grown)
    rows = read_rows(folder)
    partitions = confirmations.partitions(folder) or []
    quick = load_suite("quick")
    assert [p.label() for p in batch_growth.overturned(quick, rows, partitions)] == grown
    # a series that does not grow (batch sizes given) is the user's grid: nothing is added
    spec = dataclasses.replace(quick, grow_batch_sizes=())
    assert batch_growth.overturned(spec, rows, partitions) == []
    # without the confirmation the rows' own reading stands
    assert batch_growth.overturned(quick, rows, []) == []


def test_a_tie_in_the_rounds_does_not_overturn_the_rows_flattening() -> None:
    # the rounds put the largest batch's median ahead, but could not tell it from the rows'
    # fastest: the series stays flattened, in the verdict and for the sweep
    folder = ROOT / "20261128-cpu-default-fp32" / "run-2"
    quick = load_suite("quick")
    assert (
        batch_growth.overturned(quick, read_rows(folder), confirmations.partitions(folder) or [])
        == []
    )
    found = {v.model: v for v in explain_runs([folder])[0]}
    lines = found["transformer/small, adamw"].levers
    assert (
        "a larger batch: throughput flattened (B=16 is the fastest; B=64 measured, no faster; "
        "re-measured, B=64 x1.03 (95% CI 0.940-1.07) over B=16: cannot tell)"
    ) in lines


def test_the_sweep_grows_and_confirms_again_only_that_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = SweepSpec(
        name="t",
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(4, 8),
        optimizers=("sgd", "adamw"),
        budget=Budget.fixed(steps=3, warmup_steps=1),
        profile=False,
    )
    asked: list[list[Point]] = []
    first: list[confirmations.Confirmations | None] = []  # confirm.json before the growth
    found = batch_growth.overturned

    def overturned(*args: object) -> list[Point]:
        # the real rule on the real rows first (this grid does not grow: nothing), then as if
        # the confirmation had found sgd's B=8 the fastest of a flattened series
        assert found(*args) == []  # type: ignore[arg-type]
        first.append(confirmations.read(tmp_path))
        asked.append([Point("mlp", "tiny", "cpu", "fp32", "sgd", 16)])
        return asked[-1]

    monkeypatch.setattr(batch_growth, "overturned", overturned)
    # each partition's confirmation, with the rows it was given: whether its leader needed
    # rounds depends on this machine's timing, which partitions were confirmed does not
    confirmed: list[tuple[str, set[int]]] = []
    real = confirm._confirm_partition

    def confirm_partition(rows: list[dict[str, Any]], *args: Any) -> Any:
        confirmed.append((rows[0]["optimizer"], {int(r["batch_size"]) for r in rows}))
        return real(rows, *args)

    monkeypatch.setattr(confirm, "_confirm_partition", confirm_partition)
    run_sweep(spec, tmp_path)
    assert len(asked) == 1
    rows = read_rows(tmp_path)
    assert sorted((r["optimizer"], r["batch_size"]) for r in rows) == [
        ("adamw", 4),
        ("adamw", 8),
        ("sgd", 4),
        ("sgd", 8),
        ("sgd", 16),
    ]
    phases = [p["phase"] for p in json.loads((tmp_path / "phases.json").read_text())["phases"]]
    assert phases.count("confirmation") == 2
    grown = phases.index("growth after the confirmation")
    assert (
        phases.index("confirmation") < grown < len(phases) - 1 - phases[::-1].index("confirmation")
    )
    # both verdicts confirmed once, then sgd's alone again over its rows with B=16
    assert sorted(confirmed[:2]) == [("adamw", {4, 8}), ("sgd", {4, 8})]
    assert confirmed[2:] == [("sgd", {4, 8, 16})]
    record = confirmations.read(tmp_path)
    (before,) = first
    assert record is not None and before is not None
    now = {p.fixed["optimizer"]: p for p in record.partitions}
    was = {p.fixed["optimizer"]: p for p in before.partitions}
    assert set(now) == set(was) == {"sgd", "adamw"}
    assert now["adamw"] == was["adamw"], "a verdict not grown keeps its confirmation"
    assert record.seconds >= before.seconds
