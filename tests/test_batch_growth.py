"""Issue 28, item 7: on a GPU the default sweep's batch sizes keep doubling past the suite's
largest until the series answers (a larger batch no faster, or memory ends), within a bound;
the CPU keeps the suite's batch sizes. The stop rule is tested on synthetic throughput
sequences and on the H100's default-sweep rows, the sweep's loop with a synthetic measurement
(each point's samples/s from a given curve), and the default suite's expansion with CUDA
reported present."""

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
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.run import batch_growth, sweep
from gpubench.run.batch_growth import MAX_DOUBLINGS, next_batch
from gpubench.run.context import RunContext, RunOptions
from gpubench.store.results import ResultStore, read_rows
from gpubench.store.row import make_row

H100_ROWS = Path(__file__).parent / "data" / "h100" / "quick2-cuda-series.jsonl"
BASE = Point("mlp", "tiny", "cuda", "fp32", "sgd", 4)


def _series(rates: dict[int, float | str]) -> list[dict[str, Any]]:
    """Rows of one series: batch size -> samples/s, or a status for a point that did not run."""
    return [
        {"batch_size": b, "status": "ok", "samples_per_s": v}
        if not isinstance(v, str)
        else {"batch_size": b, "status": v, "samples_per_s": None}
        for b, v in rates.items()
    ]


def test_a_series_grows_while_its_largest_batch_is_its_fastest() -> None:
    assert next_batch(_series({4: 100.0, 16: 390.0, 64: 1500.0}), 64) == 128
    assert next_batch(_series({4: 100.0, 16: 390.0, 64: 1500.0, 128: 1510.0}), 64) == 256
    assert next_batch(_series({64: 1500.0}), 64) == 128  # one batch listed: nothing above it


@pytest.mark.parametrize(
    "rates",
    [
        {4: 100.0, 16: 390.0, 64: 1500.0, 128: 1450.0},  # flattened: a larger batch no faster
        {4: 100.0, 16: 390.0, 64: 1500.0, 128: 1500.0},  # equal is no faster
        {4: 100.0, 16: 390.0, 64: 380.0},  # the CPU: 16 already the fastest
        {4: 100.0, 16: 390.0, 64: 1500.0, 128: "oom"},  # memory ends
        {4: 100.0, 16: 390.0, 64: 1500.0, 128: "error"},
        {4: 100.0, 16: 390.0, 64: 1500.0, 128: "timeout"},
    ],
)
def test_a_series_stops_once_it_has_answered(rates: dict[int, float | str]) -> None:
    assert next_batch(_series(rates), 64) is None


def test_growth_is_bounded() -> None:
    top = 64 * 2**MAX_DOUBLINGS
    still = {b: float(b) for b in (64 * 2**i for i in range(MAX_DOUBLINGS))}
    assert next_batch(_series(still), 64) == top
    assert next_batch(_series({**still, top: float(top)}), 64) is None
    assert next_batch([], 64) is None


def test_every_series_of_the_h100_default_sweep_would_have_grown() -> None:
    """Real rows: the default sweep on the H100 stopped every CUDA series at B=64, its
    fastest; each would have measured B=128 next."""
    rows = [json.loads(line) for line in H100_ROWS.read_text().splitlines()]
    series: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        series.setdefault(batch_growth.series_key(Point.of(r)), []).append(r)
    assert len(series) == 12
    assert all(next_batch(s, 64) == 128 for s in series.values())


def _cuda_present(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def test_the_default_suite_grows_on_cuda_and_keeps_the_cpu_batch_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cuda_present(monkeypatch)
    spec = load_suite("quick")
    assert spec.resolved_devices() == ("cpu", "cuda")
    assert spec.grow_batch_sizes == ("cuda",)
    points = spec.points()
    for device in ("cpu", "cuda"):
        assert sorted({p.batch_size for p in points if p.device == device}) == [4, 16, 64]
    assert all(batch_growth.grows(spec, p, sharded=False) == (p.device == "cuda") for p in points)
    cuda = next(p for p in points if p.device == "cuda")
    assert not batch_growth.grows(spec, cuda, sharded=True)
    assert not batch_growth.grows(dataclasses.replace(spec, batch_sizes="auto"), cuda, False)
    ddp = dataclasses.replace(cuda, parallel="ddp", nproc=2, scaling="weak")
    assert not batch_growth.grows(spec, ddp, sharded=False)


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["sweep", *argv])


def test_batch_sizes_given_on_the_command_line_are_the_ones_measured() -> None:
    assert spec_from_args(_args()).grow_batch_sizes == ("cuda",)
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
    assert got[("cuda", "sgd")] == got[("cuda", "adamw")] == [4, 16, 64, 128, 256, 512]
    assert counts[-1] == (18, 18) and [i for i, _ in counts] == list(range(1, 19))


def test_the_sweep_brackets_where_memory_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _measure_with(monkeypatch, tmp_path, SPEC, _flattens_at(2**20, oom_from=1024))
    got = _batches(tmp_path)
    assert got[("cuda", "sgd")] == [4, 16, 64, 128, 256, 512, 1024]
    assert {r["status"] for r in read_rows(tmp_path) if r["batch_size"] == 1024} == {"oom"}


def test_a_resumed_sweep_grows_on_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _measure_with(monkeypatch, tmp_path, SPEC, _flattens_at(256), stop_after=10)
    assert len(read_rows(tmp_path)) == 10  # cpu's 6, then cuda sgd 4 to 128
    counts = _measure_with(monkeypatch, tmp_path, SPEC, _flattens_at(256))
    got = _batches(tmp_path)
    assert got[("cuda", "sgd")] == got[("cuda", "adamw")] == [4, 16, 64, 128, 256, 512]
    assert len(read_rows(tmp_path)) == 18, "no point measured twice"
    assert counts[0] == (11, 14) and counts[-1] == (18, 18)
