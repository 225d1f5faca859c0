"""Numbers are written one way everywhere (store.wording, issue 40): the copies that lived in the
verdict, the input lines, the report's tables and the prices each had their own, and some wrote
an exponent ("1e+03 ms", "1.234e+04", "$1.235e+04") or dropped the thousands separator ("1234")
where the others wrote the number out."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import gpubench
from gpubench.store.wording import (
    cell,
    dollars,
    milliseconds,
    missing,
    number,
    percent,
    seconds,
    size,
    span,
    times,
)

ROOT = Path(gpubench.__file__).parent
# The stages whose sentences and tables go through store.wording (issue 49); run/phases.py is
# the store-records work's (its phase table is still written with fixed-width specs). probes/
# sits below store/ (tests/test_layout) and cannot import store.wording: its notes keep their
# own formats until wording moves below it.
WORDED = ("science", "cli", "tune", "harness", "data", "run")
NOT_SCANNED = {"run/phases.py"}
# Formats that write no number a person reads, each with its kind:
ALLOWED = {
    ("cli/commands.py", "g"),  # a command line's flag value (--point-timeout 600), re-parsed
    ("data/files.py", "05d"),  # a file name (00042.png)
    ("run/batch_plan.py", "g"),  # a search key (state_share=0.5), compared, never read out
}
_NUMBER_SPEC = re.compile(r"[eEfFgGdn%]$")
_PERCENT_FORMAT = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[eEfFgGd]")
_FORMAT_FIELD = re.compile(r"\{[^{}]*:[^{}]*[eEfFgGdn%]\}")


def test_every_kind_of_number_is_written_out() -> None:
    assert number(1234.5, 4) == "1,234"  # was "1234": the ",.4g" cells said "1,234"
    assert milliseconds(0.9997) == "1,000 ms"  # input_bound's copy: "1e+03 ms"
    assert (milliseconds(0.00581), milliseconds(1.126)) == ("5.81 ms", "1,126 ms")
    assert cell(12345.0) == "12,345"  # the report's copy: "1.234e+04"
    assert number(999_999_999_999.0) == "999,999,999,999"
    assert number(4.6595e30) == "4.66e+30"  # thirty digits in groups hid the figure
    assert dollars(12345.6) == "$12,346" and dollars(0.0277777) == "$0.02778"
    assert (percent(0.03), percent(0.025)) == ("3%", "2.5%")
    assert (seconds(0.41), seconds(1234.4), seconds(None)) == ("0.410 s", "1,234 s", "")
    assert (size(2**31), size(600 * 2**20), size(512)) == ("2.0G", "600.0M", "512B")


def test_a_null_cell_is_empty_and_integers_round() -> None:
    assert [cell(v, ".2f") for v in (None, math.nan, "n/a")] == ["", "", ""]
    assert cell(64.0, "d") == "64" and cell(0.0123, ".0f", 100) == "1"
    assert missing(None) and missing(math.nan) and not missing(0) and not missing("")


def test_a_ratio_and_an_interval_read_one_way() -> None:
    assert (times(1.0312), times(1.0), times(12.5), times(250.4)) == (
        "x1.03",
        "x1.00",
        "x12.5",
        "x250",
    )
    assert span(0.9812, 1.0549) == "0.981-1.05" and span(1.02, math.inf) == "1.02-unbounded"
    assert span(1234.4, 1340.2) == "1,234-1,340"


def _inline_formats(path: Path) -> list[tuple[int, str]]:
    """Each number format written inline in `path`: an f-string spec ending in a number type
    (':.2f', ':,.0f', ':.0%', ':g'), a printf format ('%.1f' % x), format(x, spec) and
    'literal'.format(...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            parts = node.format_spec.values  # type: ignore[attr-defined]
            spec = "".join(str(v.value) for v in parts if isinstance(v, ast.Constant))
            if _NUMBER_SPEC.search(spec):
                found.append((node.lineno, spec))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            if m := _PERCENT_FORMAT.search(_text(node.left)):
                found.append((node.lineno, m.group()))
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "format" and len(node.args) == 2:
                found.append((node.lineno, ast.unparse(node.args[1])))
            elif isinstance(f, ast.Attribute) and (
                m := _FORMAT_FIELD.search(_text(f.value) if f.attr == "format" else "")
            ):
                found.append((node.lineno, m.group()))
    return sorted(found)


def _text(node: ast.expr) -> str:
    """A string literal's text; '' for anything else."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def test_the_scan_finds_each_way_of_writing_a_number_inline(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        'x = 1.5\na = f"{x:.2f} {x:,.0f} {x:.0%} {x:g} {x:>8} {x!r}"\n'
        'b = "%.1f" % x\nc = format(x, ".3g")\nd = "{:.1f} {}".format(x, "s")\n'
        'e = "{} {!r}".format(x, x)\nf = "100%" + f"{x:>8}"\n'
    )
    assert _inline_formats(source) == [
        (2, ",.0f"),
        (2, ".0%"),
        (2, ".2f"),
        (2, "g"),
        (3, "%.1f"),
        (4, "'.3g'"),
        (5, "{:.1f}"),
    ]


def test_numbers_in_the_worded_stages_go_through_store_wording() -> None:
    """No inline number format in the stages that write sentences and tables: each kind of
    number (ratio, share, duration, count, throughput, size) reads as store.wording writes it.
    The allowed formats are ones no person reads as a number (a flag, a file name, a key)."""
    inline = []
    for stage in WORDED:
        for path in sorted((ROOT / stage).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in NOT_SCANNED:
                continue
            inline += [
                f"{rel}:{line}: {spec}"
                for line, spec in _inline_formats(path)
                if (rel, spec) not in ALLOWED
            ]
    assert inline == []
