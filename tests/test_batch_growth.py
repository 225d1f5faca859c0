"""Issues 28 and 42: one batch-growth rule (science.growth) for the default sweep on every
device and `--batch-sizes auto`: a series grows while throughput rises by more than the noise,
jumps where the step time is flat, refines near the knee, and stops where throughput flattens,
memory ends or its time budget is spent (a probe that would not fit is not started). The rule is
tested on synthetic series and replayed on recorded rows (the H100's default sweep of
2026-11-25, the 2-core CPU's of the same day); the sweep's loop with a synthetic measurement
(each point's samples/s from a given curve); the default suite's expansion with CUDA reported
present."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpubench.cli.parser import build_parser
from gpubench.cli.sweep_args import spec_from_args
from gpubench.config.errors import ConfigError
from gpubench.config.keys import series_key
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.run import batch_growth, sweep
from gpubench.run.context import RunContext, RunOptions
from gpubench.science.growth import CEILING, SERIES_BUDGET_S, Growth, decide
from gpubench.store import growth_record
from gpubench.store.results import ResultStore, read_rows
from gpubench.store.row import make_row

DATA = Path(__file__).parent / "data"
H100_ROWS = DATA / "h100" / "quick2-cuda-series.jsonl"  # 2026-11-24: every series to B=64
H100_GROWN = DATA / "h100" / "quick-20261125-cuda-series.jsonl"  # grown to B=65,536
CPU_ROWS = DATA / "cpu-quick-20261125-series.jsonl"  # results/20261125-cpu-sweep-phases
BASE = Point("mlp", "tiny", "cuda", "fp32", "sgd", 4)
# the reasons under which a series answered its fastest batch (a larger one measured no faster,
# or memory ends)
BRACKETED = ("flattened", "memory ends")


def _series(rates: dict[int, float | str], step_s: float | None = None) -> list[dict[str, Any]]:
    """Rows of one series: batch size -> samples/s, or a status for a point that did not run;
    the step time b / rate unless `step_s` holds it flat; each point 0.5 s."""
    return [
        {
            "batch_size": b,
            "status": "ok",
            "samples_per_s": v,
            "step_time_s": step_s if step_s is not None else b / v,
            "step_time_ci_rel": 0.01,
            "point_time_s": 0.5,
        }
        if not isinstance(v, str)
        else {"batch_size": b, "status": v, "samples_per_s": None, "point_time_s": 0.1}
        for b, v in rates.items()
    ]


def test_a_series_grows_while_throughput_rises_beyond_the_noise() -> None:
    # the step time grows with the batch (not launch-bound): twice the largest
    g = decide(_series({4: 100.0, 16: 200.0, 64: 300.0}))
    assert (g.batch, g.reason) == (128, "rising")
    assert decide(_series({64: 1500.0})).batch == 128  # one batch: nothing to judge a rise by


def test_a_flat_step_time_takes_large_steps() -> None:
    # launch-bound: the step time stays at 2 ms while the batch grows 16-fold
    g = decide(_series({4: 2000.0, 16: 8000.0, 64: 32000.0}, step_s=0.002))
    assert (g.batch, g.reason) == (256, "launch-bound")


@pytest.mark.parametrize(
    ("rates", "reason"),
    [
        ({16: 200.0, 32: 260.0, 64: 300.0, 128: 290.0}, "flattened"),  # a larger batch slower
        ({16: 200.0, 32: 260.0, 64: 300.0, 128: 310.0}, "flattened"),  # +3%: within the noise
        ({8: 200.0, 16: 390.0, 32: 380.0}, "flattened"),  # 16 already the fastest
        ({4: 100.0, 8: 200.0, 16: 390.0, 32: 500.0, 64: "oom"}, "memory ends"),
        ({4: 100.0, 16: 200.0, 64: 300.0, 128: "error"}, "failed"),
        ({4: 100.0, 16: 200.0, 64: 300.0, 128: "timeout"}, "failed"),
    ],
)
def test_a_series_stops_once_it_has_answered(rates: dict[int, float | str], reason: str) -> None:
    g = decide(_series(rates))
    assert (g.batch, g.reason) == (None, reason)


def test_it_refines_near_the_knee() -> None:
    # flat from B=64 to B=256 after a 4-fold jump: the knee is inside it
    g = decide(_series({4: 100.0, 16: 400.0, 64: 1600.0, 256: 1620.0}, step_s=0.01))
    assert (g.batch, g.reason) == (32, "refine")  # between B=16 and the knee, B=64
    # a jump past a flat stretch that lands beyond the knee: measured inside before going on
    rows = _series({4: 1000.0, 16: 4000.0, 64: 16000.0}, step_s=0.004)
    rows += _series({256: 20000.0})  # step 12.8 ms: grew as B^0.83
    assert decide(rows) == Growth(128, "refine", "between B=64 and B=256")
    # memory ends more than two-fold above the fastest: the batch between is measured
    g = decide(_series({4: 100.0, 16: 400.0, 64: 1000.0, 256: "oom"}))
    assert (g.batch, g.reason) == (128, "refine")


def test_a_probe_that_would_not_fit_the_budget_is_not_started() -> None:
    rows = _series({4: 100.0, 16: 200.0, 64: 300.0})  # 1.5 s spent
    assert decide(rows, budget_s=2.5).batch == 128  # predicted 0.5 s x 1.8 (the step's growth)
    g = decide(rows, budget_s=2.0)
    assert (g.batch, g.reason) == (None, "over budget")
    assert "B=128 would take about 0.917 s, 0.500 s of its 2.00 s left" in g.detail
    g = decide(rows, budget_s=1.5)
    assert (g.batch, g.reason) == (None, "budget spent")


def test_growth_stops_at_the_ceiling() -> None:
    rows = _series({CEILING // 4: 1.0e6, CEILING: 4.0e6}, step_s=0.002)
    assert decide(rows) == Growth(None, "ceiling", f"B={CEILING} is the ceiling, still the fastest")
    assert decide(_series({CEILING // 2: 1.0e6}, step_s=0.002)).batch == CEILING
    assert decide([]).reason == "failed"


def _by_series(path: Path) -> dict[tuple[Any, ...], dict[int, dict[str, Any]]]:
    series: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        series.setdefault(Point.of(r).key(drop=("batch_size",)), {})[int(r["batch_size"])] = r
    return series


def _replay(
    recorded: dict[int, dict[str, Any]], budget_s: float
) -> tuple[list[dict[str, Any]], Growth]:
    """The rows the rule would have measured from the listed 4, 16, 64, and its last decision
    (a batch it asks for that was not recorded ends the replay with that decision)."""
    got = [recorded[b] for b in (4, 16, 64)]
    while True:
        g = decide(got, budget_s)
        if g.batch is None or g.batch not in recorded:
            return got, g
        got.append(recorded[g.batch])


def test_the_h100_default_sweep_replayed_brackets_every_cuda_series_within_budget() -> None:
    """Real rows: the H100 sweep of 2026-11-25 doubled every CUDA series from 64 (to B=65,536
    for the MLP) and had not finished after 230 s. Under the rule each series takes at most
    its 12 s budget (the listed points included), and the ten recorded series take 88 s in
    all: the twelve of the quick suite fit about two minutes. Each is bracketed, except the
    MLP's bf16 series, launch-bound all the way to the ceiling (reported as the ceiling)."""
    budget = SERIES_BUDGET_S["cuda"]
    series = _by_series(H100_GROWN)
    assert len(series) == 10  # the transformer's bf16 rows were never reached
    total = 0.0
    for key, recorded in series.items():
        rows, g = _replay(recorded, budget)
        assert g.batch is None, (key, g)  # every batch it asked for was recorded
        seconds = sum(r["point_time_s"] for r in rows)
        assert seconds <= budget
        total += seconds
        if key[0] == "mlp" and key[3] == "bf16":
            assert g.reason == "ceiling" and max(r["batch_size"] for r in rows) == CEILING
        else:
            assert g.reason in BRACKETED, (key, g)
            assert len(rows) <= 9
    assert total <= 90.0
    # cnn/small fp32 sgd: 512 and 1024 within the noise (57,134 and 58,459 samples/s)
    cnn = next(v for k, v in series.items() if k[:5] == ("cnn", "small", "cuda", "fp32", "sgd"))
    rows, g = _replay(cnn, budget)
    assert [r["batch_size"] for r in rows] == [4, 16, 64, 256, 1024, 512]
    assert g.reason == "flattened"


