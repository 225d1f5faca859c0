"""The verdict is said once (issue 40): the terminal's lines (`explain`, the end of a sweep) and
the report's HTML card are drawn from the same items, so over published run folders the card,
its tags stripped and its text unescaped, holds exactly the terminal's lines. The HTML card
once left out the economy lines and named the bottleneck and the next experiment its own way."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pandas as pd
import pytest

from gpubench.config import prices
from gpubench.report.explain import run_verdicts
from gpubench.report.runs import combine, load_runs
from gpubench.report.verdict_section import verdict_section
from gpubench.run import cost
from gpubench.science.verdict import ModelVerdict

RESULTS = Path(__file__).parent.parent / "results"


def _text(fragment: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", fragment))


def _card_lines(section: str) -> list[list[str]]:
    """Per card of the verdict section: 'heading: headline', then '  key: text' per item, the
    terminal's layout."""
    out = []
    for card in section.split('<div class="verdict">')[1:]:
        (model,) = re.findall(r"<h3>(.*?)</h3>", card)
        (headline,) = re.findall(r"<p>(.*?)</p>", card)
        items = re.findall(r"<li>(.*?)</li>", card)
        out.append([f"{_text(model)}: {_text(headline)}", *(f"  {_text(i)}" for i in items)])
    return out


def _same(verdicts: list[ModelVerdict]) -> None:
    assert verdicts
    assert _card_lines(verdict_section(verdicts)) == [v.lines() for v in verdicts]


@pytest.mark.parametrize(
    "folder",
    [
        "20261123-cpu-quick-confirmed",  # confirmed leads, levers, not-levers
        "20261125-h100-quick/run",  # several devices: per device and across them
        "20261122-cpu-quick",
        "20261124-cpu-convergence-accumulate",  # fastest to target, effective batch
    ],
)
def test_the_report_says_the_terminals_verdict(folder: str) -> None:
    runs = load_runs([RESULTS / folder])
    _same(run_verdicts(runs))


def test_the_reports_verdict_names_the_cheapest_as_the_terminal_does() -> None:
    runs = load_runs([RESULTS / "20261123-cpu-quick-confirmed"])
    rows = combine(runs).to_dict("records")
    price = prices.Prices({"cpu": 0.10})
    for r in rows:
        r.update(cost.columns(r, price))
    verdicts = run_verdicts(runs, pd.DataFrame(rows))
    assert any(line.startswith("  cheapest: ") for v in verdicts for line in v.lines())
    _same(verdicts)
