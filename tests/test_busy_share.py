"""Issue 41, item 4: the busy share the verdict quotes and the one the breakdown chart draws are
one figure: the profile's busy seconds over the median (unprofiled) step, capped at the step.
The chart drew the busy time over the *profiled* step, so "device busy 100% (capped ...)" stood
beside a bar 21% idle for the same point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench.report.why_plots import step_shares
from gpubench.science import bottleneck as B
from gpubench.store.wording import percent

RUN = Path(__file__).parent.parent / "results" / "20261125-h100-quick" / "run" / "results.jsonl"


def _profiled() -> list[dict]:
    rows = [json.loads(line) for line in RUN.read_text().splitlines()]
    return [
        r
        for r in rows
        if r["status"] == "ok"
        and isinstance(r.get("profile"), dict)
        and r["profile"].get("category_s")
    ]


def test_the_chart_draws_the_verdicts_busy_share() -> None:
    rows = _profiled()
    assert len(rows) > 50
    for r in rows:
        shares, idle = step_shares(r)
        busy, capped = B.busy_fraction(r)  # type: ignore[misc]
        assert sum(shares.values()) + idle == pytest.approx(1.0)
        assert 1 - idle == pytest.approx(busy)
        said = B.classify(r)
        if said is not None and "device busy" in said.evidence:
            assert f"device busy {percent(busy)} of the median step" in said.evidence
            assert ("capped" in said.evidence) == capped


def test_a_capped_busy_share_draws_no_idle_time() -> None:
    """The published points the verdict calls busy 100% (capped) that the old chart drew with
    a fifth or more of the step idle (its busy time over the profiled step)."""
    capped = [r for r in _profiled() if B.busy_fraction(r) == (1.0, True)]
    old_idle = [1 - r["profile"]["busy_s"] / r["profile"]["step_time_s"] for r in capped]
    assert max(old_idle) >= 0.2  # the defect: up to a fifth of the step drawn idle
    for r in capped:
        assert step_shares(r)[1] == 0.0