def test_every_series_of_the_h100_default_sweep_at_b64_would_have_grown() -> None:
    """Real rows: the default sweep on the H100 (2026-11-24) stopped every CUDA series at
    B=64, its fastest, the step time flat: each would have jumped to B=256 next."""
    series = _by_series(H100_ROWS)
    assert len(series) == 12
    for recorded in series.values():
        g = decide(list(recorded.values()), SERIES_BUDGET_S["cuda"])
        assert g.batch is not None and g.batch > 64


def test_the_cpu_default_sweep_replayed_brackets_or_grows_within_budget() -> None:
    """Real rows: the 2-core CPU's default sweep (2026-11-25) measured 4, 16, 64 and named
    B=64 the fastest in most series. Under the rule every series is bracketed or asks for a
    batch that fits its 12 s budget: none is left unanswered by the budget."""
    budget = SERIES_BUDGET_S["cpu"]
    series = _by_series(CPU_ROWS)
    assert len(series) == 12
    asked = 0
    for key, recorded in series.items():
        _, g = _replay(recorded, budget)
        assert g.reason in BRACKETED or g.batch is not None, (key, g)
        asked += g.batch is not None and g.batch > 64
    assert asked >= 6  # the series still speeding up at B=64 go on


def _cuda_present(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def test_the_default_suite_grows_on_every_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cuda_present(monkeypatch)
    spec = load_suite("quick")
    assert spec.resolved_devices() == ("cpu", "cuda")
    assert spec.grow_batch_sizes == ("cpu", "cuda")
    points = spec.points()
    for device in ("cpu", "cuda"):
        assert sorted({p.batch_size for p in points if p.device == device}) == [4, 16, 64]
    assert all(batch_growth.grows(spec, p, sharded=False) for p in points)
    cuda = next(p for p in points if p.device == "cuda")
    assert not batch_growth.grows(spec, cuda, sharded=True)
    assert batch_growth.grows(dataclasses.replace(spec, batch_sizes="auto"), cuda, False)
    assert not batch_growth.grows(dataclasses.replace(spec, grow_batch_sizes=()), cuda, False)
    ddp = dataclasses.replace(cuda, parallel="ddp", nproc=2, scaling="weak")
    assert not batch_growth.grows(spec, ddp, sharded=False)


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["sweep", *argv])


