"""Issue 42, item 3 (and issue 41's item 7): the verdict's "a larger batch" reads the series
with the growth rule (science.growth): a largest batch within the noise of the one below it
is where throughput flattened (no "measure larger batches"); a series still rising says
whether its time budget ended it; the ceiling is named as the ceiling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpubench.config.spec import Point
from gpubench.run import batch_growth
from gpubench.science import levers
from gpubench.science.growth import CEILING, SERIES_BUDGET_S, Growth
from gpubench.store.growth_record import GrowthRecord, Stop

H100_GROWN = Path(__file__).parent / "data" / "h100" / "quick-20261125-cuda-series.jsonl"


def _rows(model: str, precision: str, optimizer: str, batches: list[int]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in H100_GROWN.read_text().splitlines()]
    return [
        r
        for r in rows
        if (r["model"], r["precision"], r["optimizer"]) == (model, precision, optimizer)
        and r["batch_size"] in batches
    ]


def test_a_largest_batch_within_the_noise_is_where_throughput_flattened() -> None:
    # the H100's mlp fp32 sgd as the rule measured it: 32,768 within 2% of 16,384
    rows = _rows("mlp", "fp32", "sgd", [4, 16, 64, 256, 1024, 4096, 8192, 16384, 32768])
    best = max(rows, key=lambda r: r["samples_per_s"])
    assert best["batch_size"] == 32768
    line, todo = levers._larger_batch(best, rows, rows)
    assert todo is None
    assert line == (
        "a larger batch: throughput flattened (B=32768 is within the noise of B=16384 "
        "(x1.02, noise 5%))"
    )


def test_a_series_its_budget_ended_says_so() -> None:
    # 4 to 1,024 of the H100's cnn bf16 adamw, the points made to take 11.4 s: still rising
    # at 1,024 (2.6x B=256's), and B=2,048 (about 1.6 s) would not fit the 12 s budget
    rows = [r | {"point_time_s": 2.6} for r in _rows("cnn", "bf16", "adamw", [4, 16, 64, 256])]
    rows += [
        r | {"point_time_s": 1.0, "samples_per_s": r["samples_per_s"] * 1.2}
        for r in _rows("cnn", "bf16", "adamw", [1024])
    ]
    assert sum(r["point_time_s"] for r in rows) == 11.4 < SERIES_BUDGET_S["cuda"]
    best = rows[-1]
    line, todo = levers._larger_batch(best, rows, rows)
    assert line == (
        "a larger batch: B=1024 is the largest measured and the fastest; the series' 12.0 s time "
        "budget ended it before throughput flattened"
    )
    assert todo == "measure larger batches: --batch-sizes auto"


def test_a_series_not_grown_says_it_is_still_rising() -> None:
    rows = _rows("transformer", "fp32", "sgd", [4, 16, 64])  # 4.4 s: within any budget
    line, todo = levers._larger_batch(rows[-1], rows, rows)
    assert line.endswith("the fastest; throughput still rising there (not bracketed)")
    assert todo == "measure larger batches: --batch-sizes auto"


def test_a_largest_batch_that_leads_once_re_measured_leaves_the_batch_open() -> None:
    # a default sweep's mlp/small AdamW on the CPU: the rows read B=512 no faster than B=128, so
    # the series stopped; re-measured, B=512 led x1.52: it is not "throughput flattened"
    rows = _rows("mlp", "fp32", "adamw", [4, 16, 64, 256, 1024])
    rows[-2]["samples_per_s"] = rows[-1]["samples_per_s"] * 1.01  # B=256 by its row
    line, todo = levers._larger_batch(rows[-1], rows, rows)
    assert line == (
        "a larger batch: B=1024 is the largest measured and the fastest once re-measured; its "
        "row read it no faster than B=256, so the series stopped growing there: larger batches "
        "not measured"
    )
    assert todo == "measure larger batches: --batch-sizes auto"


def test_the_ceiling_is_named_as_the_ceiling() -> None:
    rows = _rows("mlp", "bf16", "sgd", [4, 16, 64, 256, 1024, 4096, 16384, CEILING])
    line, todo = levers._larger_batch(rows[-1], rows, rows)
    assert line == (
        f"a larger batch: B={CEILING} is the growth's ceiling and the fastest, larger batches "
        "not measured"
    )
    assert todo == f"measure larger batches: --batch-sizes {2 * CEILING},{4 * CEILING}"


def test_tune_does_not_claim_it_searched_to_the_memory_limit() -> None:
    """tune answered "B=4 is the largest searched ... (tune searches up to the largest that
    fits)" where max-batch timed B=65,536 at 40 times its samples/s: a tune's series still
    rising says so, and names larger batches to measure."""
    rows = _rows("mlp", "fp32", "sgd", [4, 16, 64])
    line, todo = levers._larger_batch(rows[-1], rows, rows, command="tune")
    assert line == (
        "a larger batch: B=64 is the largest tune measured and the fastest, throughput still "
        "rising there (not bracketed)"
    )
    assert todo == "measure larger batches: --batch-sizes 64,128,256"
    # where it flattened, tune's rows say so like a sweep's
    flat = _rows("cnn", "fp32", "sgd", [64, 256, 512, 1024])
    best = max(flat, key=lambda r: r["samples_per_s"])
    assert levers._larger_batch(best, flat, flat, command="tune")[1] is None


def test_a_grid_of_listed_batches_is_not_said_to_be_ended_by_a_budget_it_never_had() -> None:
    # the same 11.4 s series, but as a grid of listed batches (no growth.json series): before,
    # the rule read on its rows blamed "the series' 12 s time budget" (a CPU grid of 4-1024
    # was told "8 s")
    rows = [r | {"point_time_s": 2.6} for r in _rows("cnn", "bf16", "adamw", [4, 16, 64, 256])]
    rows += [
        r | {"point_time_s": 1.0, "samples_per_s": r["samples_per_s"] * 1.2}
        for r in _rows("cnn", "bf16", "adamw", [1024])
    ]
    line, _ = levers._larger_batch(rows[-1], rows, rows, stops={})
    assert line.endswith("the fastest; throughput still rising there (not bracketed)")
    # grown, its growth.json's stop says what ended it, in its own figures
    from gpubench.config.spec import Point
    from gpubench.store.growth_record import Stop

    detail = "throughput still rising at B=1024: 1.20x B=256's; 11.4 s of its 12 s spent"
    stops = {Point.of(rows[-1]).label(batch=False): Stop("budget spent", detail)}
    line, todo = levers._larger_batch(rows[-1], rows, rows, stops=stops)
    assert line.endswith(
        f"the fastest; its series' time budget ended it before throughput flattened ({detail})"
    )
    assert todo == "measure larger batches: --batch-sizes auto"


def test_each_seed_of_a_series_is_told_its_own_stop() -> None:
    # issue 49: growth.json's stops by the series' key, the seed in it: seed 0's series was
    # ended by its time budget, seed 1's (the same label) flattened; each fastest row is told
    # its own, and an old growth.json (by label) is still read by the label
    rows = [r | {"point_time_s": 2.6} for r in _rows("cnn", "bf16", "adamw", [4, 16, 64, 256])]
    rows += [
        r | {"point_time_s": 1.0, "samples_per_s": r["samples_per_s"] * 1.2}
        for r in _rows("cnn", "bf16", "adamw", [1024])
    ]
    seeded = [r | {"seed": 1} for r in rows]
    detail = "throughput still rising at B=1024: 1.20x B=256's; 11.4 s of its 12 s spent"
    budget = Growth(None, "budget spent", detail)
    flat = Growth(None, "flattened", "B=1024 is the fastest")
    grown = [batch_growth.stop(Point.of(rows[-1]), budget)]
    grown += [batch_growth.stop(Point.of(seeded[-1]), flat)]
    stops = batch_growth.record(grown).by_series()
    assert len(stops) == 2
    line, _ = levers._larger_batch(rows[-1], rows, rows, stops=stops)
    assert line.endswith(f"its series' time budget ended it before throughput flattened ({detail})")
    line, _ = levers._larger_batch(seeded[-1], seeded, seeded, stops=stops)
    assert line.endswith("the fastest; throughput still rising there (not bracketed)")
    label = Point.of(rows[-1]).label(batch=False)
    old = GrowthRecord(series={label: Stop("over budget", detail)})
    for best, bests in ((rows[-1], rows), (seeded[-1], seeded)):  # the label names both seeds
        line, _ = levers._larger_batch(best, bests, bests, stops=old.by_series())
        assert line.endswith(f"ended it before throughput flattened ({detail})")
