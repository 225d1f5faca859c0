"""Whether a code version (the head) trains one point slower than another (the base), from
rounds that measured both in the same minutes (run.ab): a pure function of their figures.

Round r measured the point once from each version, each in a fresh process, one right after
the other, so whatever the machine did in those seconds fell on both: the round's head/base
ratio of samples/s is a paired sample, and the machine's drift between rounds cancels in it.
The ratio's median and its 95% interval are science.leaders.spread's (the sign test's, the
statistic that judges a lead), and the interval is read against a `margin`, the slowdown
that matters:

- "slower": the whole interval lies below 1/(1 + margin): the head is slower by more than the
  margin (the gate fails);
- "faster": the whole interval lies above 1 + margin;
- "within the margin": the interval lies inside [1/(1 + margin), 1 + margin];
- "cannot tell": the interval is wider than the margin on a side and reaches into it (more
  rounds narrow it); the gate passes, saying so.

Each round is a fresh pair of processes, so the interval over the rounds covers the spread
between processes (17-38% on a CPU for one configuration) as well as the machine's drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.science import leaders

READINGS = ("slower", "faster", "within the margin", "cannot tell")
MARGIN = 0.05  # the default: a slowdown under 5% is not worth failing a change for
# The fewest rounds whose median ratio has a 95% interval (the sign test's): 6.
MIN_ROUNDS = leaders.MIN_ROUNDS


@dataclass(frozen=True)
class Judgement:
    """One point's head/base samples/s ratio over the rounds: its median, its 95% interval
    (`low`, `high`) and what it reads at `margin` (one of READINGS)."""

    ratio: float
    low: float
    high: float
    margin: float
    reading: str

    @property
    def fails(self) -> bool:
        """The head is slower than the base by more than the margin, at 95% confidence."""
        return self.reading == "slower"


def judge(base: list[float], head: list[float], margin: float = MARGIN) -> Judgement:
    """The head/base ratio of `head[r] / base[r]` (samples/s of round r, both measured in it)
    read against `margin` (a share > 0, below 1). ValueError naming the value where the
    rounds differ in number, are fewer than MIN_ROUNDS, or hold a figure that is not positive,
    or where the margin is not such a share."""
    if not (isinstance(margin, int | float) and 0 < float(margin) < 1):
        raise ValueError(f"invalid margin {margin!r}; allowed: a share above 0 and below 1")
    if len(base) != len(head) or len(base) < MIN_ROUNDS:
        raise ValueError(
            f"need the same number of rounds of each version, {MIN_ROUNDS} at the least; "
            f"got {len(base)} of the base and {len(head)} of the head"
        )
    if any(not (x > 0 and x != float("inf")) for x in (*base, *head)):
        raise ValueError("samples/s must be finite and positive")
    ratios = [h / b for b, h in zip(base, head, strict=True)]
    ratio, low, high = leaders.spread(ratios, [len(ratios)])
    m = float(margin)
    if high < 1 / (1 + m):
        reading = "slower"
    elif low > 1 + m:
        reading = "faster"
    elif low >= 1 / (1 + m) and high <= 1 + m:
        reading = "within the margin"
    else:
        reading = "cannot tell"
    return Judgement(ratio, low, high, m, reading)
