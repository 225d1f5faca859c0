"""pytest-benchmark JSON files read as gpubench rows."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
from doc_pages import pages

from gpubench.store.benchjson import rows_from_benchmark_json
from gpubench.store.results import ResultsError
from gpubench.store.row import COLUMNS

PLAIN_BENCHMARK = """
import pytest

@pytest.mark.parametrize("batch_size", [4])
def test_plain(benchmark, batch_size):
    benchmark.pedantic(sum, args=(range(1000),), rounds=7, iterations=3)
"""


def test_a_plain_benchmark_becomes_a_row(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN_BENCHMARK)
    pytester.runpytest("-p", "no:cacheprovider", "--benchmark-json=plain.json").assert_outcomes(
        passed=1
    )
    (row,) = rows_from_benchmark_json(pytester.path / "plain.json")
    stats = json.loads((pytester.path / "plain.json").read_text())["benchmarks"][0]["stats"]
    assert set(COLUMNS) <= set(row)
    assert row["model"] == row["benchmark"] == "test_plain.py::test_plain[4]"
    assert row["batch_size"] == 4 and row["precision"] is None and row["status"] == "ok"
    assert row["step_time_s"] == stats["median"]
    assert row["steps_measured"] == 7 * 3  # rounds x iterations
    assert row["step_times_s"] == stats["data"] and len(stats["data"]) == 7
    assert row["samples_per_s"] == pytest.approx(4 / stats["median"])
    assert row["tokens_per_s"] is None and row["mfu"] is None


def test_saved_without_data_has_no_step_times(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN_BENCHMARK)
    storage = pytester.path / "store"
    pytester.runpytest(
        "-p", "no:cacheprovider", f"--benchmark-storage=file://{storage}", "--benchmark-save=x"
    ).assert_outcomes(passed=1)
    (saved,) = storage.rglob("0001_x.json")
    (row,) = rows_from_benchmark_json(saved)
    assert "step_times_s" not in row and row["step_time_s"] > 0


def test_unreadable_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="cannot read"):
        rows_from_benchmark_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ResultsError, match="not JSON"):
        rows_from_benchmark_json(bad)
    bad.write_text('{"rows": []}')
    with pytest.raises(ResultsError, match="no 'benchmarks' list"):
        rows_from_benchmark_json(bad)


def test_compare_reads_benchmark_json_and_flags_a_slowdown(pytester: pytest.Pytester) -> None:
    from gpubench.report.compare import compare

    pytester.makepyfile(test_plain=PLAIN_BENCHMARK)
    pytester.runpytest("-p", "no:cacheprovider", "--benchmark-json=base.json").assert_outcomes(
        passed=1
    )
    # The file is pytest-benchmark's own; its times are synthetic, so that the verdict depends
    # on the comparison logic alone and never on this machine's noise.
    doc = json.loads((pytester.path / "base.json").read_text())
    steady = [1e-3 * (1 + 0.002 * i) for i in range(7)]

    def with_times(times: list[float], name: str) -> Path:
        for bench in doc["benchmarks"]:
            bench["stats"]["data"] = times
            bench["stats"]["median"] = sorted(times)[len(times) // 2]
        path = pytester.path / name
        path.write_text(json.dumps(doc))
        return path

    base = with_times(steady, "base.json")
    slow = with_times([t * 1.3 for t in steady], "slow.json")
    assert compare(base, base, 5.0).exit_code() == 0
    result = compare(base, slow, 5.0)
    assert result.exit_code() == 1


def test_the_readme_names_the_reader_where_it_is() -> None:
    """The docs name the reader by its import path (docs/ci-gate.md, docs/api.md): that path
    works."""
    readme = "".join(p.read_text(encoding="utf-8") for p in pages())
    (dotted,) = set(re.findall(r"`(gpubench[\w.]*)\.rows_from_benchmark_json\(", readme))
    assert importlib.import_module(dotted).rows_from_benchmark_json is rows_from_benchmark_json