def test_batch_sizes_given_on_the_command_line_are_the_ones_measured() -> None:
    assert spec_from_args(_args()).grow_batch_sizes == ("cpu", "cuda")
    assert spec_from_args(_args("--batch-sizes", "16,32")).grow_batch_sizes == ()


def test_a_suite_names_device_types_to_grow_on(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text('models = ["mlp"]\ngrow_batch_sizes = ["cuda:0"]\n')
    with pytest.raises(ConfigError, match=r"line 2.*'cuda:0'.*cpu, cuda"):
        load_suite(suite)


Curve = Callable[[Point], dict[str, Any]]


def _measure_with(
    monkeypatch: pytest.MonkeyPatch,
    run_dir: Path,
    spec: SweepSpec,
    curve: Curve,
    stop_after: int | None = None,
) -> list[tuple[int, int]]:
    """Run the sweep's loop over `spec`'s points with each point's row made by `curve` (no
    worker), into `run_dir`; the (finished, total) counts it reported per row."""
    measured: list[Point] = []

    def row(point: Point, *_: object) -> dict[str, Any]:
        measured.append(point)
        return curve(point)

    monkeypatch.setattr(sweep, "_row", row)
    counts: list[tuple[int, int]] = []
    with RunContext(run_dir, RunOptions()) as run:
        run.store = ResultStore(run_dir)  # the folder as the sweep holds it, unlocked
        done = read_rows(run_dir) if run.store.path.is_file() else []
        sweep._measure(
            run,
            spec,
            spec.points(),
            done,
            lambda _r, i, n: counts.append((i, n)),
            None if stop_after is None else (lambda: len(measured) >= stop_after),
            None,
        )
    return counts


def _flattens_at(knee: int, oom_from: int | None = None) -> Curve:
    """samples/s growing with the batch up to `knee`, flat beyond (falling 1% a doubling); out
    of memory from `oom_from` on."""

    def curve(point: Point) -> dict[str, Any]:
        b = point.batch_size
        if oom_from is not None and b >= oom_from:
            return make_row(point, "oom", error="CUDA out of memory")
        rate = 10.0 * min(b, knee) * (0.99 if b > knee else 1.0)
        return make_row(point, "ok", samples_per_s=rate, step_time_s=b / rate)

    return curve


SPEC = SweepSpec(
    name="g",
    models=("mlp",),
    size="tiny",
    devices=("cpu", "cuda"),
    batch_sizes=(4, 16, 64),
    optimizers=("sgd", "adamw"),
    budget=Budget.fixed(3),
    grow_batch_sizes=("cuda",),
)


def _batches(run_dir: Path) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for r in read_rows(run_dir):
        out.setdefault((r["device"], r["optimizer"]), []).append(int(r["batch_size"]))
    return out


def test_the_sweep_brackets_where_throughput_flattens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = _measure_with(monkeypatch, tmp_path, SPEC, _flattens_at(256))
    got = _batches(tmp_path)
    assert got[("cpu", "sgd")] == got[("cpu", "adamw")] == [4, 16, 64]  # the CPU keeps its own
    # 512 is no faster than 256: the fastest is bracketed, and nothing beyond is measured
    # flat step times to 256 (launch-bound): 4-fold jumps; 1024 no faster than 256, so the
    # knee is refined (128) and nothing beyond is measured
    assert got[("cuda", "sgd")] == got[("cuda", "adamw")] == [4, 16, 64, 256, 1024, 128]
    assert counts[-1] == (18, 18) and [i for i, _ in counts] == list(range(1, 19))


def test_the_sweep_brackets_where_memory_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _measure_with(monkeypatch, tmp_path, SPEC, _flattens_at(2**20, oom_from=1024))
    got = _batches(tmp_path)
    assert got[("cuda", "sgd")] == [4, 16, 64, 256, 1024, 512]  # 512 between 256 and the oom
    assert {r["status"] for r in read_rows(tmp_path) if r["batch_size"] == 1024} == {"oom"}


def test_a_resumed_sweep_grows_on_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _measure_with(monkeypatch, tmp_path, SPEC, _flattens_at(256), stop_after=10)
    assert len(read_rows(tmp_path)) == 10  # cpu's 6, then cuda sgd 4 to 256
    # the stopped sweep says what it planned and did not reach, and why each series stood
    record = json.loads((tmp_path / growth_record.FILE).read_text())
    gone = [u["point"] for u in record["unmeasured"]]
    assert {u["reason"] for u in record["unmeasured"]} == {"stopped"}
    assert [p["batch_size"] for p in gone] == [1024, 4, 16, 64]
    assert [p["optimizer"] for p in gone] == ["sgd", "adamw", "adamw", "adamw"]
    stops = {(s["series"]["device"], s["series"]["optimizer"]): s for s in record["stops"]}
    sgd = stops["cuda", "sgd"]
    assert (sgd["reason"], sgd["next_batch"]) == ("launch-bound", 1024)
    assert "batch_size" not in sgd["series"], "a series is named without its batch"
    cpu = [s["reason"] for (device, _), s in stops.items() if device == "cpu"]
    assert cpu == [], "the CPU's series of this suite do not grow"
    counts = _measure_with(monkeypatch, tmp_path, SPEC, _flattens_at(256))
    got = _batches(tmp_path)
    assert got[("cuda", "sgd")] == got[("cuda", "adamw")] == [4, 16, 64, 256, 1024, 128]
    assert len(read_rows(tmp_path)) == 18, "no point measured twice"
    assert counts[0] == (11, 14) and counts[-1] == (18, 18)


def test_a_listed_batch_its_series_budget_cannot_hold_is_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a slow series (bf16 emulated on a CPU without bf16 instructions), still speeding up:
    # B=4 and 16 take 2.0 and 5.3 s; B=64 is predicted at 18.7 s, over the 12 s series budget
    def slow(point: Point) -> dict[str, Any]:
        b = point.batch_size
        rate = 25.0 * (1 + b / 20)
        row = make_row(point, "ok", samples_per_s=rate, step_time_s=b / rate)
        return {**row, "point_time_s": 15 * b / rate}

    spec = dataclasses.replace(SPEC, devices=("cpu",), optimizers=("sgd",))
    spec = dataclasses.replace(spec, grow_batch_sizes=("cpu",))
    counts = _measure_with(monkeypatch, tmp_path, spec, slow)
    assert _batches(tmp_path)[("cpu", "sgd")] == [4, 16]
    record = growth_record.read(tmp_path)
    assert record is not None
    (skipped,) = record.unmeasured
    assert (skipped.point["batch_size"], skipped.reason) == (64, "over budget")
    assert skipped.detail == "B=64 would take about 18.7 s, 4.67 s of its series' 12.0 s left"
    (stop,) = record.stops
    assert stop.reason in ("budget spent", "over budget") and stop.next_batch is None
    assert counts == [(1, 3), (2, 3)], "the count drops the point not started"


def test_a_batch_that_failed_inside_the_series_is_not_asked_for_again() -> None:
    # a jump past a flat stretch overshot the knee; the batch inside it then failed: the rule
    # would ask for it again (a sweep would loop): it stops instead
    rows = _series({4: 1000.0, 16: 4000.0, 64: 16000.0}, step_s=0.004)
    rows += _series({256: 20000.0, 128: "error"})
    g = decide(rows)
    assert (g.batch, g.reason) == (None, "failed")
    assert g.detail.startswith("B=128 measured already")


def test_two_seeds_of_one_series_stop_apart_in_growth_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 49: growth.json named a series by its label, which leaves the seed out, so the two
    # seeds' stops shared one entry and the last written won. Seed 0 flattens past B=64,
    # seed 1 past B=256: each has its own entry, read back by its own rows' series key.
    def curve(point: Point) -> dict[str, Any]:
        return _flattens_at(64 if point.seed == 0 else 256)(point)

    spec = dataclasses.replace(SPEC, devices=("cuda",), optimizers=("sgd",), seeds=(0, 1))
    _measure_with(monkeypatch, tmp_path, spec, curve)
    raw = json.loads((tmp_path / growth_record.FILE).read_text())
    assert "series" not in raw, "nothing is keyed by label any more"
    assert sorted(s["series"]["seed"] for s in raw["stops"]) == [0, 1]
    record = growth_record.read(tmp_path)
    assert record is not None and len(record.stops) == 2
    stops = record.by_series()
    largest = {}
    for r in read_rows(tmp_path):
        largest[r["seed"]] = max(largest.get(r["seed"], 0), int(r["batch_size"]))
        assert stops[series_key(r)].series["seed"] == r["seed"]
    assert largest == {0: 256, 1: 1024}
    seed = {s: dataclasses.replace(BASE, seed=s, batch_size=16).to_dict() for s in (0, 1)}
    assert stops[series_key(seed[0])].detail.startswith("B=64 is the fastest")
    assert stops[series_key(seed[1])].detail.startswith("B=256 is the fastest")
    # a resumed sweep rewrites growth.json with both entries still apart
    _measure_with(monkeypatch, tmp_path, spec, curve)
    again = growth_record.read(tmp_path)
    assert again is not None and again.by_series() == stops


def test_a_growth_json_keyed_by_label_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a published folder's growth.json from before issue 49: each series under its label
    old = {
        "series": {
            "mlp/tiny cuda fp32 sgd": {
                "reason": "over budget",
                "detail": "B=1024 would take about 9.0 s, 2.0 s of its 12 s left",
                "next_batch": None,
            }
        },
        "unmeasured": [],
    }
    (tmp_path / growth_record.FILE).write_text(json.dumps(old))
    record = growth_record.read(tmp_path)
    assert record is not None and record.stops == ()
    (stop,) = record.by_series().values()
    assert record.by_series() == {BASE.label(batch=False): stop}
    assert (stop.reason, stop.next_batch) == ("over budget", None)
    # a resume of that folder keeps what it recorded beside the entries it writes by key
    spec = dataclasses.replace(SPEC, devices=("cuda",), optimizers=("adamw",))
    _measure_with(monkeypatch, tmp_path, spec, _flattens_at(64))
    raw = json.loads((tmp_path / growth_record.FILE).read_text())
    kept = old["series"]["mlp/tiny cuda fp32 sgd"]
    assert raw["series"] == {"mlp/tiny cuda fp32 sgd": {**kept, "series": {}}}
    (adamw,) = raw["stops"]
    assert adamw["series"]["optimizer"] == "adamw"
