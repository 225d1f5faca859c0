"""Numbers are written one way everywhere (store.wording, issue 40): the copies that lived in the
verdict, the input lines, the report's tables and the prices each had their own, and some wrote
an exponent ("1e+03 ms", "1.234e+04", "$1.235e+04") or dropped the thousands separator ("1234")
where the others wrote the number out."""

from __future__ import annotations

import math

from gpubench.store.wording import (
    cell,
    dollars,
    milliseconds,
    missing,
    number,
    percent,
    seconds,
    size,
)


def test_every_kind_of_number_is_written_out() -> None:
    assert number(1234.5, 4) == "1,234"  # was "1234": the ",.4g" cells said "1,234"
    assert milliseconds(0.9997) == "1,000 ms"  # input_bound's copy: "1e+03 ms"
    assert (milliseconds(0.00581), milliseconds(1.126)) == ("5.81 ms", "1,126 ms")
    assert cell(12345.0) == "12,345"  # the report's copy: "1.234e+04"
    assert dollars(12345.6) == "$12,346" and dollars(0.0277777) == "$0.02778"
    assert (percent(0.03), percent(0.025)) == ("3%", "2.5%")
    assert (seconds(0.41), seconds(1234.4), seconds(None)) == ("0.410 s", "1,234 s", "")
    assert (size(2**31), size(600 * 2**20), size(512)) == ("2.0G", "600.0M", "512B")


def test_a_null_cell_is_empty_and_integers_round() -> None:
    assert [cell(v, ".2f") for v in (None, math.nan, "n/a")] == ["", "", ""]
    assert cell(64.0, "d") == "64" and cell(0.0123, ".0f", 100) == "1"
    assert missing(None) and missing(math.nan) and not missing(0) and not missing("")
