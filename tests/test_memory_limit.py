from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpubench.config.errors import ConfigError
from gpubench.run.memory_cap import exact_size, parse_size
from gpubench.store.wording import size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2G", 2 * 2**30),
        ("512M", 512 * 2**20),
        ("1.5GiB", 3 * 2**29),
        ("65536k", 2**26),
        ("1t", 2**40),
        (str(2**27), 2**27),
    ],
)
def test_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "2X", "-1G", "1M", "G", "nanG", "1e9", "2 G B"])
def test_bad_sizes_name_the_value(text: str) -> None:
    with pytest.raises(ConfigError, match="invalid memory size"):
        parse_size(text)


@given(st.integers(min_value=64 * 2**20, max_value=2**44))
def test_exact_size_parses_back(n: int) -> None:
    assert parse_size(exact_size(n)) == n
    assert size(n)[-1] in "KMGT"


def test_a_cpu_cap_counts_from_what_the_worker_holds() -> None:
    # A worker holds far more address space than the cap (the interpreter and torch: 0.7 GB
    # with a CPU build, 3-4 GB with a CUDA one): a cap on its whole address space would refuse
    # even a small tensor; one that counts from what it holds gives the point the cap's worth,
    # and no more.
    from gpubench.run.worker import Call, WorkerRunner

    cap = 256 * 2**20
    runner = WorkerRunner()
    try:
        fits = runner.call(Call("isolation:allocations", ([cap // 2, 2 * cap],), cap, "cpu"), 120)
        held = runner.worker_address_space
    finally:
        runner.close()
    assert held is not None and held > cap
    assert fits == [True, False]


def test_the_capped_peak_of_a_cpu_row_is_what_its_point_mapped() -> None:
    from gpubench.run.memory_cap import capped_peak

    row = {"host_peak_address_space_bytes": 5 * 2**30, "host_address_space_start_bytes": 2**32}
    assert capped_peak(row, "cpu") == 2**30
    # a row written before the start was recorded: the whole worker, as its cap counted then
    assert capped_peak({"host_peak_address_space_bytes": 2**30}, "cpu") == 2**30
    assert capped_peak({"torch_peak_reserved_bytes": 7, **row}, "cuda:0") == 7
    assert capped_peak({}, "cpu") is None
