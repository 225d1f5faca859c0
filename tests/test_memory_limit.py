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
