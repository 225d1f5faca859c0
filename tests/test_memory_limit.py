from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpubench.config.errors import ConfigError
from gpubench.run.memory_cap import exact_size, format_size, parse_size


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
    assert format_size(n)[-1] in "KMGT"


def test_a_cap_below_what_the_process_holds_is_out_of_memory_before_the_block() -> None:
    # Under such a cap any allocation fails, sometimes as a signal (a thread's stack): the cap
    # refuses to start the block, as an out-of-memory error that names both sizes.
    import resource

    from gpubench.harness.failure import is_out_of_memory
    from gpubench.run.memory_cap import CapBelowHeld, address_space_bytes, capped

    held = address_space_bytes()
    assert held is not None
    before = resource.getrlimit(resource.RLIMIT_AS)
    entered = False
    with (
        pytest.raises(CapBelowHeld, match=r"already holds .* at or above --max-memory") as e,
        capped(held // 2, "cpu"),
    ):
        entered = True
    assert not entered and is_out_of_memory(e.value)
    assert resource.getrlimit(resource.RLIMIT_AS) == before  # nothing was changed
